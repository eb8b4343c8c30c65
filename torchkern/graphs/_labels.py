"""The relabel / aggregate core the graph kernels share.

- :func:`compact` (in ``_batch``) — distinct rows of integer columns, by packed keys;
- :func:`neighbourhoods`, :func:`wl_relabel` — one Weisfeiler–Lehman round on a whole
  :class:`GraphSet` at once;
- :class:`CountFeatureKernel` — a kernel whose features are sparse counts per graph
  (WL, shortest path): it builds them once on X ∪ Y so that both share one dictionary,
  and returns Φ_X Φ_Yᵀ lazily.
"""
from __future__ import annotations

import warnings

import numpy as np
import torch

from .._config import _check_backend
from ..gram import DenseKernelMatrix, FeatureKernelMatrix, KernelMatrix, _as_index
from ._batch import GraphKernel, GraphSet, _offsets, compact, count_rows, sorted_unique

def neighbourhoods(G: GraphSet):
    """Every node's out-neighbours, grouped by degree: a list of ``(nodes, table)`` with
    ``table`` (n_d, d) the neighbours of the n_d nodes of degree d. Computed once per set;
    each WL round only reads labels through it."""
    src, dst = G.edge_index  # sorted by source
    N = int(G.ptr[-1])
    deg = torch.bincount(src, minlength=N)
    start = _offsets(deg)[:-1]
    by_deg = torch.argsort(deg, stable=True)
    degrees, counts = torch.unique_consecutive(deg[by_deg], return_counts=True)
    return [(nodes, dst[start[nodes, None] + torch.arange(d, device=dst.device)])
            for d, nodes in zip(degrees.tolist(), torch.split(by_deg, counts.tolist()))]


# odd 64-bit multipliers (golden ratio; SplitMix64's two), as signed int64
_MIX = tuple(m - 2 ** 64 for m in (0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB))


def _sort_rows(t: torch.Tensor) -> torch.Tensor:
    """Every row of an integer matrix sorted (NumPy's on the CPU: 2–3 times torch's for
    short rows)."""
    if t.device.type == "cpu":
        return torch.from_numpy(np.sort(t.numpy(), axis=1))
    return t.sort(1).values


def _wrap(v: int) -> int:
    """A Python int reduced to int64 (two's complement)."""
    return (v + 2 ** 63) % 2 ** 64 - 2 ** 63


def _position_weights(d: int, device):
    """d fixed pseudo-random odd int64 weights (a seeded generator): the hash of a sorted
    row is Σ_j (s_j + 1) w_j, wrapping around."""
    g = torch.Generator().manual_seed(0x5EED)
    w = torch.randint(-2 ** 62, 2 ** 62, (d,), generator=g, dtype=torch.long) * 2 + 1
    return w.to(device)


def _same_rows(labels, rep, rows) -> bool:
    """Whether every node v has the own label and the sorted neighbour row of ``rep[v]``
    (nodes whose rep is another node only)."""
    if not bool((labels[rep] == labels).all()):
        return False
    N = labels.numel()
    group = torch.empty(N, dtype=torch.long, device=labels.device)
    pos = torch.empty(N, dtype=torch.long, device=labels.device)
    for i, (nodes, _) in enumerate(rows):
        group[nodes] = i
        pos[nodes] = torch.arange(nodes.numel(), device=nodes.device)
    if not bool((group[rep] == group).all()):
        return False
    for nodes, srt in rows:
        other = pos[rep[nodes]]
        moved = (other != torch.arange(nodes.numel(), device=nodes.device)).nonzero().reshape(-1)
        if moved.numel() and not bool((srt[moved] == srt[other[moved]]).all()):
            return False
    return True


def wl_relabel(labels: torch.Tensor, n_labels: int, hoods):
    """One Weisfeiler–Lehman round: every node's new label is the id of the pair
    (own label, sorted multiset of its out-neighbours' labels), over all graphs at once.

    ``hoods`` is :func:`neighbourhoods`. Returns ``(new_labels, n_new)`` with new labels
    in [0, n_new). Two nodes of different degrees never share a multiset, so each degree
    group is a rectangular table (own label, d sorted neighbour labels). Every row is
    hashed to an int64 (a seeded linear hash with a final multiply–xor, high bits kept)
    and all N hashes are grouped by one sort; the grouping is then *checked* — every
    node's row equals its group's first row, entry by entry — so the ids are exact. Only
    if two different rows share a hash (rare) are the rows grouped exactly, one sort per
    degree group (:func:`compact`). O((N + E) log N) a round, no loop over nodes or
    graphs.
    """
    N = labels.numel()
    if N == 0 or not hoods:
        return labels.clone(), n_labels if N else 0
    b = max(int(N - 1).bit_length(), 1)
    dmax = max(t.shape[1] for _, t in hoods)
    weights = _position_weights(dmax, labels.device)
    key = torch.empty_like(labels)
    rows = []
    for nodes, table in hoods:
        d = table.shape[1]
        srt = _sort_rows(labels[table])
        h = (labels[nodes] + 1) * _MIX[0] + _wrap(d * _MIX[1])  # int64 wraps around
        if d:
            h = h + ((srt + 1) * weights[:d]).sum(1)
        h = (h ^ (h >> 31)) * _MIX[2]
        key[nodes] = (h >> (b + 1)) & ((1 << (62 - b)) - 1)
        rows.append((nodes, srt))
    _, inv, counts, first = sorted_unique(key)
    rep = first[inv]
    if _same_rows(labels, rep, rows):
        return inv, counts.numel()
    new = torch.empty_like(labels)  # a hash collision: group the rows exactly
    n_new = 0
    for nodes, srt in rows:
        cols = [labels[nodes], *srt.unbind(1)]
        inv, cnt, _ = compact(cols, [n_labels] * len(cols))
        new[nodes] = inv + n_new
        n_new += cnt.numel()
    return new, n_new


def initial_labels(G: GraphSet):
    """The node labels of G renumbered to [0, L) (only labels that occur)."""
    if not G.node_label.numel():
        return G.node_label, 0
    values, labels, _, _ = sorted_unique(G.node_label)
    return labels, values.numel()


def wl_label_sequence(G: GraphSet, n_iter: int):
    """Labels of the initial round and of ``n_iter`` WL rounds: a list of (labels, L)."""
    seq = [initial_labels(G)]
    hoods = neighbourhoods(G) if n_iter else []
    for _ in range(n_iter):
        seq.append(wl_relabel(*seq[-1], hoods))
    return seq


def histogram(graph_of_node: torch.Tensor, labels: torch.Tensor, n_graphs: int,
              n_labels: int):
    """Counts of every (graph, label): ``(rows, cols, counts)`` of a sparse (G, L) matrix."""
    (rows, cols), counts = count_rows([graph_of_node, labels], [n_graphs, n_labels])
    return rows, cols, counts


def _add_sparse_gram(out, a, b):
    """out += a bᵀ (dense out), for sparse COO a and b with the same columns. On the CPU by
    SciPy's sparse product (about twice torch's speed there), its nonzeros added in place;
    elsewhere by torch's."""
    a, b = a.coalesce(), b.coalesce()
    if a.device.type == "cpu":
        import scipy.sparse as sp

        def csr(t):
            return sp.csr_matrix((t.values().numpy(), t.indices().numpy()), shape=tuple(t.shape))
        c = (csr(a) @ csr(b).T).tocoo()  # distinct (row, col) entries
        rows = torch.from_numpy(c.row.astype(np.int64))
        cols = torch.from_numpy(c.col.astype(np.int64))
        out[rows, cols] += torch.from_numpy(c.data).to(out.dtype)
        return out
    with warnings.catch_warnings():  # torch routes it through CSR and warns that CSR is beta
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        return out.add_(torch.sparse.mm(a, b.t()).to_dense())


class SparseFeatureKernelMatrix(FeatureKernelMatrix):
    """Φ_X Φ_Yᵀ for sparse count features, never densifying Φ (p, the number of distinct
    substructures, can be far larger than n).

    Dense pieces (rows, the whole matrix) split the columns of Φ by how many graphs hold
    them: columns shared by many graphs (shortest-path triples, WL's early labels) go
    through one dense matrix product, the rest through a sparse × sparse product — a
    column held by c_x and c_y graphs costs c_x·c_y sparse multiply-adds against n·m
    dense flops, about 2000 times cheaper each (measured on CPU, float32); columns held by one
    side only add nothing, and in K(X, X) a column held by one graph adds only to the
    diagonal.

    ``small_counts``: Φ holds non-negative integers and every row has ‖φ‖² < 2^24. Then
    the dense part runs in float32 (about twice float64's speed) and is still exact:
    every partial sum of non-negative integer products is at most the final value
    ⟨φ, φ'⟩ ≤ max ‖φ‖² < 2^24, an integer float32 holds exactly.
    """

    _dense_ratio = 2048  # cost of a sparse multiply-add / a dense (float32) flop, CPU

    def __init__(self, phi_x, phi_y=None, small_counts: bool = False):
        super().__init__(phi_x, phi_y)
        self._split = None
        self.small_counts = small_counts

    def _transpose(self):
        return SparseFeatureKernelMatrix(self.phi_y, self.phi_x, self.small_counts)

    def _parts(self):
        if self._split is None:
            n, m = self.shape
            p = self.phi_x.shape[1]
            cx = torch.bincount(self.phi_x.indices()[1], minlength=p).double()
            same = self.phi_y is self.phi_x
            cy = cx if same else torch.bincount(self.phi_y.indices()[1], minlength=p).double()
            alone = (cx == 1) if same else torch.zeros(p, dtype=torch.bool, device=cx.device)
            dense = (cx * cy > n * m / self._dense_ratio) & ~alone
            sparse = (cx * cy > 0) & ~dense & ~alone
            (r, c), v = self.phi_x.indices(), self.phi_x.values()
            sel = alone[c]
            diag = torch.zeros(n, dtype=self.dtype, device=self.device).index_add_(0, r[sel], v[sel] ** 2)
            wide = torch.float32 if self.small_counts else None
            px = (_dense_columns(self.phi_x, dense, wide), _keep_columns(self.phi_x, sparse))
            py = px if same else (_dense_columns(self.phi_y, dense, wide),
                                  _keep_columns(self.phi_y, sparse))
            self._split = [px, py, diag]
        return self._split

    def _product(self, idx=None):
        """Rows ``idx`` of Φ_X Φ_Yᵀ (all rows if None)."""
        (dx, lx), (dy, ly), diag = self._parts()
        if idx is not None:
            dx, lx = dx[idx], lx.index_select(0, idx)
        out = _add_sparse_gram((dx @ dy.T).to(self.dtype), lx, ly)
        if self.phi_y is self.phi_x:
            if idx is None:
                out.diagonal().add_(diag)
            else:
                out[torch.arange(idx.numel(), device=idx.device), idx] += diag[idx]
        return out

    def rows(self, idx):
        return self._product(_as_index(idx, self.shape[0], self.device))

    def to_dense(self):
        return self._product()

    def diag(self):
        k = min(self.shape)
        idx = torch.arange(k, device=self.device)
        px, py = self.phi_x.index_select(0, idx), self.phi_y.index_select(0, idx)
        return torch.sparse.sum(px * py, 1).to_dense() if k else torch.zeros(0, dtype=self.dtype)


def _dense_columns(phi, keep, dtype=None):
    """The columns ``keep`` (a boolean mask) of a sparse COO Φ, as a dense matrix (of
    ``dtype``, default Φ's)."""
    (r, c), v = phi.indices(), phi.values()
    sel = keep[c]
    pos = torch.cumsum(keep, 0) - 1
    dtype = dtype or phi.dtype
    v = v.to(dtype)
    out = torch.zeros(phi.shape[0], int(keep.sum()), dtype=dtype, device=phi.device)
    return out.index_put_((r[sel], pos[c[sel]]), v[sel])


def _keep_columns(phi, keep):
    """Φ with only the entries of the columns ``keep`` (sparse COO, same shape)."""
    (r, c), v = phi.indices(), phi.values()
    sel = keep[c]
    return torch.sparse_coo_tensor(torch.stack([r[sel], c[sel]]), v[sel], phi.shape,
                                   is_coalesced=True, check_invariants=False)


def _coo(rows, cols, vals, shape):
    """Sparse COO (rows, cols, vals) with duplicates summed, built coalesced: one sort of
    the packed (row, col) keys (:func:`sorted_unique`) instead of ``coalesce``."""
    key = rows * max(int(shape[1]), 1) + cols
    uniq, inv, counts, first = sorted_unique(key)
    if uniq.numel() == key.numel():  # distinct entries (the usual case): a permutation
        v = vals.new_empty(vals.shape).index_copy_(0, inv, vals)
    else:
        v = vals.new_zeros(uniq.shape).index_add_(0, inv, vals)
    cols_ = max(int(shape[1]), 1)
    return torch.sparse_coo_tensor(torch.stack([uniq // cols_, uniq % cols_]), v, shape,
                                   is_coalesced=True, check_invariants=False)


class CountFeatureKernel(GraphKernel):
    r"""Base of graph kernels k(G, G') = ⟨φ(G), φ(G')⟩ with φ(G) a sparse vector of
    substructure counts.

    A subclass writes :meth:`_entries` — the nonzero counts of every graph of one
    :class:`GraphSet` as ``(graph, feature, count)`` triples, features numbered in a
    dictionary built on that set. ``k(X, Y)`` evaluates it once on X ∪ Y (so both share
    the dictionary, and a substructure seen only in Y matches nothing in X) and returns
    a lazy features KernelMatrix (torch sparse COO Φ).
    """

    def _entries(self, G: GraphSet):
        raise NotImplementedError

    def features(self, X) -> torch.Tensor:
        """φ of every graph of X as a sparse COO tensor (n_graphs, n_features); the
        feature numbering is that of this set's dictionary."""
        X = self.check_input(X, "X")
        rows, cols, vals, p = self._entries(X)
        return _coo(rows, cols, vals.to(X.dtype), (len(X), p))

    def forward(self, X, Y=None, *, backend: str | None = None) -> KernelMatrix:
        """As :meth:`StructuredKernel.forward`; with ``normalize`` the rows of Φ are scaled
        to unit norm in the one pass that builds them (cosine normalization in feature
        space) rather than in two more passes for the diagonals."""
        if not self.normalize:
            return super().forward(X, Y, backend=backend)
        if backend is not None:
            _check_backend(backend)
        X = self.check_input(X, "X")
        if Y is not None:
            Y = self.check_input(Y, "Y")
            if Y.device != X.device:
                raise ValueError(f"X and Y must be on the same device, got {X.device} and {Y.device}")
        K = self._gram(X, Y, unit_rows=True)
        return DenseKernelMatrix(K.to_dense()) if backend == "dense" else K

    def _gram(self, X: GraphSet, Y: GraphSet | None, unit_rows: bool = False):
        self._check_pair(X, Y)
        U = X if Y is None else GraphSet.concat([X, Y])
        rows, cols, vals, p = self._entries(U)
        vals = vals.to(X.dtype)
        sq = torch.zeros(len(U), dtype=vals.dtype, device=vals.device)
        sq.index_add_(0, rows, vals * vals)
        small = (not unit_rows and bool((vals >= 0).all() and (vals == vals.round()).all())
                 and float(sq.max()) < 2 ** 24)
        if unit_rows:
            vals = vals * sq.rsqrt()[rows]  # rows with entries have sq > 0
        nx = len(X)
        if Y is None:
            return SparseFeatureKernelMatrix(_coo(rows, cols, vals, (nx, p)), small_counts=small)
        inx = rows < nx
        phi_x = _coo(rows[inx], cols[inx], vals[inx], (nx, p))
        phi_y = _coo(rows[~inx] - nx, cols[~inx], vals[~inx], (len(Y), p))
        return SparseFeatureKernelMatrix(phi_x, phi_y, small)

    def _diag(self, X: GraphSet) -> torch.Tensor:
        rows, _, vals, _ = self._entries(X)
        vals = vals.to(X.dtype)
        return torch.zeros(len(X), dtype=X.dtype, device=X.device).index_add_(0, rows, vals * vals)
