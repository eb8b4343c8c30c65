"""Propagation kernels (Neumann, Garnett, Bauckhage and Kersting, 2016): node
distributions (labels) or attributes diffused along the edges, hashed at every step."""
from __future__ import annotations

import math
import warnings

import numpy as np
import torch

from .._validation import is_int
from ._batch import GraphSet, check_memory, compact
from ._labels import CountFeatureKernel, histogram, initial_labels

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
    if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or w <= 0:
        raise ValueError(f"w must be a positive number (the bin width), got {w!r}")
    if not is_int(random_state) or random_state < 0:
        raise ValueError(f"random_state must be a non-negative int (the seed of the hash "
                         f"draws), got {random_state!r}")


class Propagation(CountFeatureKernel):
    r"""Propagation kernel on node labels (Neumann et al., 2016, Algorithms 1 and 3).

    Every node starts with the one-hot distribution of its label, P_0; at step t the
    distributions diffuse along the edges, P_{t+1} = T P_t with T = D⁻¹A the random-walk
    transition matrix of each graph, and each node's distribution is hashed to a bin by
    locality-sensitive hashing, h_t(p) = ⌊(⟨p, u_t⟩ + b_t)/w⌋ with u_t random, b_t
    uniform on [0, w). The kernel counts the nodes of equal bins, step by step:

    .. math:: k(G, G') = \sum_{t=0}^{t_{\max}-1} \sum_{\text{bins } c}
              n_{t,c}(G)\, n_{t,c}(G').

    ``M="TV"`` (total variation) draws u_t Cauchy (a ratio of two standard normals) on
    the distributions; ``M="H"`` (Hellinger) draws u_t normal and hashes √p.

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
    random_state : int
        Seed of the hash draws: numpy ``RandomState(random_state)`` draws, for each t in
        turn, u_t (one entry per distinct label of the compared graphs, in sorted label
        order), its Cauchy divisor for TV, then b_t = w·U[0, 1) — the draws of GraKeL's
        ``Propagation(random_state=...)`` in its ``fit``, so both give the same values
        when GraKeL's labels are the integers 0..L−1 in that order. Every call draws the
        same, so Grams of training and test graphs hash alike as long as the test graphs
        bring no new label (the labels that occur set u_t); ``k(X, Y)`` warns when X and
        Y each have labels the other lacks — then take blocks of the Gram of all graphs.
    normalize : bool
        Cosine normalization, applied lazily.

    Notes
    -----
    The hash of step t needs ⟨P_t, u_t⟩ = T^t ⟨P_0, u_t⟩ only (TV: T is linear), so
    the t_max projections are diffused as an (N, t_max) matrix, one sparse product per
    step: O(t_max² E) in all. ``M="H"`` needs √P_t: the (N, L) distributions are
    diffused. The bins of each step are numbered by one sort; the features (one column
    per step and bin) are sparse, a features KernelMatrix.

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

    def __init__(self, t_max: int = 5, w: float = 0.01, M: str = "TV", random_state: int = 0,
                 normalize: bool = False):
        super().__init__()
        _check_common(t_max, w, random_state)
        if M not in ("TV", "H"):
            raise ValueError(f"M must be 'TV' or 'H', got {M!r}")
        self.t_max, self.w, self.M, self.random_state = t_max, float(w), M, random_state
        self.normalize = bool(normalize)

    def extra_repr(self) -> str:
        return (f"t_max={self.t_max}, w={self.w}, M={self.M!r}, "
                f"random_state={self.random_state}, normalize={self.normalize}")

    def _check_pair(self, X: GraphSet, Y: GraphSet | None) -> None:
        # The hash vector has one draw per label that occurs in the graphs given, in the
        # order of the labels (GraKeL's draws): k(X, Y) agrees with k(X) or k(Y) only when
        # the labels of the other side occur there too.
        if Y is None or not X.node_label.numel() or not Y.node_label.numel():
            return
        lx, ly = (torch.unique(G.label_values.reshape(G.label_values.shape[0], -1), dim=0)
                  for G in (X, Y))  # the label values that occur on each side
        both = torch.unique(torch.cat([lx, ly]), dim=0).shape[0]
        if both != lx.shape[0] and both != ly.shape[0]:
            warnings.warn(f"Propagation: X and Y each have node labels the other lacks "
                          f"({both - ly.shape[0]} label(s) of X do not occur in Y); the "
                          f"hash draws follow the labels of X and Y together, so k(X, Y) is "
                          f"not hashed like k(X) or k(Y) and the three are not blocks of one "
                          f"Gram matrix. Compute the Gram of all graphs at once (k(X ∪ Y)) "
                          f"and take its blocks instead.", UserWarning, stacklevel=4)

    def _draws(self, L: int):
        rs = np.random.RandomState(self.random_state)
        us, bs = [], []
        for _ in range(self.t_max):
            u = rs.randn(L)
            if self.M == "TV":
                u = u / rs.randn(L)
            us.append(u)
            bs.append(self.w * rs.rand())
        return np.stack(us, 1), bs

    def _entries(self, G: GraphSet):
        labels, L = initial_labels(G)
        L = max(L, 1)
        U, b = self._draws(L)
        U = torch.from_numpy(U).to(G.device)
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
            hashes.append(torch.floor((z + b[t]) / self.w))
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
    random_state : int
        Seed: numpy ``RandomState(random_state)`` draws, for each t in turn, u_t (d
        entries), its Cauchy divisor for L1, then b_t = w·N(0, I_d) — GraKeL's draws,
        so both give the same values for the same seed. Every call draws the same.
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

    def __init__(self, t_max: int = 5, w: float = 4.0, M: str = "L1", random_state: int = 0,
                 node_attr: str = "node_attributes", normalize: bool = False):
        super().__init__()
        _check_common(t_max, w, random_state)
        if M not in ("L1", "L2"):
            raise ValueError(f"M must be 'L1' or 'L2', got {M!r}")
        if not isinstance(node_attr, str):
            raise TypeError(f"node_attr must be the name of a Data field (a str), got "
                            f"{node_attr!r}")
        self.t_max, self.w, self.M, self.random_state = t_max, float(w), M, random_state
        self.node_attr, self.normalize = node_attr, bool(normalize)

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
        rs = np.random.RandomState(self.random_state)
        hashes = []
        for t in range(self.t_max):
            u = rs.randn(d)
            if self.M == "L1":
                u = u / rs.randn(d)
            b = self.w * rs.randn(d)
            u, b = (torch.from_numpy(v).to(P.device) for v in (u, b))
            hashes.append(torch.floor((P * u + b) / self.w))
            if t < self.t_max - 1:
                P = _propagate(G, P)
        return _bin_counts(G, hashes)


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
