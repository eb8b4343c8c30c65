"""Propagation kernels (Neumann, Garnett, Bauckhage and Kersting, 2016): node
distributions (labels) or attributes diffused along the edges, hashed at every step."""
from __future__ import annotations

import math

import numpy as np
import torch

from .._validation import check_bool, is_int, is_real
from ._batch import GraphSet, check_memory, check_numpy_seed, compact, sorted_unique
from ._labels import CountFeatureKernel, histogram, int64_label_values

__all__ = ["Propagation", "PropagationAttr"]


def _propagate(G: GraphSet, P: torch.Tensor) -> torch.Tensor:
    """T P for the row-normalized adjacency T = D⁻¹A of every graph (edges s → t as
    given, self-loops kept; a node without out-edge gets a zero row, as an l1-normalized
    zero row)."""
    src, dst = G.edge_index
    deg = torch.bincount(src, minlength=P.shape[0]).to(P.dtype)
    w = (1.0 / deg.clamp_min(1)).index_select(0, src)
    return torch.zeros_like(P).index_add_(0, src, P.index_select(0, dst) * w[:, None])


def _check_common(t_max, w, random_state):
    if not is_int(t_max) or t_max < 1:
        raise ValueError(f"t_max must be a positive int, got {t_max!r}")
    if not is_real(w) or not math.isfinite(w) or w <= 0:
        raise ValueError(f"w must be a positive number (the bin width), got {w!r}")
    check_numpy_seed(random_state, "the hash draws")


class Propagation(CountFeatureKernel):
    r"""Propagation kernel on node labels (Neumann et al., 2016, Algorithms 1 and 3).

    Every node starts with the one-hot distribution of its label, P_0; at step t the
    distributions diffuse along the edges, P_{t+1} = T P_t with T = D⁻¹A the random-walk
    transition matrix of each graph, and each node's distribution is hashed to a bin by
    locality-sensitive hashing, h_t(p) = ⌊(⟨p, u_t⟩ + b_t)/w⌋ with u_t random (one entry
    per label), b_t uniform on [0, w). The kernel counts the nodes of equal bins, step
    by step:

    .. math:: k(G, G') = \sum_{t=0}^{t_{\max}-1} \sum_{\text{bins } c}
              n_{t,c}(G)\, n_{t,c}(G').

    ``M="TV"`` (total variation) draws the entries of u_t Cauchy (a ratio of two
    standard normals) on the distributions; ``M="H"`` (Hellinger) draws them normal and
    hashes √p (Neumann et al., 2016, Section 3.2).

    **Reads** the node labels (``x``, each distinct row one label) and the edges; not
    the attributes (:class:`PropagationAttr` does).

    Parameters
    ----------
    t_max : int
        Number of steps (hashings), ≥ 1.
    w : float
        Bin width w > 0.
    M : {"TV", "H"}
        The distance the hashing preserves.
    random_state : int, numpy RandomState or None
        Seed of the hash draws (see ``n_labels``), 0 ≤ random_state < 2^32; None: a seed
        drawn from NumPy's global generator when the object is first called, then kept
        (as GraKeL's fitted kernels; a new object, or a clone made before the first call,
        draws anew; a later clone keeps the seed); a RandomState:
        its state at the first call, replayed at every call (its stream itself with
        ``n_labels``; per-label draws take the seed ``randint(2^32)`` from it). Every call of
        one object draws the same, and a graph's features depend on its own labels only,
        never on the other graphs of the call: ``k(X)``, ``k(X, Y)`` and ``k(Y)`` are
        blocks of ``k(X ∪ Y)``, so a model fitted with it predicts with the same hashes.
    n_labels : int or None
        How u_t is drawn.

        - ``None`` (default): **per label**. The entries of label ℓ (a row v of ``x``)
          come from its own stream, ``numpy.random.default_rng([random_state, 1, *z(v)])``
          (z(v): each entry v_i as the two 32-bit words, low then high, of the
          non-negative int 2v_i for v_i ≥ 0 and −2v_i − 1 otherwise, so that distinct
          rows seed distinct streams), which draws a (t_max, 2) array of standard
          normals a: u_t(ℓ) = a[t, 0]/a[t, 1] for TV, a[t, 0] for H; b_t = w·r_t with r =
          ``default_rng([random_state, 0]).random(t_max)``. The paper's hash (i.i.d.
          Cauchy or normal entries), with draws that do not depend on which labels
          occur; not GraKeL's numbers.
        - an int L: **GraKeL's draws**. The labels are the integers 0..L−1 — ``x`` one
          column of them, or one-hot rows of width L (torch-geometric's ``TUDataset``);
          others are refused (ValueError naming n_labels). numpy ``RandomState(
          random_state)`` draws, for each t in turn, u_t (L entries in label order), its
          Cauchy divisor for TV, then b_t = w·U[0, 1): the draws of GraKeL 0.1.11's
          ``Propagation(random_state=...)`` when its ``fit`` sees all L labels, the
          integers 0..L−1 (they then enumerate in that order). So ``k(X ∪ Y)`` equals
          GraKeL's ``fit_transform`` on X ∪ Y, and ``k(X, Y)`` its blocks, whenever all
          L labels occur in X ∪ Y; GraKeL's own ``fit(X).transform(Y)`` draws for the
          labels of X only, and differs when some label is missing from X.
    normalize : bool
        Cosine normalization, applied lazily.

    Notes
    -----
    The hash of step t needs ⟨P_t, u_t⟩ = T^t ⟨P_0, u_t⟩ only (TV: T is linear), so
    the t_max projections are diffused as an (N, t_max) matrix, one sparse product per
    step: O(t_max² E) in all. ``M="H"`` needs √P_t: the (N, L) distributions are
    diffused (L the labels that occur, or ``n_labels``). The bins of each step are
    numbered by one sort; the features (one column per step and bin) are sparse, a
    features KernelMatrix. Per-label draws cost one small generator per distinct label
    (about 30 µs each). With ``M="H"`` and per-label draws, ⟨√P_t, u_t⟩ is a dot product
    over the labels of the call, whose floating-point rounding may differ between calls
    with different label sets: a node within about 1e-16 × ``|⟨√p, u⟩|`` of a bin edge could
    then fall in the neighbouring bin (the TV hash and ``n_labels`` do not have this).

    References
    ----------
    M. Neumann, R. Garnett, C. Bauckhage and K. Kersting, "Propagation kernels: efficient
    graph kernels from propagated information", Machine Learning 102:209–245 (2016).

    Examples
    --------
    >>> import torch
    >>> from torch_geometric.data import Data
    >>> from torchkern.graphs import Propagation
    >>> path = Data(x=torch.tensor([[0], [1], [0]]),
    ...             edge_index=torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]]))
    >>> Propagation(t_max=2)([path, path]).to_dense().shape
    torch.Size([2, 2])
    """

    _graph_fields = ("nodes", "edges")  # a list of Data: no node attributes read

    def __init__(self, t_max: int = 5, w: float = 0.01, M: str = "TV",
                 random_state: int | None = 0, n_labels: int | None = None,
                 normalize: bool = False):
        super().__init__()
        _check_common(t_max, w, random_state)
        if M not in ("TV", "H"):
            raise ValueError(f"M must be 'TV' or 'H', got {M!r}")
        if n_labels is not None and (not is_int(n_labels) or n_labels < 1):
            raise ValueError(f"n_labels must be None (per-label draws) or a positive int "
                             f"(GraKeL's draws for the labels 0..n_labels-1), got {n_labels!r}")
        self.t_max, self.w, self.M, self.random_state = t_max, float(w), M, random_state
        self.n_labels, self.normalize = n_labels, check_bool(normalize, "normalize")

    def extra_repr(self) -> str:
        return (f"t_max={self.t_max}, w={self.w}, M={self.M!r}, "
                f"random_state={self.random_state}, n_labels={self.n_labels}, "
                f"normalize={self.normalize}")

    def _grakel_draws(self):
        """GraKeL's draws: u_t (n_labels,) and b_t for every t, one RandomState stream."""
        rs = self._numpy_stream()
        us, bs = [], []
        for _ in range(self.t_max):
            u = rs.randn(self.n_labels)
            if self.M == "TV":
                u = u / rs.randn(self.n_labels)
            us.append(u)
            bs.append(self.w * rs.rand())
        return np.stack(us, 1), bs

    def _label_draws(self, values: torch.Tensor):
        """Per-label draws: u_t(ℓ) for every distinct label row of ``values`` (L, d), each
        from its own stream, and b_t."""
        rows = int64_label_values(values.cpu(), "Propagation").tolist() if values.numel() \
            else [[]] * values.shape[0]
        U, seed = np.empty((len(rows), self.t_max)), self._fixed_draws()
        if isinstance(seed, np.random.RandomState):
            seed = int(seed.randint(2 ** 32, dtype=np.int64))
        for i, v in enumerate(rows):
            a = np.random.default_rng([seed, 1] + _seed_words(v))
            a = a.standard_normal((self.t_max, 2))
            U[i] = a[:, 0] / a[:, 1] if self.M == "TV" else a[:, 0]
        b = self.w * np.random.default_rng([seed, 0]).random(self.t_max)
        return U, b.tolist()

    def _grakel_ids(self, values: torch.Tensor) -> torch.Tensor:
        """The label 0..n_labels−1 of every distinct label row (L, d): the row's one entry
        (d = 1) or the column of its 1 (one-hot rows of width n_labels)."""
        L, d = values.shape
        if d == 0:
            return torch.zeros(L, dtype=torch.long, device=values.device)
        if d == self.n_labels and bool(((values == 0) | (values == 1)).all()) \
                and bool((values.sum(1) == 1).all()):
            return values.argmax(1)
        if d == 1 and bool(((values >= 0) & (values < self.n_labels)).all()):
            return values[:, 0].long()
        raise ValueError(f"n_labels={self.n_labels}: the node labels must be the integers "
                         f"0..{self.n_labels - 1} (x one column of them) or one-hot rows of "
                         f"width {self.n_labels}; got rows of width {d}"
                         + ("" if d != 1 else f" with values in "
                            f"[{values.min().item():g}, {values.max().item():g}]"))

    def _entries(self, G: GraphSet):
        # the labels that occur: ids into `rows`, the distinct label rows
        if G.node_label.numel():
            present, labels, _, _ = sorted_unique(G.node_label)
            rows = G.label_values.index_select(0, present)
        else:
            labels, rows = G.node_label, G.label_values[:0]
        if self.n_labels is None:
            U, b = self._label_draws(rows)
        else:
            U, b = self._grakel_draws()
            labels = self._grakel_ids(rows).index_select(0, labels)
        U = torch.from_numpy(U).to(G.device)
        L = U.shape[0]
        N = labels.numel()
        if self.M == "TV":
            Z = U.index_select(0, labels)  # ⟨P_0, u_t⟩ for every t, (N, t_max)
            P = None
        else:
            check_memory(8 * N * L * 3, "Propagation(M='H'): the (nodes, labels) "
                         "distributions", G.device)
            P = torch.zeros(N, L, dtype=torch.float64, device=G.device)
            P[torch.arange(N, device=G.device), labels] = 1
        hashes = []
        for t in range(self.t_max):
            z = Z[:, t] if P is None else P.sqrt() @ U[:, t]
            num = z + b[t]
            h = num / self.w  # a bin width below ~1e-300 can overflow it
            hashes.append(torch.floor(h) if bool(torch.isfinite(h).all())
                          else _wide_floor(h, *torch.frexp(num), self.w))
            if t < self.t_max - 1:
                if P is None:
                    Z = _propagate(G, Z[:, t + 1:])
                    Z = torch.cat([Z.new_zeros(N, t + 1), Z], 1)
                else:
                    P = _propagate(G, P)
        return _bin_counts(G, hashes)


class PropagationAttr(CountFeatureKernel):
    r"""Propagation kernel on continuous node attributes (Neumann et al., 2016), as
    GraKeL 0.1.11's ``PropagationAttr``.

    The attribute vectors diffuse along the edges, P_{t+1} = T P_t (T = D⁻¹A), and at
    every step each node is hashed coordinate by coordinate,
    h_t(p) = (⌊(p_j u_{t,j} + b_{t,j})/w⌋)_j with u_t random (Cauchy for ``M="L1"``,
    normal for ``M="L2"``) and b_t = w·N(0, I); nodes with equal hash vectors share a
    bin, and the kernel counts the nodes of equal bins step by step,
    k(G, G') = Σ_t Σ_c n_{t,c}(G) n_{t,c}(G'). (This per-coordinate quantization is
    GraKeL's hash; the paper hashes a random projection, as :class:`Propagation` does.)

    **Reads** the continuous node attributes — the Data field named ``node_attr``
    (default ``"node_attributes"``; ``"x"`` reads ``x``) — and the edges; not the labels.

    Parameters
    ----------
    t_max : int
        Number of steps, ≥ 1.
    w : float
        Bin width w > 0.
    M : {"L1", "L2"}
        The distance the hashing preserves.
    random_state : int, numpy RandomState or None
        Seed: numpy ``RandomState(random_state)`` draws, for each t in turn, u_t (d
        entries), its Cauchy divisor for L1, then b_t = w·N(0, I_d) — GraKeL's draws,
        so both give the same values for the same seed (or RandomState). None: a seed
        drawn from NumPy's global generator when the object is first called, then kept
        (a new object, or a clone made before the first call, draws anew; a later clone
        keeps the seed); a RandomState is replayed from its state at the first call.
        Every call of one object draws the same.
    node_attr : str
        The Data field holding the node attributes.
    normalize : bool
        Cosine normalization, applied lazily.

    References
    ----------
    M. Neumann, R. Garnett, C. Bauckhage and K. Kersting, "Propagation kernels: efficient
    graph kernels from propagated information", Machine Learning 102:209–245 (2016).

    Examples
    --------
    >>> import torch
    >>> from torch_geometric.data import Data
    >>> from torchkern.graphs import PropagationAttr
    >>> g = Data(edge_index=torch.tensor([[0, 1], [1, 0]]), num_nodes=2,
    ...          node_attributes=torch.tensor([[0.0], [8.0]]))
    >>> PropagationAttr(t_max=2)([g]).to_dense().shape
    torch.Size([1, 1])
    """

    _graph_fields = ("node_attributes", "edges")  # a list of Data: no x read

    def __init__(self, t_max: int = 5, w: float = 4.0, M: str = "L1",
                 random_state: int | None = 0, node_attr: str = "node_attributes",
                 normalize: bool = False):
        super().__init__()
        _check_common(t_max, w, random_state)
        if M not in ("L1", "L2"):
            raise ValueError(f"M must be 'L1' or 'L2', got {M!r}")
        if not isinstance(node_attr, str):
            raise TypeError(f"node_attr must be the name of a Data field (a str), got "
                            f"{node_attr!r}")
        self.t_max, self.w, self.M, self.random_state = t_max, float(w), M, random_state
        self.node_attr, self.normalize = node_attr, check_bool(normalize, "normalize")

    def extra_repr(self) -> str:
        return (f"t_max={self.t_max}, w={self.w}, M={self.M!r}, random_state="
                f"{self.random_state}, node_attr={self.node_attr!r}, normalize={self.normalize}")

    def _check_size(self, X: GraphSet, name: str) -> None:
        if getattr(X, "node_attributes", None) is None:
            raise ValueError(f"{name}: PropagationAttr reads continuous node attributes, and "
                             f"the graphs have no field {self.node_attr!r}: give every graph "
                             f"node attributes (num_nodes, d) in that field, or name the "
                             f"field with node_attr=")

    def _check_pair(self, X: GraphSet, Y: GraphSet | None) -> None:
        if Y is not None and X.node_attributes.shape[1] != Y.node_attributes.shape[1]:
            raise ValueError(f"the node attributes of X (width {X.node_attributes.shape[1]}) "
                             f"and Y (width {Y.node_attributes.shape[1]}) are not comparable")

    def _entries(self, G: GraphSet):
        P = G.node_attributes
        d = P.shape[1]
        rs = self._numpy_stream()
        hashes = []
        for t in range(self.t_max):
            u = rs.randn(d)
            if self.M == "L1":
                u = u / rs.randn(d)
            r = rs.randn(d)
            with np.errstate(over="ignore"):  # w near float64's max: b = ±inf
                b = self.w * r
            u, b, r = (torch.from_numpy(v).to(P.device) for v in (u, b, r))
            z = (P * u + b) / self.w
            if not bool(torch.isfinite(z).all()):  # attributes near 1e308, w tiny or huge
                # P·u or b may overflow where z does not: the same value, another order
                z = torch.where(torch.isfinite(z), z, P * (u / self.w) + r)
                (mp, ep), (mu, eu) = torch.frexp(P), torch.frexp(u)
                hashes.append(_wide_floor(z, mp * mu, ep + eu, self.w))
            else:
                hashes.append(torch.floor(z))
            if t < self.t_max - 1:
                P = _propagate(G, P)
                if not bool(torch.isfinite(P).all()):  # a sum of terms near float64's max
                    raise ValueError(f"PropagationAttr: the node attributes (field "
                                     f"{self.node_attr!r}) overflow float64 when averaged "
                                     f"over neighbours at step {t + 1}; scale them down")
        return _bin_counts(G, hashes)


def _wide_floor(z, m, e, w: float) -> torch.Tensor:
    """The propagation hash ⌊z⌋ (N,) or (N, d), z = (m·2^e)/w, where some z overflowed
    float64: the bins as (mantissa, exponent) columns (N, 2) or (N, 2d), ``torch.frexp``
    of ⌊z⌋ where z is finite and of m·2^e/w where it is not — computed from the mantissas
    and exponents (m/w's mantissa, e minus w's exponent), so that nothing overflows. There
    |z| > 2^1023: b/w (a standard normal, Propagation(Attr)'s offset) lies far below one
    unit in the last place and ⌊·⌋ is the identity. Equal values get equal pairs, distinct
    ones distinct pairs: the bins of ⌊z⌋ in a wider exponent range (every finite value
    keeps its bin)."""
    if z.dim() == 1:
        z, m, e = z[:, None], m[:, None], e[:, None]
    big = ~torch.isfinite(z)
    fm, fe = torch.frexp(torch.floor(z.masked_fill(big, 0.0)))
    mw, ew = math.frexp(w)
    bm, be = torch.frexp(m / mw)  # |m / mw| in [1/4, 2): finite
    return torch.cat([torch.where(big, bm, fm), torch.where(big, e - ew + be, fe).to(z.dtype)],
                     1)


def _seed_words(row) -> list:
    """A label row (ints) as seed words for numpy's SeedSequence: each entry e as the low
    and the high 32-bit word of z = 2e (e ≥ 0) or −2e − 1 (e < 0). Fixed two words per
    entry: SeedSequence splits a large int into its words itself, so that rows such as
    (2^31, 2) and (0, −2^33 − 1) would otherwise seed the same stream."""
    out = []
    for e in row:
        z = 2 * e if e >= 0 else -2 * e - 1
        out += [z & 0xFFFFFFFF, z >> 32]
    return out


def _bin_counts(G: GraphSet, hashes):
    """Counts of every (graph, step, bin): the hashes of step t (N,) or (N, d) numbered by
    one sort, steps one after the other: ``(rows, cols, counts, n_columns)``."""
    g = G.graph_of_node
    rows, cols, vals, offset = [], [], [], 0
    for h in hashes:
        if h.dim() == 1:
            h = h[:, None]
        # each column's values numbered (1-D sorts), then the rows by packed keys
        columns, sizes = [], []
        for c in h.unbind(1):
            values, inv = torch.unique(c, return_inverse=True)
            columns.append(inv)
            sizes.append(max(values.numel(), 1))
        ids, cnt, _ = compact(columns, sizes)
        nb = max(cnt.numel(), 1)
        r, c, v = histogram(g, ids, len(G), nb)
        rows.append(r), cols.append(c + offset), vals.append(v)
        offset += nb
    return torch.cat(rows), torch.cat(cols), torch.cat(vals), offset
