"""The multiscale Laplacian graph kernel (Kondor and Pan, 2016), in its fast form with
landmark nodes (the supplement's Algorithm 1), as GraKeL 0.1.11 computes it."""
from __future__ import annotations

import math
import warnings

import numpy as np
import torch

from .._threads import one_thread
from .._validation import check_bool, is_int, is_real
from ..gram import DenseKernelMatrix
from ..kernels.structured import _inv_sqrt
from ._batch import (GraphKernel, GraphSet, check_memory, check_numpy_seed, is_undirected,
                     unify_labels)
from ._labels import initial_labels

__all__ = ["MultiscaleLaplacian"]

_BUDGET = 2 ** 22  # float64 entries of one batched block
_POSITIVE = 1e-6  # eigenvalues kept above this (GraKeL's positive_eigenvalue_limit)
_CUTOFF = -30.0  # log k below this is 0 (GraKeL's cut-off)
_TIE = 1e-9  # relative gap under which two eigenvalues count as one repeated eigenvalue


def _flg(Sa_inv, lda, Sb_inv, ldb, symmetric: bool = False) -> torch.Tensor:
    r"""The FLG values of every pair (a, b), (A, B) float64:
    exp((−log det(S_a⁻¹ + S_b⁻¹) − ½(log det S_a + log det S_b))/2), 0 where the exponent
    is below −30. ``Sa_inv`` (A, p, p), ``lda`` (A,) the log-determinants of S_a.
    ``symmetric`` (a and b the same list): the upper triangle is computed and mirrored."""
    A, B, p = Sa_inv.shape[0], Sb_inv.shape[0], Sa_inv.shape[-1]
    out = torch.zeros(A, B, dtype=torch.float64, device=Sa_inv.device)
    if A == 0 or B == 0:
        return out
    if p == 0:  # no features: log det of 0 × 0 matrices is 0, k = 1
        return out.fill_(1.0)
    rb = max(1, _BUDGET // (p * p * B))  # rows of a per block
    for i in range(0, A, rb):
        c0 = i if symmetric else 0  # the upper triangle (and a little more) when symmetric
        k, m = min(rb, A - i), B - c0
        M = (Sa_inv[i:i + k, None] + Sb_inv[None, c0:]).view(-1, p, p)
        out[i:i + k, c0:] = _flg_sum(M, (lda[i:i + k, None] + ldb[None, c0:]).view(-1)
                                     ).view(k, m)
    if symmetric:
        out = torch.triu(out) + torch.triu(out, 1).T
    return out


def _flg_sum(M, ld_sum) -> torch.Tensor:
    """FLG values from M = S_a⁻¹ + S_b⁻¹ (k, p, p) and log det S_a + log det S_b (k,)."""
    Lc, info = torch.linalg.cholesky_ex(M)
    if bool((info != 0).any()):
        raise ValueError("MultiscaleLaplacian: S_a⁻¹ + S_b⁻¹ is not positive definite "
                         "(gamma or heta too small for float64)")
    logdet = 2 * torch.log(torch.diagonal(Lc, dim1=-2, dim2=-1)).sum(-1)
    logr = (-logdet - 0.5 * ld_sum) / 2
    return torch.where(logr < _CUTOFF, torch.zeros_like(logr), torch.exp(logr))


def _inverse_logdet(S: torch.Tensor):
    """S⁻¹ and log det S of a batch of symmetric positive definite S (symmetrized)."""
    S = (S + S.transpose(-1, -2)) / 2
    Lc, info = torch.linalg.cholesky_ex(S)
    if bool((info != 0).any()):
        raise ValueError("MultiscaleLaplacian: an S matrix is not positive definite "
                         "(gamma too small for float64)")
    return (torch.cholesky_inverse(Lc),
            2 * torch.log(torch.diagonal(Lc, dim1=-2, dim2=-1)).sum(-1))


def _top_eigen(K: torch.Tensor, P: int, what: str):
    """The eigenpairs of the symmetric K among its P largest eigenvalues that exceed
    1e-6: ``(values (p,), vectors (m, p))``. Warns when the P-th and (P+1)-th largest
    eigenvalues are equal (to a relative 1e-9): the truncation then splits an
    eigenspace and the kernel is not uniquely defined."""
    if not bool(torch.isfinite(K).all()):
        # node attributes past √max (1e160): the Gram's inf made every graph alike
        # (every entry 2^{-p/2}), silently
        raise ValueError(f"MultiscaleLaplacian: the landmark Gram matrix at {what} "
                         f"overflows float64; scale the node attributes down")
    v, w = torch.linalg.eigh((K + K.T) / 2)
    v, w = v.flip(0), w.flip(1)  # descending
    if v.numel() > P and v[P - 1] > _POSITIVE:
        scale = max(float(v[0].abs()), 1.0)
        if float(v[P - 1] - v[P]) <= _TIE * scale:
            warnings.warn(f"MultiscaleLaplacian: at {what}, the top-P truncation (P={P}) "
                          f"splits a repeated eigenvalue ({float(v[P - 1]):.6g}) of the "
                          f"landmark Gram matrix; the kernel is then not uniquely defined "
                          f"(it depends on the eigenvectors the solver picks in that "
                          f"eigenspace). Change P or n_samples.", UserWarning, stacklevel=5)
    v, w = v[:P], w[:, :P]
    keep = v > _POSITIVE
    return v[keep], w[:, keep]


class _Chunks:
    """The graphs of a set in groups of similar size, each with its zero-padded
    adjacency (self-loops dropped) and its hop distances capped at ``rmax``:
    ``(graph_ids, nodes (B, n) global ids or −1, A (B, n, n), D (B, n, n))``,
    D[b, i, j] the number of edges of a shortest walk i → j (rmax + 1 past rmax)."""

    def __init__(self, G: GraphSet, rmax: int):
        self.items = []
        for gids, n in G.size_chunks(max(1, _BUDGET // 8), power=2):
            if n == 0:
                continue
            nodes = G.padded_nodes(gids, n)
            A = G.dense_adjacency(gids, n, torch.float64)
            A.diagonal(dim1=-2, dim2=-1).zero_()
            D = torch.full(A.shape, rmax + 1, dtype=torch.long, device=A.device)
            R = torch.eye(n, dtype=torch.float64, device=A.device).expand_as(A).clone()
            D.masked_fill_(R > 0, 0)
            step = A + torch.eye(n, dtype=torch.float64, device=A.device)
            for k in range(1, rmax + 1):
                R2 = (R @ step > 0).to(torch.float64)
                D.masked_fill_((R2 > 0) & (R == 0), k)
                if torch.equal(R2, R):
                    break
                R = R2
            self.items.append((gids, nodes, A, D))


def _laplacian(A: torch.Tensor, heta: float) -> torch.Tensor:
    """L + ηI for a batch of symmetric adjacency matrices, L = diag(degrees) − A."""
    L = -A
    L.diagonal(dim1=-2, dim2=-1).add_(A.sum(-2) + heta)
    return L


def _solve(L: torch.Tensor, U: torch.Tensor) -> torch.Tensor:
    """L⁻¹U for a batch of symmetric positive definite L (Cholesky)."""
    Lc, info = torch.linalg.cholesky_ex(L)
    if bool((info != 0).any()):
        raise ValueError("MultiscaleLaplacian: a Laplacian + heta·I is not positive definite")
    return torch.cholesky_solve(U, Lc)


def _node_S(chunks: _Chunks, F: torch.Tensor, r: int, gamma: float, heta: float):
    r"""S_v⁻¹ and log det S_v of every node v: S_v = U_vᵀ (L_v + ηI)⁻¹ U_v + γI, L_v
    the Laplacian of the subgraph induced by the nodes within r hops of v
    and U_v their rows of F: (N, p, p) and (N,). The neighbourhoods of a group of graphs
    are padded to the largest one with isolated nodes of zero rows, which leave S_v
    unchanged."""
    N, p = F.shape
    dev = F.device
    Sinv = torch.empty(N, p, p, dtype=torch.float64, device=dev)
    ld = torch.empty(N, dtype=torch.float64, device=dev)
    for gids, nodes, A, D in chunks.items:
        B, n = nodes.shape
        valid = nodes >= 0
        M = (D <= r) & valid[:, None, :] & valid[:, :, None]  # (b, i, j): j in i's ball
        size = M.sum(-1)
        m = int(size.max())
        members = torch.argsort((~M).to(torch.int8), dim=-1, stable=True)[..., :m]
        inside = torch.arange(m, device=dev) < size[..., None]  # (B, n, m)
        b, i = valid.nonzero(as_tuple=True)
        # nodes of one graph with the same ball share S_v (at large radii, most nodes of
        # a connected graph): one per distinct (graph, ball)
        key = torch.cat([b[:, None], M[b, i].to(torch.long)], 1)
        _, inv = torch.unique(key, dim=0, return_inverse=True)
        first = torch.full((int(inv.max()) + 1,), b.numel(), dtype=torch.long, device=dev)
        first.scatter_reduce_(0, inv, torch.arange(b.numel(), device=dev), "amin")
        rb, ri = b[first], i[first]
        step = max(1, _BUDGET // (m * max(m, p) * 4))
        si = torch.empty(first.numel(), p, p, dtype=torch.float64, device=dev)
        li = torch.empty(first.numel(), dtype=torch.float64, device=dev)
        for s in range(0, first.numel(), step):
            bb, ii = rb[s:s + step], ri[s:s + step]
            idx, ins = members[bb, ii], inside[bb, ii]  # (k, m)
            Asub = A[bb[:, None, None], idx[:, :, None], idx[:, None, :]]
            Asub = Asub * (ins[:, :, None] & ins[:, None, :])
            U = F[nodes[bb[:, None], idx]] * ins[..., None]  # (k, m, p)
            S = U.transpose(-1, -2) @ _solve(_laplacian(Asub, heta), U)
            S.diagonal(dim1=-2, dim2=-1).add_(gamma)
            si[s:s + step], li[s:s + step] = _inverse_logdet(S)
        Sinv[nodes[b, i]], ld[nodes[b, i]] = si[inv], li[inv]
    return Sinv, ld


def _graph_S(chunks: _Chunks, n_graphs: int, F: torch.Tensor, gamma: float, heta: float):
    """S_G⁻¹ and log det S_G of every graph: S_G = Fᵀ (L + ηI)⁻¹ F + γI over its nodes."""
    p = F.shape[1]
    S = torch.zeros(n_graphs, p, p, dtype=torch.float64, device=F.device)
    for gids, nodes, A, D in chunks.items:
        valid = nodes >= 0
        U = F[nodes.clamp_min(0)] * valid[..., None]
        S[gids] = U.transpose(-1, -2) @ _solve(_laplacian(A, heta), U)
    S.diagonal(dim1=-2, dim2=-1).add_(gamma)
    return _inverse_logdet(S)


class MultiscaleLaplacian(GraphKernel):
    r"""Multiscale Laplacian graph kernel (Kondor and Pan, 2016), fast version with
    landmark nodes, as GraKeL 0.1.11's ``MultiscaleLaplacian``.

    The Feature space Laplacian Graph (FLG) kernel compares two graphs through the
    Gaussians N(0, S) their node features induce, S = Uᵀ(L + ηI)⁻¹U + γI (U the node
    features, L the graph Laplacian):

    .. math:: k_{\text{FLG}}(S_1, S_2) = \frac{\left|\left(S_1^{-1} + S_2^{-1}\right)^{-1}
              \right|^{1/2}}{|S_1|^{1/4}\, |S_2|^{1/4}},

    set to 0 where its logarithm is below −30. (The paper has ½S₁⁻¹ + ½S₂⁻¹, whose values
    are 2^{p/2} times these for p features; GraKeL's form is kept here, so k(G, G) =
    2^{−p/2}. Between levels the factor scales the features against γ, so the multiscale
    values are not a constant multiple of the paper's.) The multiscale kernel applies it
    level by level: at level l = 1 … L, every node v gets the S_v of the subgraph induced by
    its neighbourhood — the nodes within 2^{l−1} hops (GraKeL doubles the radius per level)
    — with the node features of level l−1, and the FLG values between nodes become the
    features of level l. To keep this finite, the features are projected on a basis from
    ``n_samples`` landmark nodes drawn at random from all graphs (Algorithm 1 of the paper's
    supplement): level 0 maps the input features u by the top-P positive eigenpairs (λ_i,
    w_i) of the landmarks' Gram UₛUₛᵀ, f(v) = (w_iᵀ Uₛ u_v / √λ_i)_i; level l maps node v to
    (Σ_m w_{im} k_FLG(S_v, S_m) / √λ_i)_i, (λ_i, w_i) the top-P positive eigenpairs of the
    landmarks' FLG Gram. The graph kernel is k_FLG between the graphs' S over the last
    level's features.

    **Reads** the edges (undirected: both directions of every edge, as PyG stores them;
    a one-way edge is refused; unweighted; self-loops ignored — GraKeL's level-1
    neighbourhood lists a node with a self-loop twice) and the node features:
    ``features="attributes"`` the continuous attributes (the Data field ``node_attr``,
    default ``"node_attributes"``), ``features="labels"`` the one-hot vectors of the
    node labels (``x``, each distinct row one label) — GraKeL's node "labels" must be
    such vectors.

    **The landmark basis is fitted on data**, like GraKeL's ``fit``: ``k(X)`` fits it on
    X and keeps it (the attribute ``basis_``; GraKeL's ``fit_transform``); ``k(X, Y)``
    maps X and Y with the kept basis (GraKeL's ``transform``), fitting it on X first
    when none is kept; :meth:`fit` fits it explicitly. Changing an argument
    (``set_params``) drops the basis.

    **Grams computed one call at a time are in different bases** when more than one
    call passes a single set: ``k(X)``, ``k(Y)``, ``k(X, Y)`` gives K_XX in X's basis and
    K_YY, K_XY in Y's, not blocks of one kernel. Consistent: SVC, SVR, KernelRidge,
    KernelLogisticRegression, KernelPCA, KernelKMeans and the MKL classifiers' final
    models (``k(X_train)`` in ``fit`` on the estimator's copy of the kernel, then
    ``k(X_new, X_train)``; GridSearchCV clones it unfitted), the permutation tests (one
    call on the pooled sample), HSIC (one set per kernel). Not consistent:
    :func:`torchkern.stats.mmd2` (``k(X)``, ``k(Y)``, ``k(X, Y)``); NadarayaWatson's
    ``predict``, whose first ``k(Z, X_train)`` fits the basis on the query points Z;
    SimpleMKL's gradient (``k(support vectors)`` refits). There, compute
    ``K = k(X + Y)`` once and use its blocks (e.g.
    ``mmd2_unbiased(K[:n, :n], K[n:, n:], K[:n, n:])``), or fit once (``k.fit(Z)``) and
    then call ``k(A, B)`` with two sets only.

    Parameters
    ----------
    L : int
        Number of levels, ≥ 0.
    gamma : float
        γ > 0 added to the diagonal of every S.
    heta : float
        η > 0 added to the diagonal of every Laplacian.
    n_samples : int
        Number of landmark nodes, ≥ 1 (all nodes when there are fewer).
    P : int
        Largest number of eigenpairs kept per level, ≥ 1.
    random_state : int, numpy RandomState or None
        Seed of the landmark draws (below 2^32): numpy ``RandomState(random_state)``
        shuffles the nodes (numbered graph after graph) once for level 0 and again for
        each level, the landmarks being the first ``n_samples`` — GraKeL's draws, so both
        give the same values for the same seed. ``None``: a seed drawn once for this
        kernel object (from NumPy's global generator), the same for all its calls. A
        ``numpy.random.RandomState`` (GraKeL and scikit-learn take one): its state at the
        first call, replayed at every call.
    features : {"attributes", "labels"}
        The node features read (see above).
    node_attr : str
        The Data field holding the node attributes (``features="attributes"``).
    normalize : bool
        Cosine normalization k(G, G')/√(k(G, G) k(G', G')).

    Attributes
    ----------
    basis_ : dict or None
        The fitted landmark basis: the level-0 map ``ksi`` (d, p₀), and per level the
        landmarks' S⁻¹ and log det S and the map Q (n_samples, p_l).

    Notes
    -----
    Where the P-th and (P+1)-th largest eigenvalues of a landmark Gram are equal, the
    truncation splits an eigenspace and the kernel depends on the eigenvectors a solver
    returns in it (GraKeL's ``numpy.linalg.eig`` and this ``eigh`` may differ): a
    warning says so. One-hot labels make the level-0 Gram's eigenvalues the label counts
    of the landmarks; ties among the kept ones are harmless (the kernel is invariant to
    rotations of the features), a tie cut by P is not. GraKeL fails when there are fewer
    than P landmarks; here all are then used. A graph of 0 nodes (GraKeL refuses it) has
    S = γI, the definition's empty sum Uᵀ(L + ηI)⁻¹U = 0: the Gaussian of a graph whose
    last-level features are all zero; it holds no landmark.

    Cost: per level, one Cholesky solve per distinct neighbourhood (nodes of a graph
    with the same neighbourhood, e.g. the whole graph at large radii, share their S_v),
    batched with the neighbourhoods padded to the largest of a group of graphs,
    O(Σ_v m_v³) for neighbourhoods of m_v nodes; the FLG values of all N nodes against
    the landmarks, O(N n_samples P³) (batched Cholesky factorizations of P × P
    matrices); then the Gram, O(``|X| |Y|`` P³). The result is dense, ``(|X|, |Y|)``.

    References
    ----------
    R. Kondor and H. Pan, "The multiscale Laplacian graph kernel", NeurIPS (2016),
    and its supplementary material (Algorithm 1).

    Examples
    --------
    >>> import torch
    >>> from torch_geometric.data import Data
    >>> from torchkern.graphs import MultiscaleLaplacian
    >>> ring = torch.tensor([[0, 1, 1, 2, 2, 0], [1, 0, 2, 1, 0, 2]])
    >>> g = Data(edge_index=ring, num_nodes=3, node_attributes=torch.eye(3))
    >>> K = MultiscaleLaplacian(L=0, random_state=0)([g, g]).to_dense()
    >>> torch.allclose(K, torch.full((2, 2), 2 ** -1.5, dtype=K.dtype))  # 2^(−p/2), p = 3
    True
    """

    #: the features depend on the set the basis is fitted on (read by torchkern.stats.mmd2)
    fits_data = True

    @property
    def _graph_fields(self):  # a list of Data: the attributes or the labels, as features says
        return ("node_attributes" if self.features == "attributes" else "nodes", "edges")

    def __init__(self, L: int = 3, gamma: float = 0.01, heta: float = 0.01,
                 n_samples: int = 50, P: int = 10, random_state: int | None = None,
                 features: str = "attributes", node_attr: str = "node_attributes",
                 normalize: bool = False):
        super().__init__()
        if not is_int(L) or L < 0:
            raise ValueError(f"L must be a non-negative int (the number of levels), got {L!r}")
        for name, v in (("gamma", gamma), ("heta", heta)):
            if not is_real(v) or not math.isfinite(v) or v <= 0:
                raise ValueError(f"{name} must be a positive number, got {v!r}")
        if not is_int(n_samples) or n_samples < 1:
            raise ValueError(f"n_samples must be a positive int, got {n_samples!r}")
        if not is_int(P) or P < 1:
            raise ValueError(f"P must be a positive int, got {P!r}")
        check_numpy_seed(random_state, "the landmark draws")
        if features not in ("attributes", "labels"):
            raise ValueError(f"features must be 'attributes' or 'labels', got {features!r}")
        if not isinstance(node_attr, str):
            raise TypeError(f"node_attr must be the name of a Data field (a str), got "
                            f"{node_attr!r}")
        self.L, self.gamma, self.heta = int(L), float(gamma), float(heta)
        self.n_samples, self.P, self.random_state = int(n_samples), int(P), random_state
        self.features, self.node_attr = features, node_attr
        self.normalize = check_bool(normalize, "normalize")
        self.basis_ = None

    def extra_repr(self) -> str:
        return (f"L={self.L}, gamma={self.gamma}, heta={self.heta}, n_samples={self.n_samples}, "
                f"P={self.P}, random_state={self.random_state}, features={self.features!r}, "
                f"node_attr={self.node_attr!r}, normalize={self.normalize}")

    # -- inputs ---------------------------------------------------------------------------
    def _check_size(self, X: GraphSet, name: str) -> None:
        if not is_undirected(X):
            raise ValueError(f"{name}: MultiscaleLaplacian compares undirected graphs (its "
                             f"S = Uᵀ(L + ηI)⁻¹U is a covariance only for a symmetric "
                             f"Laplacian), and some edge_index holds an edge in one "
                             f"direction only: call torch_geometric.utils.to_undirected")
        if self.features == "attributes" and getattr(X, "node_attributes", None) is None:
            raise ValueError(f"{name}: MultiscaleLaplacian(features='attributes') reads "
                             f"continuous node attributes, and the graphs have no field "
                             f"{self.node_attr!r}: give every graph node attributes "
                             f"(num_nodes, d) in that field, name the field with "
                             f"node_attr=, or use features='labels' (one-hot node labels)")

    def _phi(self, G: GraphSet, values=None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The (N, d) node features of G and, for labels, the label rows of the columns
        (``values``: map G's labels to these columns; labels not among them get 0)."""
        if self.features == "attributes":
            a = G.node_attributes
            if values is not None and a.shape[1] != values.shape[1]:
                raise ValueError(f"the node attributes have width {a.shape[1]} but the "
                                 f"basis was fitted on width {values.shape[1]}")
            return a.to(torch.float64), a.new_zeros(0, a.shape[1])
        N = int(G.ptr[-1])
        if values is None:
            ids, L = initial_labels(G)
            values = G.label_values[torch.unique(G.node_label)] if N else G.label_values[:0]
            phi = torch.zeros(N, max(L, 0), dtype=torch.float64, device=G.device)
            phi[torch.arange(N, device=G.device), ids] = 1
            return phi, values
        if G.label_values.shape[1] != values.shape[1]:
            raise ValueError(f"the node labels have rows of width {G.label_values.shape[1]} "
                             f"but the basis was fitted on rows of width {values.shape[1]}")
        base = torch.arange(values.shape[0], device=G.device)
        (fit_ids, ids), allv = unify_labels([(base, values), (G.node_label, G.label_values)])
        col = torch.full((allv.shape[0],), -1, dtype=torch.long, device=G.device)
        col[fit_ids] = base
        c = col[ids]
        phi = torch.zeros(N, values.shape[0], dtype=torch.float64, device=G.device)
        known = c >= 0
        phi[torch.arange(N, device=G.device)[known], c[known]] = 1
        return phi, values

    # -- fit and map ---------------------------------------------------------------------
    def fit(self, X, y=None) -> "MultiscaleLaplacian":
        """Fit the landmark basis on the graphs X (GraKeL's ``fit``) and keep it in
        ``basis_``. Returns self."""
        X = self.check_input(X, "X")
        with one_thread(X.device.type == "cpu"):
            self._fit(X)
        return self

    def _fit(self, X: GraphSet):
        """Fit and keep the basis on X; returns X's graph-level (S⁻¹, log det S)."""
        N = int(X.ptr[-1])
        if N == 0:
            raise ValueError("X: the graphs have no nodes; the landmark basis needs some")
        phi, values = self._phi(X)
        if not bool(torch.isfinite(phi).all()):
            raise ValueError("X: the node attributes must be finite")
        rs = self._numpy_stream()  # a RandomState given is replayed from its first state
        perm = np.arange(N)
        ns = min(N, self.n_samples)
        chunks = _Chunks(X, 2 ** (self.L - 1) if self.L else 0)
        check_memory(8 * N * (self.P * self.P + ns), "MultiscaleLaplacian: the node S "
                     "matrices", X.device)
        rs.shuffle(perm)
        land = torch.from_numpy(perm[:ns].copy()).to(X.device)
        Uk = phi[land]
        v, w = _top_eigen(Uk @ Uk.T, self.P, "level 0")
        ksi = (Uk.T @ w) / v.sqrt()
        F = phi @ ksi
        levels = []
        for lvl in range(1, self.L + 1):
            rs.shuffle(perm)
            land = torch.from_numpy(perm[:ns].copy()).to(X.device)
            Sinv, ld = _node_S(chunks, F, 2 ** (lvl - 1), self.gamma, self.heta)
            Sl, ldl = Sinv[land], ld[land]
            Kp = _flg(Sinv, ld, Sl, ldl)
            v, w = _top_eigen(Kp[land], self.P, f"level {lvl}")
            Q = w / v.sqrt()
            F = Kp @ Q
            levels.append((Sl, ldl, Q))
        self.basis_ = {"features": self.features, "values": values, "ksi": ksi,
                       "levels": levels, "device": X.device}
        return _graph_S(chunks, len(X), F, self.gamma, self.heta)

    def _map(self, G: GraphSet):
        """G's graph-level (S⁻¹, log det S) in the kept basis (GraKeL's ``transform``)."""
        b = self.basis_
        phi, _ = self._phi(G, b["values"])
        if not bool(torch.isfinite(phi).all()):
            raise ValueError("the node attributes must be finite")
        chunks = _Chunks(G, 2 ** (self.L - 1) if self.L else 0)
        F = phi @ b["ksi"].to(G.device)
        for lvl, (Sl, ldl, Q) in enumerate(b["levels"], 1):
            Sinv, ld = _node_S(chunks, F, 2 ** (lvl - 1), self.gamma, self.heta)
            F = _flg(Sinv, ld, Sl.to(G.device), ldl.to(G.device)) @ Q.to(G.device)
        return _graph_S(chunks, len(G), F, self.gamma, self.heta)

    def _stats(self, X: GraphSet, refit: bool):
        if refit or self.basis_ is None:
            return self._fit(X)
        return self._map(X)

    # -- the kernel ------------------------------------------------------------------------
    def forward(self, X, Y=None, *, backend: str | None = None):
        """k(X, Y) (dense); ``k(X)`` fits the basis on X, ``k(X, Y)`` uses the kept one
        (fitting it on X when none is kept)."""
        X, Y = self._checked_sets(X, Y, backend)
        check_memory(8 * len(X) * (len(X) if Y is None else len(Y)),
                     "MultiscaleLaplacian: the Gram", X.device)
        # small batched factorizations: LAPACK's threads cost more than they gain
        with one_thread(X.device.type == "cpu"):
            sx = self._stats(X, refit=Y is None)
            sy = sx if Y is None else self._map(Y)
            K = _flg(*sx, *sy, symmetric=Y is None)
            if self.normalize:
                dx = _self_flg(*sx)
                dy = dx if Y is None else _self_flg(*sy)
                K = K * _inv_sqrt(dx)[:, None] * _inv_sqrt(dy)[None, :]
        return DenseKernelMatrix(K.to(X.dtype))

    def _gram(self, X: GraphSet, Y: GraphSet | None):
        with one_thread(X.device.type == "cpu"):
            sx = self._stats(X, refit=Y is None)
            sy = sx if Y is None else self._map(Y)
            return DenseKernelMatrix(_flg(*sx, *sy, symmetric=Y is None).to(X.dtype))

    def _diag(self, X: GraphSet) -> torch.Tensor:
        with one_thread(X.device.type == "cpu"):
            return _self_flg(*self._stats(X, refit=False)).to(X.dtype)

    def _pairs(self, X: GraphSet, Y: GraphSet) -> torch.Tensor:
        """The diagonal of ``k(X, Y)`` (the kept basis, else one fitted on X), from the
        n paired covariances: O(n p²) memory, no (n, m) Gram."""
        with one_thread(X.device.type == "cpu"):
            (Sa, la), (Sb, lb) = self._stats(X, refit=False), self._map(Y)
            k = _flg_sum(Sa + Sb, la + lb) if Sa.shape[-1] else torch.ones_like(la)
            if self.normalize:
                k = k * _inv_sqrt(_self_flg(Sa, la)) * _inv_sqrt(_self_flg(Sb, lb))
        return k.to(X.dtype)


def _self_flg(Sinv: torch.Tensor, ld: torch.Tensor) -> torch.Tensor:
    """k_FLG(S_i, S_i) of every i, (n,) (2^(−p/2) up to rounding)."""
    if Sinv.shape[-1] == 0:
        return torch.ones(Sinv.shape[0], dtype=torch.float64, device=Sinv.device)
    return _flg_sum(Sinv + Sinv, ld + ld)
