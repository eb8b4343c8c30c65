"""The pyramid match graph kernel (Nikolentzos et al., 2017)."""
from __future__ import annotations

import numpy as np
import torch

from .._validation import check_bool, is_int
from ..gram import KernelMatrix, _as_index
from ._batch import GraphSet, check_memory, count_rows, is_undirected, segment_ranges
from ._labels import CountFeatureKernel, SparseFeatureKernelMatrix, _coo, _int8_product, \
    _int8_product_works, initial_labels

__all__ = ["PyramidMatch"]

_BUDGET = 2 ** 22  # adjacency entries per batched eigendecomposition
_EDGE_TOL = 1e-9
_TIE_TOL = 1e-9  # moduli this close (relative to max(1, ρ(A))) are a tie
_COARSE = 3e-4  # first bisection tolerance, relative to max(1, ‖T‖) (fastest measured)
_REFINE = 1e-8  # tolerance (relative to ‖T‖) of the chosen eigenvalues for inverse iteration
_TRIDIAGONAL_MIN_N = 56  # CPU graphs from this size: d eigenvectors only


def level_weights(L: int) -> np.ndarray:
    """Weights w_j of the intersections I_0 … I_{L−1} (level j has 2^j bins per
    dimension) in k = Σ_j w_j I_j, as GraKeL 0.1.11 sums them: its loop over the levels
    adds, after level t is filled in, I_{L−1}[t = L−1] + Σ_{p<L−1} 2^{p+1−L}(I_p − I_{p+1})
    with the levels above t still zero. Computed by running that sum on unit vectors
    (it is linear in the I_j). The weights are positive, so k is an inner product."""
    w = np.zeros(L)
    for j in range(L):
        full = np.eye(L)[j]
        for t in range(L):
            part = np.where(np.arange(L) <= t, full, 0.0)
            w[j] += part[L - 1] + sum(2.0 ** (p + 1 - L) * (part[p] - part[p + 1])
                                      for p in range(L - 1))
    return w


def _same_size_groups(G: GraphSet, budget: int, graph_ids: torch.Tensor | None = None):
    """The graphs of G (those of ``graph_ids``, default all) by exact node count, in
    chunks of at most ``budget`` n² entries: yields ``(graph_ids, n)``."""
    ids = torch.arange(len(G), device=G.device) if graph_ids is None else graph_ids
    sizes = G.num_nodes[ids]
    order = ids[torch.argsort(sizes, stable=True)]
    s = torch.sort(sizes, stable=True).values.cpu()
    values, counts = torch.unique_consecutive(s, return_counts=True)
    start = 0
    for n, c in zip(values.tolist(), counts.tolist()):
        step = max(1, budget // max(n * n, 1))
        for i in range(start, start + c, step):
            yield order[i:min(i + step, start + c)], n
        start += c


def _ends(lo, hi, d: int, tol: float) -> int:
    """How many of the d eigenvalues of largest modulus are among the smallest ones:
    ``lo`` holds the smallest eigenvalues in increasing order, ``hi`` the largest in
    decreasing order (d of each, or both the whole spectrum of n > d eigenvalues). |λ|
    falls then rises along the sorted spectrum, so the d largest moduli are a prefix and
    a suffix of it, merged here from both ends; moduli within ``tol`` are a tie, won by
    the smaller eigenvalue."""
    i = j = 0
    for _ in range(d):
        if abs(lo[i]) >= abs(hi[j]) - tol:
            i += 1
        else:
            j += 1
    return i


def _tie_tol(lam) -> float:
    """Moduli closer than this are a tie (``lam``: eigenvalues of the matrix)."""
    return _TIE_TOL * max(1.0, float(np.abs(lam).max()))


# batched eigendecompositions run on matrices padded to a multiple of this many rows
_EIGH_ROWS = 8


def _batched_eigh(A: torch.Tensor):
    """``torch.linalg.eigh`` of the symmetric matrices A (B, n, n), each computed the same
    whatever its place in the batch: ``(λ (B, n) ascending, U (B, n, n))``.

    LAPACK's rounding depends on where a matrix starts in memory (its SIMD kernels treat
    unaligned ends apart): in a batch of n × n float64 matrices, n = 5, the matrices at
    odd places got other eigenvectors than those at even places. Bit-equal values do not
    need them, but a repeated eigenvalue's eigenvectors are any basis of its eigenspace,
    and so PyramidMatch's embedding of a graph depended on the graphs beside it (k(X) ≠
    k(X, X) by up to 2.5). Each matrix is padded to a multiple of ``_EIGH_ROWS`` rows
    with isolated rows (every matrix and spectrum then starts on a 64-byte boundary);
    the padded matrix is block diagonal, so the reduction keeps the blocks apart exactly
    and the padding's eigenpairs (eigenvalue 0, unit vectors on the padding) are
    dropped: those whose vector has no weight on the first n rows."""
    B, n = A.shape[0], A.shape[1]
    m = -(-n // _EIGH_ROWS) * _EIGH_ROWS
    if m == n:
        return torch.linalg.eigh(A)
    P = A.new_zeros(B, m, m)
    P[:, :n, :n] = A
    lam, U = torch.linalg.eigh(P)
    U = U[:, :n, :]
    padding = (U * U).sum(1) < 0.5  # exactly 0 or 1
    keep = torch.argsort(padding.to(torch.int8), dim=1, stable=True)[:, :n]
    return lam.gather(1, keep), U.gather(2, keep[:, None, :].expand(-1, n, -1))


def _largest_modulus_eigh(A: torch.Tensor, d: int) -> torch.Tensor:
    """Unit eigenvectors (B, n, d) of the d eigenvalues of largest modulus of the
    symmetric matrices A (B, n, n), n > d, in decreasing order of eigenvalue (equal ones
    by index), from the full decomposition (:func:`_batched_eigh`, any device). The
    choice is :func:`_ends`, run on all B spectra at once."""
    lam, U = _batched_eigh(A)  # ascending
    B, n = lam.shape
    tol = _TIE_TOL * lam.abs().amax(1).clamp_min(1.0)
    i = torch.zeros(B, dtype=torch.long, device=A.device)  # taken from the bottom
    for j in range(d):  # j taken so far
        lo = lam.gather(1, i[:, None])[:, 0].abs()
        hi = lam.gather(1, (n - 1 - (j - i))[:, None])[:, 0].abs()
        i += lo >= hi - tol
    r = torch.arange(d, device=A.device)
    idx = torch.where(r < i[:, None], r, n - d + r)  # the i smallest, the d − i largest
    idx = idx.gather(1, torch.argsort(-lam.gather(1, idx), dim=1, stable=True))
    return U.gather(2, idx[:, None, :].expand(-1, n, -1))


def _largest_modulus_tridiagonal(a: np.ndarray, d: int):
    """The d eigenvalues of largest modulus of the symmetric matrix ``a`` (n, n),
    n > 2d, C-ordered and overwritten, in decreasing order, and their unit eigenvectors
    (n, d) — ``(w, U)`` — or None where LAPACK reports a failure; the same choice as
    :func:`_largest_modulus_eigh` makes on the whole spectrum.

    Householder reduction to a tridiagonal T = Qᵀ a Q (``dsytrd``); the d smallest and d
    largest eigenvalues of T by bisection (``dstebz``), first to a coarse tolerance —
    enough to tell which d have the largest moduli unless moduli at the cut are within
    a few tolerances, when all 2d are refined to n ε ‖T‖ — then the d chosen ones to
    10⁻⁸ ‖T‖; their eigenvectors of T by inverse iteration (``dstein``; the shifts'
    error only slows its convergence, and its vectors are accurate to working
    precision), the eigenvalues as their Rayleigh quotients (error of the order of ‖T‖
    times the vectors' squared, Parlett, *The Symmetric Eigenvalue Problem*, SIAM,
    1998, §4.6), and Q applied to the vectors from the reflectors (``dormqr``). The
    reduction, 4/3 n³ flops, is most of the cost: a full decomposition with eigenvectors
    takes about 9 n³ (Golub and Van Loan, *Matrix Computations*, 4th ed., Johns Hopkins,
    2013, §8.3–8.4; Demmel, *Applied Numerical Linear Algebra*, SIAM, 1997, §5.3)."""
    from scipy.linalg import lapack
    n = a.shape[0]
    # a is symmetric: its transpose is the same matrix in Fortran order, not copied. The
    # workspace lets dsytrd run blocked (16 columns; SciPy's default, n, runs it
    # unblocked): a third faster at n = 200–1000, one thread
    c, diag, off, tau, info = lapack.dsytrd(a.T, lower=1, overwrite_a=1, lwork=16 * n)
    if info:
        return None
    norm = max(1.0, float(np.abs(diag).max() + 2 * np.abs(off).max()))  # ≥ ‖T‖₂
    coarse = _COARSE * norm
    # the eigenvalues handed to inverse iteration to _REFINE ‖T‖ (its vectors are then
    # accurate to working precision, and their Rayleigh quotients the eigenvalues);
    # where the coarse values cannot tell the d largest moduli, all 2d are refined to
    # n ε ‖T‖, the accuracy of a backward-stable full decomposition's (Demmel, 1997,
    # §5.2), and the choice is made on them
    m1, lo, _, _, i1 = lapack.dstebz(diag, off, 3, 0.0, 0.0, 1, d, coarse, b"E")
    m2, hi, _, _, i2 = lapack.dstebz(diag, off, 3, 0.0, 0.0, n - d + 1, n, coarse, b"E")
    if i1 or i2 or m1 != d or m2 != d:
        return None
    lo, hi = lo[:d].tolist(), hi[d - 1::-1].tolist()
    k = _ends(lo, hi, d, 0.0)
    inner = min(map(abs, lo[:k] + hi[:d - k]))  # the smallest modulus taken
    outer = max(abs(lo[k]) if k < d else 0.0, abs(hi[d - k]) if k else 0.0)  # first left
    close = inner - outer <= 4 * coarse  # the coarse values cannot tell
    fine = (n * np.finfo(np.float64).eps if close else _REFINE) * norm
    w, blocks = [], []
    for il, iu in [(1, d), (n - d + 1, n)] if close else [(1, k), (n - d + k + 1, n)]:
        if iu >= il:
            m, wr, br, split, info = lapack.dstebz(diag, off, 3, 0.0, 0.0, il, iu, fine, b"B")
            if info or m != iu - il + 1:
                return None
            w.append(wr[:m]), blocks.append(br[:m])
    w, blocks = np.concatenate(w), np.concatenate(blocks)
    if close:  # choose on the accurate values (ties included), increasing order
        by_value = np.argsort(w, kind="stable")
        lam = w[by_value]
        k = _ends(lam[:d], lam[:d - 1:-1], d, _tie_tol(lam))
        keep = by_value[np.r_[np.arange(k), np.arange(d + k, 2 * d)]]
        w, blocks = w[keep], blocks[keep]
    # dstein takes the eigenvalues by block, increasing within a block (dstebz's "B")
    grouped = np.lexsort((w, blocks))
    w, iblock = w[grouped], np.zeros(n, dtype=np.int32)
    iblock[:d] = blocks[grouped]
    z, info = lapack.dstein(diag, off, w, iblock, split)
    if info:
        return None
    # the Rayleigh quotients zᵀ T z: the eigenvalues to working precision
    w = diag @ (z * z) + 2 * (off @ (z[:-1] * z[1:]))
    zq, _, info = lapack.dormqr(b"L", b"N", c[1:, :n - 1], tau, z[1:], 64 * (d + 65),
                                overwrite_c=1)
    if info:
        return None
    order = np.argsort(-w, kind="stable")
    return w[order], np.concatenate([z[:1], zq])[:, order]


def _one_blas_thread():
    """One BLAS thread for SciPy's LAPACK (the calls are O(n³) on n of a few hundred:
    a second thread gains little, and with a busy process beside us its waits cost
    far more); SciPy's BLAS is loaded first, so that threadpoolctl sees it."""
    import scipy.linalg.lapack  # noqa: F401
    from threadpoolctl import threadpool_limits
    return threadpool_limits(1, user_api="blas")


def node_embeddings(G: GraphSet, d: int) -> torch.Tensor:
    """|u_q(v)| for every node v and q < d, (N, d), NaN where the graph has fewer than d
    eigenvectors: u_1, u_2, … the unit eigenvectors of the adjacency matrix of v's graph
    for its d eigenvalues of largest modulus (all of them when n ≤ d + 1), in decreasing
    order of eigenvalue. Moduli within 10⁻⁹ max(1, ρ(A)) are a tie, won by the smaller
    eigenvalue.

    On the CPU, graphs of at least ``_TRIDIAGONAL_MIN_N`` nodes (and more than 2d) take
    :func:`_largest_modulus_tridiagonal`, graph by graph: only d eigenvectors, in 40% of
    the time of the full batched ``torch.linalg.eigh`` the others take (1,000 graphs of
    100–300 nodes, one thread)."""
    out = torch.full((int(G.ptr[-1]), d), float("nan"), dtype=torch.float64, device=G.device)
    rest = torch.arange(len(G), device=G.device)
    if G.device.type == "cpu":
        big = G.num_nodes >= max(_TRIDIAGONAL_MIN_N, 2 * d + 1)
        if bool(big.any()):
            with _one_blas_thread():
                failed = _embed_one_by_one(G, big.nonzero().reshape(-1).tolist(), d, out)
            rest = torch.cat([(~big).nonzero().reshape(-1),
                              torch.as_tensor(failed, dtype=torch.long)])
    for gids, n in _same_size_groups(G, _BUDGET, rest):
        if n == 0:
            continue
        A = G.dense_adjacency(gids, n, torch.float64)
        if n <= d + 1:  # every eigenvector (the d largest eigenvalues' for n = d + 1)
            lam, U = _batched_eigh(A)  # ascending
            order = torch.argsort(lam, dim=1, descending=True, stable=True)[:, :d]
            U = U.gather(2, order[:, None, :].expand(-1, n, -1))
        else:
            U = _largest_modulus_eigh(A, d)
        nodes = G.padded_nodes(gids, n).reshape(-1)
        out[nodes, :U.shape[2]] = U.abs().reshape(-1, U.shape[2])
    return out


def _embed_one_by_one(G: GraphSet, graph_ids, d: int, out: torch.Tensor) -> list:
    """:func:`_largest_modulus_tridiagonal` on the graphs ``graph_ids`` of the CPU set G,
    each from its own dense adjacency (no padding, no batch), |U| written into their
    rows of ``out``; returns the graphs where LAPACK failed."""
    ptr, eptr = G.ptr.tolist(), G.eptr.tolist()
    ei, res, failed = G.edge_index.numpy(), out.numpy(), []
    for g in graph_ids:
        s0, n, e0, e1 = ptr[g], ptr[g + 1] - ptr[g], eptr[g], eptr[g + 1]
        a = np.zeros((n, n))
        a[ei[0, e0:e1] - s0, ei[1, e0:e1] - s0] = 1.0
        wU = _largest_modulus_tridiagonal(a, d)
        if wU is None:
            failed.append(g)
        else:
            np.abs(wU[1], out=res[s0:s0 + n])
    return failed


# Φ as int8 patterns up to this many cells (graphs × columns): 256 MB; when less than
# an eighth of them are features, only up to this many multiply-adds for Φ Φᵀ (~10 ms)
_PATTERN_CELLS, _PATTERN_FLOPS = 2 ** 28, 2 ** 30


class _PatternMatrix(KernelMatrix):
    """Σ_w w B_{X,w} B_{Y,w}ᵀ (float64) for 0/1 int8 patterns B (graphs × columns), one
    per level weight w: PyramidMatch's Φ Φᵀ, its features √w times 0/1. Each product
    is exact (``torch._int_mm``: int32 sums, at most the columns' number) and added at
    weight w. ``groups``: ``[(w, B_X, B_Y), …]``, B_Y None for K(X, X)."""

    backend = "features"

    def __init__(self, groups, shape, dtype=torch.float64):
        self.groups = [(w, bx, bx if by is None else by) for w, bx, by in groups]
        self.shape, self.dtype, self.device = tuple(shape), dtype, torch.device("cpu")

    def _transpose(self):
        return _PatternMatrix([(w, by, bx) for w, bx, by in self.groups], self.shape[::-1],
                              self.dtype)

    def _product(self, idx=None):
        out = torch.zeros(self.shape[0] if idx is None else idx.numel(), self.shape[1],
                          dtype=torch.float64)
        for w, bx, by in self.groups:
            out.add_(_int8_product(bx if idx is None else bx.index_select(0, idx), by),
                     alpha=w)
        return out.to(self.dtype)  # summed in float64, given in the set's dtype

    def rows(self, idx):
        return self._product(_as_index(idx, self.shape[0], self.device))

    def to_dense(self):
        return self._product()

    def _matmul(self, V):
        return sum(w * (bx.to(V.dtype) @ (by.to(V.dtype).T @ V)) for w, bx, by in self.groups)

    def diag(self):
        k = min(self.shape)
        out = torch.zeros(k, dtype=torch.float64)
        for w, bx, by in self.groups:
            out.add_((bx[:k] & by[:k]).sum(1), alpha=w)  # 0/1: the columns both hold
        return out.to(self.dtype)


class PyramidMatch(CountFeatureKernel):
    r"""Pyramid match graph kernel (Nikolentzos, Meladianos and Vazirgiannis, 2017).

    Embeds every node v in [0, 1]^d by the absolute values of its entries in the
    eigenvectors of the d eigenvalues of largest modulus of the adjacency matrix
    (u_1(v), …, u_d(v), eigenvalues in decreasing order; all eigenvectors when
    n ≤ d + 1), and matches the node sets of two graphs by pyramid match
    (Grauman and Darrell, 2007): at level j = 0 … L−1 every dimension is cut into 2^j
    bins, a histogram counts the nodes per (dimension, bin) — per (label, dimension,
    bin) with ``with_labels`` — and I_j is the intersection Σ min(h, h') of the
    histograms of the two graphs. The kernel is

    .. math:: k(G, G') = \sum_{j=0}^{L-1} w_j I_j(G, G'),

    with GraKeL 0.1.11's weights w_j (:func:`level_weights`: its sum runs inside the
    loop over the levels; w = (1, 1/2) for L = 2 and in general positive), so that this
    is GraKeL's ``PyramidMatch(with_labels, L, d)``.

    Parameters
    ----------
    with_labels : bool
        Histograms per node label.
    L : int
        Number of levels, ≥ 1 and at most the L with (number of labels) · d · 2^(L−1)
        ≤ 2^63 (cells are numbered in int64; a ValueError says so).
    d : int
        Dimension of the embedding, ≥ 1.
    normalize : bool
        Cosine normalization.

    Notes
    -----
    Eigenvectors are unique up to sign, removed by the absolute value, when the
    eigenvalue is simple. For a repeated eigenvalue any orthonormal basis of its
    eigenspace is an answer: this kernel takes LAPACK's (inverse iteration, ``dstein``,
    for graphs of 56 nodes or more on the CPU; ``torch.linalg.eigh`` otherwise), GraKeL
    ARPACK's (``scipy.sparse.linalg.eigs``) or LAPACK's ``geev`` (graphs of ≤ d + 1
    nodes); the embeddings — and the kernel — then differ between implementations. A
    coordinate within 10⁻⁹ of a bin edge counts as on the edge (the bin of the exact
    value: symmetric graphs have entries 1/2 that rounding puts on either side, where
    GraKeL follows its rounding). Moduli within 10⁻⁹ max(1, ρ(A)) are a tie, and a tie
    at the d-th modulus goes to the smaller eigenvalue (of λ and −λ, −λ). The graphs
    must be undirected (symmetric adjacency).

    Only d eigenvectors are needed. On the CPU a graph of 56 nodes or more is reduced
    to tridiagonal form by Householder reflections (4/3 n³ flops), the d eigenvalues of
    largest modulus — at the two ends of the spectrum — found by bisection, their
    eigenvectors by inverse iteration and carried back by the reflections (Golub and
    Van Loan, 2013, §8.3–8.4): about a third of the time of a full eigendecomposition.
    Smaller graphs, and graphs on other devices, take full decompositions batched over
    graphs of equal size. The intersection min(a, b) = Σ_t [t < a][t < b] makes I_j an
    inner product of sparse 0/1 features, so the kernel is a sparse feature map (one
    column per (level, label, dimension, bin, t)). On the CPU the Gram is computed from
    the 0/1 patterns of each level weight by exact int8 products (int32 sums), added
    at their weights.

    References
    ----------
    G. Nikolentzos, P. Meladianos and M. Vazirgiannis, "Matching node embeddings for
    graph similarity", Proc. AAAI (2017).
    K. Grauman and T. Darrell, "The pyramid match kernel: efficient learning with sets
    of features", JMLR 8:725–760 (2007).
    G. H. Golub and C. F. Van Loan, *Matrix Computations*, 4th ed., Johns Hopkins
    University Press (2013).

    Examples
    --------
    >>> import torch
    >>> from torch_geometric.data import Data
    >>> from torchkern.graphs import PyramidMatch
    >>> path = Data(edge_index=torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]]), num_nodes=3)
    >>> PyramidMatch(with_labels=False, L=2, d=2)([path]).to_dense()
    tensor([[9.]], dtype=torch.float64)
    """

    _graph_fields = ("nodes", "edges")  # a list of Data: no node attributes read

    def __init__(self, with_labels: bool = True, L: int = 4, d: int = 6,
                 normalize: bool = False):
        super().__init__()
        with_labels = check_bool(with_labels, "with_labels")
        if not is_int(L) or L < 1:
            raise ValueError(f"L must be an int >= 1, got {L!r}")
        if not is_int(d) or d < 1:
            raise ValueError(f"d must be an int >= 1, got {d!r}")
        self.with_labels, self.L, self.d = with_labels, int(L), int(d)
        self.normalize = check_bool(normalize, "normalize")

    def extra_repr(self) -> str:
        return f"with_labels={self.with_labels}, L={self.L}, d={self.d}, normalize={self.normalize}"

    def _check_size(self, X: GraphSet, name: str) -> None:
        if len(X) == 0:
            return
        n = int(X.num_nodes.max())
        check_memory(n * n * 24, f"{name}: PyramidMatch on a graph of {n:,} nodes takes a dense "
                     f"eigendecomposition of its adjacency matrix (24 bytes per node pair), "
                     f"which", X.device)
        if not is_undirected(X):
            raise ValueError(f"{name}: PyramidMatch needs undirected graphs (every edge given "
                             f"in both directions); call torch_geometric.utils.to_undirected")

    def _gram(self, X: GraphSet, Y: GraphSet | None, unit_rows: bool = False):
        """Φ on X ∪ Y (one dictionary of columns). On the CPU, where Φ is small
        (``_PATTERN_CELLS``) and at least an eighth full or Φ Φᵀ cheap
        (``_PATTERN_FLOPS``), as int8 0/1 patterns, one per level weight
        (:class:`_PatternMatrix`); else as sparse √w features
        (:class:`~torchkern.graphs._labels.SparseFeatureKernelMatrix`).
        ``unit_rows``: cosine normalization."""
        self._check_pair(X, Y)
        U = X if Y is None else GraphSet.concat([X, Y], attributes=self._reads_attributes)
        n, nx = len(U), len(X)
        parts, w, p, bounds = self._level_features(U)
        n_entries = sum(r.numel() for r, _ in parts)
        if (U.device.type == "cpu" and n * p <= _PATTERN_CELLS
                and (8 * n_entries >= n * p or n * n * p <= _PATTERN_FLOPS)
                and _int8_product_works()):
            B = torch.zeros(n * p, dtype=torch.int8)
            for rows, cols in parts:
                B.index_fill_(0, rows * p + cols, 1)
            B = B.view(n, p)
            groups = []  # consecutive levels of equal weight share one product
            for j in range(self.L):
                lo, hi = int(bounds[j]), int(bounds[j + 1])
                if groups and groups[-1][0] == w[j] and groups[-1][2] == lo:
                    groups[-1][2] = hi
                elif hi > lo:
                    groups.append([w[j], lo, hi])
            K = _PatternMatrix([(float(wj), B[:nx, lo:hi].contiguous(),
                                 None if Y is None else B[nx:, lo:hi].contiguous())
                                for wj, lo, hi in groups], (nx, nx if Y is None else n - nx),
                               X.dtype)
            if not unit_rows:
                return K
            sq = torch.zeros(n, dtype=torch.float64)  # ‖φ‖² = Σ w over a graph's features
            for (rows, _), wj in zip(parts, w):
                sq.add_(torch.bincount(rows, minlength=n), alpha=wj)
        else:
            rows, cols, vals, p = self._entries(U, (parts, w, p, bounds))
            if unit_rows:
                sq = torch.zeros(n, dtype=vals.dtype, device=vals.device).index_add_(
                    0, rows, vals * vals)
                vals = vals * sq.rsqrt().index_select(0, rows)
            vals = vals.to(X.dtype)
            inx = rows < nx
            return SparseFeatureKernelMatrix(*[
                _coo(rows[m] - off, cols[m], vals[m], (k, p)) for m, off, k
                in ([(inx, 0, nx)] if Y is None else [(inx, 0, nx), (~inx, nx, n - nx)])])
        unit = torch.where(sq > 0, sq.rsqrt(), 0.0).to(X.dtype)
        return K.scaled(unit[:nx], None if Y is None else unit[nx:])

    def _entries(self, G: GraphSet, levels=None):
        """φ of every graph (``(rows, cols, values, p)``, level by level): the features
        of :meth:`_level_features` (or ``levels``, its output), each of value √w of its
        level."""
        parts, w, p, _ = self._level_features(G) if levels is None else levels
        root_w = np.sqrt(w)
        vals = [torch.full((r.numel(),), float(root_w[j]), dtype=torch.float64,
                           device=G.device) for j, (r, _) in enumerate(parts)]
        return (torch.cat([r for r, _ in parts]), torch.cat([c for _, c in parts]),
                torch.cat(vals), p)

    def _level_features(self, G: GraphSet):
        """The features of every graph, level by level: a cell is (level, label,
        dimension, bin); a graph with c nodes in a cell gets one feature (cell, t) for
        each t < c, the columns of a cell numbered from its largest c over the set, cells
        numbered level by level. When every node has all d coordinates, level 0 (one bin)
        has the same histogram in every dimension: it is counted in the first only, at d
        times the weight. Returns ``(parts, w, p, bounds)``: ``parts[j] = (rows, cols)``,
        the graph and column of every feature of level j, sorted by (graph, column); the
        weight of every level (``w[0]`` times d when merged); the number of columns; and
        where each level's columns start (``bounds[j]:bounds[j + 1]``). Level by level,
        every temporary has one entry per (node, dimension) only."""
        d, L, N = self.d, self.L, int(G.ptr[-1])
        U = node_embeddings(G, d)  # (N, d), NaN past a graph's eigenvectors
        labels, n_labels = initial_labels(G) if self.with_labels else (
            torch.zeros(N, dtype=torch.long, device=G.device), 1)
        # cells are numbered (label, dimension, bin) in int64: past 2^63 they wrapped
        # around (L=64 on three small graphs gave 0.5 for 3e-16) or raised an OverflowError
        L_max = ((2 ** 63 - 1) // (n_labels * d)).bit_length()
        if L > L_max:
            raise ValueError(f"L={L}: PyramidMatch numbers the cells of level L − 1 (2^(L−1) "
                             f"bins per dimension, for each of {n_labels} labels and d={d} "
                             f"dimensions) in int64, which holds at most L={L_max} levels "
                             f"here; take a smaller L")
        node, q = (~torch.isnan(U)).nonzero(as_tuple=True)
        u = U[node, q]
        base = labels.index_select(0, node).mul_(d).add_(q)  # (label, dimension)
        graph = G.graph_of_node.index_select(0, node)
        w = level_weights(L)
        first = None
        if node.numel() == N * d and d > 1:  # every node has all d coordinates
            first = (q == 0).nonzero().reshape(-1)
            w[0] *= d
        parts, bounds = [], [0]
        for j in range(L):
            k = 2 ** j  # bins per dimension
            # a coordinate within 1e-9 of a bin edge (0.5 of a symmetric graph, computed
            # as 0.49999999999999994) is put on the edge: the bin of the exact value
            cell = torch.mul(u, k).add_(_EDGE_TOL).floor_().long().clamp_(max=k - 1)
            cell.add_(base * k)
            g = graph
            if j == 0 and first is not None:
                cell, g = cell.index_select(0, first), graph.index_select(0, first)
            n_cells = n_labels * d * k
            if n_cells > max(4 * cell.numel(), 2 ** 16):  # many cells: number those seen
                cell = torch.unique(cell, return_inverse=True)[1]
                n_cells = int(cell.max()) + 1 if cell.numel() else 0
            (g, cell), cnt = count_rows([g, cell], [len(G), n_cells])
            width = torch.zeros(n_cells, dtype=cnt.dtype, device=G.device).scatter_reduce_(
                0, cell, cnt, "amax")
            start = (torch.cumsum(width, 0) - width + bounds[-1]).index_select(0, cell)
            parts.append((torch.repeat_interleave(g, cnt), segment_ranges(start, cnt)))
            bounds.append(bounds[-1] + int(width.sum()))
        return parts, w, bounds[-1], bounds
