"""The neighborhood hash kernel (Hido and Kashima, 2009)."""
from __future__ import annotations

import numpy as np
import torch

from .._validation import check_bool, is_int
from ..gram import KernelMatrix, _as_index
from ._batch import (GraphKernel, GraphSet, check_memory, check_numpy_seed, count_rows,
                     segment_ranges)
from ._labels import SparseFeatureKernelMatrix, _coo, int64_label_values

__all__ = ["NeighborhoodHash"]


def rotate(n: torch.Tensor, d, bits: int) -> torch.Tensor:
    """ROT_d of ``bits``-bit labels: the low ``bits`` bits of ``n`` rotated left by
    ``d mod bits`` (``d`` an int or a tensor like ``n``); a rotation by 0 returns ``n``
    as it is (high bits kept), as Hido and Kashima's reference code and GraKeL do."""
    mask = (1 << bits) - 1
    m = torch.remainder(torch.as_tensor(d, device=n.device), bits).expand_as(n)
    rot = ((n << m) & mask) | ((n & mask) >> (bits - m).clamp_max(63))
    return torch.where(m > 0, rot, n)


def segment_xor(index: torch.Tensor, values: torch.Tensor, n: int) -> torch.Tensor:
    """out[i] = XOR of ``values[j]`` over j with ``index[j] == i`` (0 where none), for
    non-negative int64 values: the parity of every bit, summed by one ``index_add``."""
    out = torch.zeros(n, dtype=torch.long, device=values.device)
    if not values.numel():
        return out
    width = max(int(values.max()).bit_length(), 1)
    shifts = torch.arange(width, device=values.device)
    bit = (values[:, None] >> shifts) & 1
    par = torch.zeros(n, width, dtype=torch.long, device=values.device).index_add_(0, index, bit)
    return ((par & 1) << shifts).sum(1)


_HASHED = 1 << 62  # label_numbers: the flag of a number that is a hash of the label row
_MIX = (0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB)


def _mix64(h: np.ndarray) -> np.ndarray:
    """SplitMix64's finalizer on uint64 arrays (wrapping arithmetic): a bijection of
    64-bit words whose every output bit depends on every input bit."""
    h = (h ^ (h >> np.uint64(30))) * np.uint64(_MIX[1])
    h = (h ^ (h >> np.uint64(27))) * np.uint64(_MIX[2])
    return h ^ (h >> np.uint64(31))


def _row_hashes(V: np.ndarray, key: int) -> np.ndarray:
    """A 64-bit hash of every row of the integral float64 array ``V`` (L, d), keyed:
    the same row gives the same word in any set."""
    h = np.full(V.shape[0], np.uint64(key), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for col in V.T.astype(np.int64).view(np.uint64):
            h = _mix64((h + np.uint64(_MIX[0])) ^ _mix64(col + np.uint64(_MIX[0])))
    return h


def bit_labels(values: torch.Tensor, bits: int, rs: np.random.RandomState) -> torch.Tensor:
    """Random ``bits``-bit codes of the label numbers ``values`` (non-negative int64,
    from :func:`label_numbers`): label v gets entry v mod 2^bits of the
    (v div 2^bits)-th random permutation of [0, 2^bits) drawn by ``rs.permutation``
    (the kernel's ``RandomState(random_state)``). Labels 0 … L−1 thus get exactly GraKeL
    0.1.11's codes (its ``choice(2**bits, L, replace=False)`` is the first L entries of
    one such permutation; with more labels than codes, it draws whole blocks), and a
    label's code does not depend on which other labels a set holds. Numbers from
    max(2^bits, 2^16) up (large label values, and the hashes of label rows that
    :func:`label_numbers` flags with ``_HASHED``) get the top ``bits`` bits of the
    number mixed with a key read from the first permutation instead: seeded as the
    others, no table of permutations up to them (codes of distinct labels may then
    coincide, as codes of numbers 2^bits apart do)."""
    top = 1 << bits
    hashed = values >= max(top, 1 << 16)
    plain = values[~hashed]
    vmax = int(plain.max()) if plain.numel() else 0
    blocks = vmax // top + 1
    check_memory(8 * top * blocks, f"NeighborhoodHash with bits={bits} and node label numbers "
                 f"up to {vmax:,} (one random permutation of [0, 2^bits) per 2^bits label "
                 f"numbers; lower bits, or number the labels 0, 1, ...)", "cpu")
    perms = np.concatenate([rs.permutation(top) for _ in range(blocks)])
    codes = torch.from_numpy(perms).to(values.device)[torch.where(hashed, 0, values)]
    if bool(hashed.any()):
        key = np.uint64(int.from_bytes(perms[:8].astype(np.uint8).tobytes(), "little"))
        h = values[hashed].cpu().numpy().astype(np.uint64)
        with np.errstate(over="ignore"):
            h = _mix64(h ^ _mix64(np.full_like(h, key)))
        codes[hashed] = torch.from_numpy((h >> np.uint64(64 - bits)).astype(np.int64)
                                         ).to(values.device)
    return codes


def label_numbers(G: GraphSet) -> torch.Tensor:
    """A number for the label of every node (N,) that depends on the label alone: the
    value of a single non-negative integer column; the column of the 1 of a one-hot row
    of ``x`` (``TUDataset``'s labels); d + Σ_j x_j 2^j for another 0/1 row of d ≤ 16
    columns (several one-hot parts side by side, as Cuneiform's labels; past the d
    one-hot numbers); 0 without ``x``. Any other row (a negative entry, several
    columns of other integers) gets ``_HASHED`` plus 62 bits of a hash of its values,
    which :func:`bit_labels` turns into a code by hashing, not by the permutations."""
    V = G.label_values
    if V.shape[1] == 0:
        return torch.zeros_like(G.node_label)
    int64_label_values(V, "NeighborhoodHash")  # refuses values no int64 holds
    d = V.shape[1]
    num = torch.full((V.shape[0],), -1, dtype=torch.long, device=V.device)
    if d == 1:
        ok = V[:, 0] >= 0
        num[ok] = V[ok, 0].long()
    else:
        binary = ((V == 0) | (V == 1)).all(1)
        ones = V.sum(1)
        hot = binary & (ones == 1)
        num[hot] = V[hot].argmax(1)
        multi = binary & ~hot
        if d <= 16 and bool(multi.any()):
            weights = 2 ** torch.arange(d, device=V.device, dtype=torch.long)
            num[multi] = d + (V[multi].long() * weights).sum(1)
    rest = num < 0
    if bool(rest.any()):
        words = _row_hashes(V[rest].cpu().double().numpy(), 0x6E68)  # "nh"
        num[rest] = torch.from_numpy((words >> np.uint64(2)).astype(np.int64)).to(
            V.device) | _HASHED
    return num[G.node_label]


def multiset_features(graph_of_node, labels, n_graphs):
    """Sparse 0/1 features whose inner product is the size of the multiset intersection
    Σ_ℓ min(c_ℓ(G), c_ℓ(G')) of the node labels: one feature (ℓ, t) for every label ℓ
    and t < c_ℓ(G), since min(a, b) = Σ_t [t < a][t < b]. ``(rows, cols, vals, p)``."""
    (g, lab), cnt = count_rows([graph_of_node, labels], [n_graphs, int(labels.max()) + 1
                                                          if labels.numel() else 1])
    rank = segment_ranges(torch.zeros_like(cnt), cnt)  # 0..c-1 for every (graph, label)
    rows = torch.repeat_interleave(g, cnt)
    width = int(cnt.max()) if cnt.numel() else 1
    # one column per distinct (label, rank) pair
    uniq, inv = torch.unique(torch.repeat_interleave(lab, cnt) * width + rank,
                             return_inverse=True)
    return rows, inv, torch.ones_like(rows), uniq.numel()


class _JaccardRounds(KernelMatrix):
    r"""K_ij = (1/R) Σ_r c_r / (n_i + m_j − c_r), c_r = (Φ_r Ψ_rᵀ)_ij the multiset
    intersection of round r, n_i and m_j the node counts (1 where n_i = m_j = 0).
    Dense pieces are computed row block by row block from the sparse Φ_r; the (n, m)
    matrix is never stored by ``K @ V``."""

    backend = "features"

    def __init__(self, mats, nx, ny):
        self.mats, self.nx, self.ny = mats, nx, ny
        self.shape = (nx.numel(), ny.numel())
        self.dtype, self.device = mats[0].dtype, mats[0].device

    def _transpose(self):
        return _JaccardRounds([m.T for m in self.mats], self.ny, self.nx)

    def rows(self, idx):
        idx = _as_index(idx, self.shape[0], self.device)
        total = (self.nx.index_select(0, idx)[:, None] + self.ny[None, :]).to(self.dtype)
        out = torch.zeros(idx.numel(), self.shape[1], dtype=self.dtype, device=self.device)
        for M in self.mats:
            c = M.rows(idx)
            den = total - c
            out += torch.where(den > 0, c / den.clamp_min(1), torch.ones_like(c))
        return out / len(self.mats)

    def _matmul(self, V):
        return torch.cat([K @ V for _, _, K in self.row_blocks()]) if self.shape[0] else \
            V.new_zeros(0, V.shape[1])

    def diag(self):  # K_ii, from the rounds' paired products: O(n) memory
        k = min(self.shape)
        total = (self.nx[:k] + self.ny[:k]).to(self.dtype)
        out = torch.zeros(k, dtype=self.dtype, device=self.device)
        for M in self.mats:
            c = M.diag()
            den = total - c
            out += torch.where(den > 0, c / den.clamp_min(1), torch.ones_like(c))
        return out / len(self.mats)


class NeighborhoodHash(GraphKernel):
    r"""Neighborhood hash kernel (Hido and Kashima, 2009).

    Every node label becomes a random ``bits``-bit code, and R = ``R`` rounds of
    neighborhood hashing update them:

    - ``nh_type="simple"``: ℓ'(v) = ROT₁(ℓ(v)) ⊕ ⨁_{u ∈ N(v)} ℓ(u);
    - ``nh_type="count_sensitive"``: ℓ'(v) = ROT₁(ℓ(v)) ⊕ ⨁_{a} ROT_{o}(a ⊕ o) over
      the distinct labels a among the neighbours, o the number of neighbours labelled a,

    ROT_d a left rotation of the ``bits`` bits by d and ⊕ bitwise exclusive or. Rounds
    1..R are compared by the proportion of common labels and averaged:

    .. math:: k(G, G') = \frac{1}{R} \sum_{r=1}^{R} \frac{c_r}{|V| + |V'| - c_r},
              \quad c_r = \sum_a \min(\#_a(G_r), \#_a(G'_r)),

    #_a(G_r) the number of nodes of G with label a after r rounds (k(G, G) = 1). This
    is GraKeL 0.1.11's ``NeighborhoodHash(R, nh_type, bits, random_state)``, codes
    included: label number v (:func:`label_numbers`: the column of the 1 of a one-hot
    ``x``, or the value of a non-negative integer column) gets entry v of
    ``numpy.random.RandomState(random_state).permutation(2**bits)`` (further permutations
    for v ≥ 2^bits), the code GraKeL gives to label v when a data set's labels are
    0 … L−1 (its ``choice`` without replacement is that permutation's prefix, assigned
    in the iteration order of a Python set of small integers: increasing). Other rows —
    several 0/1 columns that are not one-hot (Cuneiform's labels: number d + Σ_j x_j 2^j
    past the d one-hot numbers), negative integers, several columns of other integers,
    numbers from 2^16 up — get numbers or codes from the row itself (:func:`bit_labels`:
    a seeded hash for the last three). Every label's code depends on the label alone,
    so k(X_train) and k(X_test, X_train) agree. For
    other labels GraKeL's codes, and so its values, differ: its ``fit`` draws the codes
    for the labels it sees, in the iteration order of their Python set (labels
    1, 2, 5 get the first three entries, not entries 1, 2, 5), and its ``transform``
    gives a label unseen in ``fit`` no code (None).

    Parameters
    ----------
    R : int
        Number of hashing rounds, ≥ 1.
    nh_type : {"simple", "count_sensitive"}
    bits : int
        Width of the label codes (GraKeL's default 8). With more distinct labels than
        2^bits codes, codes repeat (labels collide).
    random_state : int, numpy RandomState or None
        Seed of the label codes. None: a seed drawn once for this kernel object (from
        NumPy's global generator), so that every call of the object — k(X), k(X, Y), a
        fitted model's training and test Grams — uses the same codes, as GraKeL's fitted
        kernel does; a RandomState: its state at the first call, replayed at each.
    normalize : bool
        Cosine normalization; the diagonal is 1 already, so it changes nothing (kept for
        a uniform interface).

    Notes
    -----
    The hashing runs on the whole set at once on tensors: an exclusive or over the
    neighbours is the parity of a segment sum per bit. The multiset intersection c_r is
    an inner product of sparse 0/1 features (one per (label, t) with t below the count
    of the label), so each round is a sparse feature product; the Gram (a ratio of them)
    is computed block of rows by block. Hashed codes (the rows above) may coincide for
    two distinct labels, with probability about L²/2^(bits+1) for L such labels, as
    GraKeL's codes repeat past 2^bits labels; one-hot or 0 … L−1 labels avoid it.

    References
    ----------
    S. Hido and H. Kashima, "A linear-time graph kernel", Proc. IEEE ICDM (2009).

    Examples
    --------
    >>> import torch
    >>> from torch_geometric.data import Data
    >>> from torchkern.graphs import NeighborhoodHash
    >>> path = Data(edge_index=torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]]), num_nodes=3)
    >>> NeighborhoodHash(R=2, random_state=0)([path, path]).to_dense()
    tensor([[1., 1.],
            [1., 1.]], dtype=torch.float64)
    """

    _graph_fields = ("nodes", "edges")  # a list of Data: no node attributes read


    def __init__(self, R: int = 3, nh_type: str = "simple", bits: int = 8, random_state=None,
                 normalize: bool = False):
        super().__init__()
        if not is_int(R) or R < 1:
            raise ValueError(f"R must be an int >= 1, got {R!r}")
        if nh_type not in ("simple", "count_sensitive"):
            raise ValueError(f"nh_type must be 'simple' or 'count_sensitive', got {nh_type!r}")
        if not is_int(bits) or not 1 <= bits <= 56:
            raise ValueError(f"bits must be an int in [1, 56], got {bits!r}")
        check_numpy_seed(random_state, "the label codes")
        self.R, self.nh_type, self.bits = int(R), nh_type, int(bits)
        self.random_state, self.normalize = random_state, check_bool(normalize, "normalize")

    def extra_repr(self) -> str:
        return (f"R={self.R}, nh_type={self.nh_type!r}, bits={self.bits}, "
                f"random_state={self.random_state!r}, normalize={self.normalize}")

    def hashed_labels(self, G: GraphSet):
        """The codes of every node after rounds 1..R: a list of R int64 tensors (N,)."""
        lab = bit_labels(label_numbers(G), self.bits, self._numpy_stream())
        src, dst = G.edge_index
        n = lab.numel()
        out = []
        for _ in range(self.R):
            if self.nh_type == "simple":
                nb = segment_xor(src, lab[dst], n)
            else:
                (s, a), occ = count_rows([src, lab[dst]], [n, int(lab.max()) + 1 if n else 1])
                nb = segment_xor(s, rotate(a ^ occ, occ, self.bits), n)
            lab = rotate(lab, 1, self.bits) ^ nb
            out.append(lab)
        return out

    def _gram(self, X: GraphSet, Y: GraphSet | None):
        self._check_pair(X, Y)
        U = X if Y is None else GraphSet.concat([X, Y], attributes=self._reads_attributes)
        g = U.graph_of_node
        nx = len(X)
        mats = []
        for lab in self.hashed_labels(U):
            _, lab = torch.unique(lab, return_inverse=True)
            rows, cols, vals, p = multiset_features(g, lab, len(U))
            vals = vals.to(X.dtype)
            if Y is None:
                mats.append(SparseFeatureKernelMatrix(_coo(rows, cols, vals, (nx, p)),
                                                      small_counts=True))
                continue
            inx = rows < nx
            mats.append(SparseFeatureKernelMatrix(
                _coo(rows[inx], cols[inx], vals[inx], (nx, p)),
                _coo(rows[~inx] - nx, cols[~inx], vals[~inx], (len(Y), p)), True))
        sizes = U.num_nodes
        return _JaccardRounds(mats, sizes[:nx], sizes[nx:] if Y is not None else sizes)

    def _diag(self, X: GraphSet) -> torch.Tensor:
        return torch.ones(len(X), dtype=X.dtype, device=X.device)
