r"""Kernels on the nodes of one graph: diffusion, regularized Laplacian, p-step random
walk, commute time.

Each is a function of a graph Laplacian, K = f(L) = Σ_i f(λ_i) u_i u_iᵀ over the
eigenpairs (λ_i, u_i) of L, with f ≥ 0 on the spectrum, so K is positive semi-definite
(Smola & Kondor 2003). Two ways to call one:

- ``k(data)`` — a torch_geometric ``Data`` (or ``(edge_index, num_nodes[,
  edge_weight])``): the (n, n) KernelMatrix over all its nodes; edge weights are
  ``data.edge_weight``, else ``data.weight`` when it has one value per edge (as
  ``torch_geometric.utils.from_networkx`` writes it);
- with ``graph=data`` given to the kernel, ``k(idx)`` / ``k(idx1, idx2)`` for 1-D integer
  node indices (an (m, 1) column is accepted, as scikit-learn passes it): the block
  K[idx1][:, idx2]. Estimators take node indices this way:
  ``KernelRidge(kernel=DiffusionKernel(1.0, graph=data)).fit(train_idx, y[train_idx])``.

Small graphs (n ≤ ``DENSE_MAX_NODES``, or ``method="dense"``) use the dense
eigendecomposition of L, once per graph (O(n³), cached on the graph), and return a
DenseKernelMatrix. Larger graphs (or ``method="krylov"``) return an operator KernelMatrix
whose products never form a dense matrix: Lanczos for e^{−βL}V, conjugate gradients for
(L + εI)⁻¹V and L⁺V, p sparse products for (aI − L̃)^pV — memory linear in the number of
edges. A block
K[I][:, J] @ V scatters V onto the nodes J, applies f(L), and gathers the rows I.
"""
from __future__ import annotations

import numpy as np
import torch

from .._validation import is_int, is_real
from ..gram import DenseKernelMatrix, KernelMatrix, OperatorKernelMatrix
from ..inputs import KernelInput, gram_dtype, nonempty_parts
from ..kernels.structured import StructuredKernel
from ..linalg import cg
from ._batch import check_range
from ._laplacian import LAPLACIANS, _Graph, as_graph, expm_action, is_graph_like

__all__ = ["NodeSet", "DiffusionKernel", "RegularizedLaplacian", "PStepRandomWalk",
           "CommuteTime", "DENSE_MAX_NODES"]

_F64 = torch.float64

#: ``method="auto"`` uses the dense eigendecomposition up to this many nodes.
DENSE_MAX_NODES = 2000

_METHODS = ("auto", "dense", "krylov")

# Lanczos keeps its basis up to this size or the size of L, whichever is larger; beyond,
# it replays the recurrence (one more product per step) to stay in O(|E|) memory.
_LANCZOS_STORE_BYTES = 2**28


class NodeSet(KernelInput):
    """Nodes of one graph, as a kernel input: node indices plus the graph they index.

    Estimators index, split and concatenate it like samples (``X[idx]``, ``len(X)``);
    all parts refer to the same graph.

    Parameters
    ----------
    graph : torch_geometric Data, tuple or parsed graph
        The graph (``Data``, or ``(edge_index, num_nodes[, edge_weight])``).
    index : 1-D integer tensor or array, optional
        Node ids in [0, num_nodes); default all nodes in order.
    dtype : floating torch dtype
        Dtype of the Gram matrices computed from this input (float64 by default).
    """

    def __init__(self, graph, index=None, dtype=_F64):
        self.graph = as_graph(graph)
        self.device = self.graph.device
        self.dtype = gram_dtype(dtype)
        if index is None:
            index = torch.arange(self.graph.n, device=self.device)
        self.index = node_index(index, self.graph.n, "index", allow_empty=True).to(self.device)

    def __len__(self):
        return self.index.numel()

    def take(self, idx):
        return NodeSet(self.graph, self.index[idx.to(self.index.device)], self.dtype)

    @classmethod
    def concat(cls, parts):
        parts = nonempty_parts(parts)
        g = parts[0].graph
        if not all(p.graph.same_as(g) for p in parts):
            raise ValueError("cannot concatenate node sets of different graphs")
        return NodeSet(g, torch.cat([p.index for p in parts]), parts[0].dtype)

    def check_compatible(self, other, name="X"):
        super().check_compatible(other, name)
        if not other.graph.same_as(self.graph):
            raise ValueError(f"{name} holds nodes of another graph than the one the model "
                             f"was fitted on")

    def _move(self, device):
        self.graph = self.graph.to(device)
        self.index = self.index.to(device)

    @property
    def is_all(self) -> bool:
        """Whether this is every node of the graph, in order."""
        n = self.graph.n
        return len(self) == n and bool(torch.equal(self.index, torch.arange(n, device=self.device)))


def node_index(X, n: int, name: str = "X", allow_empty: bool = False) -> torch.Tensor:
    """Node indices as a 1-D int64 tensor: a 1-D or (m, 1) integer array, list or tensor,
    each in [0, n)."""
    if isinstance(X, (int, np.integer)) and not isinstance(X, bool):
        X = [int(X)]
    try:
        t = X if isinstance(X, torch.Tensor) else torch.as_tensor(np.asarray(X))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be node indices (integers), got {type(X).__name__}") from exc
    if t.dtype.is_floating_point or t.is_complex() or t.dtype == torch.bool:
        raise TypeError(f"{name} must hold integer node indices, got dtype {t.dtype}")
    if t.dim() == 2 and t.shape[1] == 1:
        t = t[:, 0]
    if t.dim() != 1:
        raise ValueError(f"{name} must be a 1-D array of node indices (or an (m, 1) column), "
                         f"got shape {tuple(t.shape)}")
    t = t.long()
    if t.numel() == 0:
        if allow_empty:
            return t
        raise ValueError(f"{name} is empty: no node indices")
    lo, hi = int(t.min()), int(t.max())
    if lo < 0 or hi >= n:
        bad = lo if lo < 0 else hi
        raise ValueError(f"{name} holds node index {bad} outside [0, {n}) (the graph has {n} "
                         f"nodes)")
    return t


class _SparseOperator:
    """L + shift·I (+ the projector P onto ker L, per connected component) as an operator
    for :func:`torchkern.linalg.cg`."""

    def __init__(self, L, shift, components=None):
        self.L, self.shift, self.components = L, shift, components
        n = L.shape[0]
        self.shape, self.dtype, self.device = (n, n), _F64, L.device

    @property
    def requires_grad(self):
        return isinstance(self.shift, torch.Tensor) and self.shift.requires_grad

    def __matmul__(self, V):
        out = self.L @ V
        if isinstance(self.shift, torch.Tensor) or self.shift != 0:
            out = out + self.shift * V
        if self.components is not None:
            out = out + _project_kernel(V, *self.components)
        return out


def _project_kernel(V, labels, sizes):
    """P V with P = Σ_c 1_c 1_cᵀ / n_c: each column replaced by its per-component means."""
    sums = torch.zeros(sizes.numel(), V.shape[1], dtype=V.dtype, device=V.device)
    sums = sums.index_add(0, labels, V)
    return (sums / sizes[:, None])[labels]


def _laplacian_diag(g, kind):
    return g.degree if kind == "combinatorial" else (g.degree > 0).to(_F64)


class _NodeKernel(StructuredKernel):
    """Shared machinery: inputs, dense spectral path, operator path. A subclass gives
    the Laplacian it uses (``_kind``), f on the spectrum (``_spectral``) and the action
    V ↦ f(L)V on the sparse Laplacian (``_apply``)."""

    _kind = "combinatorial"

    def __init__(self, graph=None, method="auto", tol=1e-10, max_iter=None):
        super().__init__()
        if method not in _METHODS:
            raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
        if not (is_real(tol) and 0 < tol < 1):
            raise ValueError(f"tol must be a float in (0, 1), got {tol!r}")
        if max_iter is not None and (not is_int(max_iter)
                                     or max_iter < 1):
            raise ValueError(f"max_iter must be a positive int or None, got {max_iter!r}")
        self.method, self.tol, self.max_iter = method, float(tol), max_iter
        self.graph = None if graph is None else as_graph(graph, "graph")
        self._seen = (None, None)

    def extra_repr(self):
        parts = [super().extra_repr(), f"laplacian={self._kind!r}" if self._kind else "",
                 f"method={self.method!r}"]
        if self.graph is not None:
            parts.append(f"graph=(num_nodes={self.graph.n}, num_edges={self.graph.num_edges})")
        return ", ".join(p for p in parts if p)

    # -- inputs ------------------------------------------------------------------------
    def check_input(self, X, name: str = "X", **kw) -> NodeSet:
        if isinstance(X, NodeSet):
            return X
        if isinstance(X, KernelInput):
            raise TypeError(f"{type(self).__name__} takes node indices or a graph; {name} is a "
                            f"{type(X).__name__}")
        if is_graph_like(X):
            # PyG's Data.to() and apply() move a graph in place: the same Data object can
            # hold new edge tensors, so the cache is keyed on those tensors too.
            key = (X, getattr(X, "edge_index", None), getattr(X, "edge_weight", None),
                   getattr(X, "weight", None))
            seen, g = self._seen
            if seen is None or any(a is not b for a, b in zip(seen, key)):
                g = as_graph(X, name)
                self._seen = (key, g)
            return NodeSet(g)
        if self.graph is None:
            raise TypeError(f"{name}: {type(self).__name__} was given node indices but no graph; "
                            f"pass graph=<torch_geometric Data> to the kernel, or call it on "
                            f"a Data for the kernel over all its nodes")
        return NodeSet(self.graph, node_index(X, self.graph.n, name))

    # -- evaluation --------------------------------------------------------------------
    def _use_dense(self, g) -> bool:
        return self.method == "dense" or (self.method == "auto" and g.n <= DENSE_MAX_NODES)

    def _check_hypers(self):
        """Re-check constraints a set_params may have broken (hook)."""

    def _dense_factors(self, g, dtype):
        """(U, f(λ)) of the dense eigendecomposition, f differentiable in the hypers. |K_ij|
        ≤ max |f(λ)| (U is orthogonal): an f beyond ``dtype``'s range is a ValueError —
        RegularizedLaplacian(eps=1e-300) in float32 gave a Gram of inf, PStepRandomWalk
        with a^p past float64 one of NaN."""
        lam, U = g.eigh(self._kind)
        f = self._spectral(lam, g)
        check_range(f, dtype, lambda top: (
            f"{type(self).__name__}({self.extra_repr()}): the kernel's eigenvalues f(λ) "
            f"reach {top:.3g}, beyond the range of {dtype}; change the hyperparameters (or "
            f"use float64)"))
        return U, f

    def _gram(self, X: NodeSet, Y: NodeSet | None) -> KernelMatrix:
        self._check_hypers()
        g = X.graph
        if Y is not None and not Y.graph.same_as(g):
            raise ValueError("X and Y must hold nodes of the same graph")
        Y = X if Y is None else Y
        if self._use_dense(g):
            U, f = self._dense_factors(g, X.dtype)
            Ux = U if X.is_all else U[X.index]
            Uy = Ux if Y is X else (U if Y.is_all else U[Y.index])
            return DenseKernelMatrix(((Ux * f) @ Uy.T).to(X.dtype))
        rows = None if X.is_all else X.index
        cols = None if Y.is_all else Y.index
        n, dtype = g.n, X.dtype

        def block(I, J):
            def mv(V):
                W = V.to(_F64)
                if J is not None:
                    W = torch.zeros(n, V.shape[1], dtype=_F64, device=V.device).index_add(0, J, W)
                out = self._apply(g, W)
                return (out if I is None else out[I]).to(dtype)
            return mv

        return OperatorKernelMatrix(block(rows, cols), (len(X), len(Y)), dtype, g.device,
                                    rmatmul=block(cols, rows))

    def _diag(self, X: NodeSet) -> torch.Tensor:
        if self._use_dense(X.graph):
            U, f = self._dense_factors(X.graph, X.dtype)
            Ux = U if X.is_all else U[X.index]
            return (Ux * Ux * f).sum(1).to(X.dtype)
        # Exact, by columns: one application of f(L) per node of X (in blocks of 256).
        return self._gram(X, None).diag()

    # -- what a subclass writes ----------------------------------------------------------
    def _spectral(self, lam, g):
        raise NotImplementedError

    def _apply(self, g, V):
        raise NotImplementedError

    def _cg(self, A, V, diag):
        inv = 1.0 / diag.detach()
        return cg(A, V, preconditioner=lambda R: R * inv[:, None], tol=self.tol,
                  max_iter=self.max_iter)


def _check_laplacian(laplacian):
    if laplacian not in LAPLACIANS:
        raise ValueError(f"laplacian must be one of {LAPLACIANS}, got {laplacian!r}")
    return laplacian


_CALL_DOC = """
    graph : torch_geometric Data or (edge_index, num_nodes[, edge_weight]), optional
        The graph whose nodes ``k(idx)`` indexes. Without it the kernel takes whole graphs:
        ``k(data)``. Edges are undirected (an edge listed in both directions, as PyG does,
        is one edge; of two different weights the larger is kept); ``edge_index`` must be
        an integer tensor of shape (2, E) with entries in [0, num_nodes). Nonnegative
        weights come from ``data.edge_weight``, else from ``data.weight`` when it holds
        one value per edge (shape (E,): what ``torch_geometric.utils.from_networkx``
        writes for a weighted networkx graph); both present and different is a
        ValueError. Self-loops are ignored.
    method : {"auto", "dense", "krylov"}
        ``"dense"``: eigendecomposition of the dense Laplacian, O(n³) time and O(n²)
        memory once per graph. ``"krylov"``: an operator KernelMatrix on the sparse
        Laplacian, memory linear in the number of edges. ``"auto"``: dense up to
        ``DENSE_MAX_NODES`` nodes.
    tol : float
        Accuracy target of the iterative method (``"krylov"``), relative to ‖v‖.
    max_iter : int, optional
        Iteration cap of the iterative method; a ConvergenceWarning reports a stop there."""


class DiffusionKernel(_NodeKernel):
    r"""The diffusion kernel K = e^{−βL} on the nodes of a graph (Kondor & Lafferty 2002).

    K = Σ_i e^{−βλ_i} u_i u_iᵀ: heat diffused for time β from one node to another;
    positive definite for every β > 0. On the complete graph on m nodes
    K_ii = (1 + (m − 1)e^{−βm})/m and K_ij = (1 − e^{−βm})/m.

    Parameters
    ----------
    beta : float
        Diffusion time β > 0 (learnable: ``k.beta``, gradients through both methods).
    laplacian : {"combinatorial", "normalized"}
        L = D − W, or L̃ = I − D^{-1/2} W D^{-1/2} (L̃_ii = 0 at isolated nodes).
    {call}

    Notes
    -----
    ``"krylov"``: each product K @ V is PV + e^{−βL}(V − PV), with P the projector onto
    ker L (one vector per connected component, exact), the second term by Lanczos on L
    for the r columns at once, e^{−βL}v ≈ ‖v‖ Q_m e^{−βT_m} e₁, until the estimated error
    is below ``tol``·‖v‖
    (default ``max_iter`` 500 steps); cost O(m·nnz(L)·r), m ≈ √(β‖L‖) + a few, memory
    O(nnz(L) + n·r·m) (beyond 256 MB or the size of L the basis is replayed, not stored).
    ``diag()`` on the operator form is exact and costs one application per node.

    References
    ----------
    R. I. Kondor and J. Lafferty, "Diffusion kernels on graphs and other discrete input
    spaces", ICML 2002. E. Gallopoulos and Y. Saad, "Efficient solution of parabolic
    equations by Krylov approximation methods", SIAM J. Sci. Stat. Comput. 13 (1992).

    Examples
    --------
    >>> import torch
    >>> from torchkern.graphs import DiffusionKernel
    >>> edge_index = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
    >>> k = DiffusionKernel(0.5, graph=(edge_index, 3))
    >>> k([0, 2]).to_dense().shape
    torch.Size([2, 2])
    """

    def __init__(self, beta=1.0, laplacian="combinatorial", graph=None, method="auto",
                 tol=1e-10, max_iter=None):
        super().__init__(graph, method, tol, max_iter)
        self.register_hyperparameter("beta", beta)
        self._kind = _check_laplacian(laplacian)

    @property
    def laplacian(self):
        return self._kind

    def _spectral(self, lam, g):
        return torch.exp(-self.beta.to(_F64) * lam)

    def _apply(self, g, V):
        L = g.laplacian(self._kind)
        store = max(_LANCZOS_STORE_BYTES, 16 * L.values().numel())
        # e^{−βL}V = PV + e^{−βL}(V − PV), P the projector onto ker L (known exactly, per
        # connected component). Lanczos on the whole of V met the null space as Ritz
        # values of size ε‖L‖ instead of 0, and e^{−βθ} lost up to all of PV for large
        # β‖L‖ (1% off at β = 1e8 with edge weights 1e6) while its error estimate passed.
        P = g.project_null(V, self._kind)
        return P + expm_action(L, V - P, self.beta.to(_F64), tol=self.tol,
                               max_iter=self.max_iter or 500, store_bytes=store)


class RegularizedLaplacian(_NodeKernel):
    r"""The regularized Laplacian kernel K = (L + εI)⁻¹ (Smola & Kondor 2003).

    K = Σ_i u_i u_iᵀ/(λ_i + ε): the reproducing kernel of the node functions with norm
    ‖f‖² = Σ_{i~j} w_ij (f_i − f_j)² + ε‖f‖²; positive definite for ε > 0.

    Parameters
    ----------
    eps : float
        ε > 0 (learnable: ``k.eps``).
    laplacian : {"combinatorial", "normalized"}
        L = D − W, or L̃ = I − D^{-1/2} W D^{-1/2}.
    {call}

    Notes
    -----
    ``"krylov"``: each product K @ V is PV/ε + (L + εI)⁻¹(V − PV), with P the projector
    onto ker L (one vector per connected component), the solve by conjugate gradients on
    the sparse L with a Jacobi preconditioner (:func:`torchkern.linalg.cg`, relative
    residual ``tol``); O(k·nnz(L)·r) with k ≲ √((λ_max + ε)/(λ₂ + ε))·log(1/tol) for the
    smallest nonzero eigenvalue λ₂, O(nnz(L) + n r) memory.

    References
    ----------
    A. J. Smola and R. Kondor, "Kernels and regularization on graphs", COLT 2003.
    """

    def __init__(self, eps=1.0, laplacian="combinatorial", graph=None, method="auto",
                 tol=1e-10, max_iter=None):
        super().__init__(graph, method, tol, max_iter)
        self.register_hyperparameter("eps", eps)
        self._kind = _check_laplacian(laplacian)

    @property
    def laplacian(self):
        return self._kind

    def _spectral(self, lam, g):
        return 1.0 / (lam + self.eps.to(_F64))

    def _apply(self, g, V):
        eps = self.eps.to(_F64)
        A = _SparseOperator(g.laplacian(self._kind), eps)
        # (L + εI)⁻¹V = PV/ε + (L + εI)⁻¹(V − PV), P the projector onto ker L: CG then
        # meets only the eigenvalues ≥ λ₂ + ε, not ε itself (condition (λ_max + ε)/(λ₂ + ε)
        # rather than (λ_max + ε)/ε).
        P = g.project_null(V, self._kind)
        return P / eps + self._cg(A, V - P, _laplacian_diag(g, self._kind) + eps)


class PStepRandomWalk(_NodeKernel):
    r"""The p-step random walk kernel K = (aI − L̃)^p (Smola & Kondor 2003).

    L̃ = I − D^{-1/2} W D^{-1/2} is the normalized Laplacian, whose spectrum lies in
    [0, 2]; with a ≥ 2, K = Σ_i (a − λ_i)^p u_i u_iᵀ is positive semi-definite. For
    a = 2 it is (I + D^{-1/2} W D^{-1/2})^p: p steps of a lazy random walk.

    Parameters
    ----------
    a : float
        a ≥ 2 (a fixed hyperparameter).
    p : int
        Number of steps, p ≥ 1.
    {call}

    Notes
    -----
    ``"krylov"``: K @ V is p sparse products, O(p·nnz(L)·r), exact (``tol`` unused).

    References
    ----------
    A. J. Smola and R. Kondor, "Kernels and regularization on graphs", COLT 2003.
    """

    _kind = "normalized"

    def __init__(self, a=2.0, p=1, graph=None, method="auto", tol=1e-10, max_iter=None):
        super().__init__(graph, method, tol, max_iter)
        if not is_int(p) or p < 1:
            raise ValueError(f"p must be a positive int (number of steps), got {p!r}")
        _check_a(a, p)
        self.register_hyperparameter("a", a, learnable=False)
        self.p = int(p)

    def extra_repr(self):
        return f"{super().extra_repr()}, p={self.p}"

    def _check_hypers(self):
        _check_a(float(self.a), self.p)

    def _spectral(self, lam, g):
        return (self.a.to(_F64) - lam) ** self.p

    def _apply(self, g, V):
        L, a = g.laplacian(self._kind), self.a.to(_F64)
        for _ in range(self.p):
            V = a * V - L @ V
        return V


def _check_a(a, p):
    if not (np.isfinite(float(a)) and float(a) >= 2):
        raise ValueError(f"PStepRandomWalk: a must be finite and >= 2 (the normalized "
                         f"Laplacian's spectrum reaches 2), got {a!r}")
    # K's largest eigenvalue is a^p (the normalized Laplacian always has λ = 0): past
    # float64 the dense Gram was NaN, the products inf
    if p * np.log(float(a)) > np.log(torch.finfo(_F64).max):
        raise ValueError(f"PStepRandomWalk: a^p = {float(a):g}^{p} overflows float64; take "
                         f"a smaller a or p")


class CommuteTime(_NodeKernel):
    r"""The commute-time kernel K = L⁺, the pseudo-inverse of the Laplacian L = D − W.

    K = Σ_{λ_i > 0} u_i u_iᵀ/λ_i. Its feature-space distances are commute times of the
    random walk on the graph: K_ii + K_jj − 2K_ij = n(i, j)/vol(G) (Fouss et al. 2007),
    and it is the reproducing kernel of the node functions orthogonal to ker L with norm
    fᵀLf. On a graph with several connected components ker L holds one indicator per
    component, and K is the sum of the components' own pseudo-inverses (K_ij = 0 between
    components).

    Parameters
    ----------
    {call}

    Notes
    -----
    Dense: the zero eigenvalues are the c smallest, c = the number of components (found
    in time linear in nodes and edges), so L⁺ needs no rank threshold. ``"krylov"``:
    K @ V = (L + P)⁻¹V − PV with P = Σ_c 1_c 1_cᵀ/n_c (n_c nodes in component c) the
    projector onto ker L (L + P is positive definite and commutes with P), solved by
    Jacobi-preconditioned CG: O(k·nnz(L)·r) with k ≲ √(λ_max/λ₂)·log(1/tol) for the
    smallest nonzero eigenvalue λ₂ — slow on graphs with long paths or weakly connected
    clusters.

    References
    ----------
    F. Fouss, A. Pirotte, J.-M. Renders and M. Saerens, "Random-walk computation of
    similarities between nodes of a graph with application to collaborative
    recommendation", IEEE TKDE 19(3), 2007.
    """

    def __init__(self, graph=None, method="auto", tol=1e-10, max_iter=None):
        super().__init__(graph, method, tol, max_iter)

    def _spectral(self, lam, g):
        c = g.components()[1].numel()
        inv = torch.zeros_like(lam)
        inv[c:] = 1.0 / lam[c:]
        return inv

    def _apply(self, g, V):
        labels, sizes = g.components()
        A = _SparseOperator(g.laplacian("combinatorial"), 0.0, (labels, sizes))
        X = self._cg(A, V, g.degree + 1.0 / sizes[labels])
        return X - _project_kernel(V, labels, sizes)


for _cls in (DiffusionKernel, RegularizedLaplacian, PStepRandomWalk, CommuteTime):
    _cls.__doc__ = _cls.__doc__.replace("    {call}", _CALL_DOC.strip("\n"))
