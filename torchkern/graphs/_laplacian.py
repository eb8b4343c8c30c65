"""One undirected graph, its Laplacians, and the action of e^{−tL} on vectors.

:class:`_Graph` parses a graph once (PyG ``Data`` or ``(edge_index, num_nodes[,
edge_weight])``) and caches what node kernels ask of it: the sparse combinatorial and
normalized Laplacians, their dense eigendecompositions (small graphs), the connected
components. :func:`expm_action` computes e^{−tL}V by Lanczos on the sparse L, batched over
the columns of V, in O(nnz(L)) memory.
"""
from __future__ import annotations

import warnings

import numpy as np
import torch

from ..linalg import ConvergenceWarning
from ._batch import check_edge_index

__all__ = ["as_graph", "is_graph_like", "edge_weights", "expm_action", "LAPLACIANS"]

_F64 = torch.float64
LAPLACIANS = ("combinatorial", "normalized")


def is_graph_like(obj) -> bool:
    """Whether ``obj`` describes a whole graph: a parsed graph, a PyG ``Data`` (anything
    with ``edge_index`` and ``num_nodes``) or a tuple ``(edge_index, num_nodes[,
    edge_weight])``."""
    if isinstance(obj, _Graph):
        return True
    if hasattr(obj, "edge_index") and hasattr(obj, "num_nodes"):
        return True
    return (isinstance(obj, tuple) and len(obj) in (2, 3)
            and isinstance(obj[0], (torch.Tensor, np.ndarray)) and np.ndim(obj[0]) == 2)


def as_graph(obj, name: str = "graph") -> "_Graph":
    """A :class:`_Graph` from a PyG ``Data`` or ``(edge_index, num_nodes[, edge_weight])``."""
    if isinstance(obj, _Graph):
        return obj
    if hasattr(obj, "edge_index") and hasattr(obj, "num_nodes"):
        if obj.edge_index is None:
            raise ValueError(f"{name} has no edge_index")
        return _Graph.parse(obj.edge_index, obj.num_nodes, edge_weights(obj, name), name)
    if is_graph_like(obj):
        return _Graph.parse(*obj, name=name) if len(obj) == 3 else _Graph.parse(*obj, None, name)
    raise TypeError(f"{name} must be a torch_geometric Data or a tuple (edge_index, num_nodes"
                    f"[, edge_weight]), got {type(obj).__name__}")


def edge_weights(data, name: str = "graph"):
    """The edge weights of a PyG ``Data``: ``data.edge_weight``, else ``data.weight`` when it
    holds one value per edge — shape (E,) or (E, 1), E the columns of ``edge_index`` — as
    ``torch_geometric.utils.from_networkx`` writes the edge attribute ``weight`` of a
    weighted networkx graph; None when neither. A ``weight`` of another shape is not an
    edge attribute and is left alone. Both present and different is a ValueError."""
    ew = getattr(data, "edge_weight", None)
    w = getattr(data, "weight", None)
    E = int(data.edge_index.shape[1]) if np.ndim(data.edge_index) == 2 else -1
    if not (isinstance(w, (torch.Tensor, np.ndarray)) and w.ndim in (1, 2)
            and w.shape[0] == E and int(np.prod(w.shape)) == E):
        return ew
    if ew is None:
        return w
    a = torch.as_tensor(ew).reshape(-1).to(_F64).cpu()
    b = torch.as_tensor(w).reshape(-1).to(_F64).cpu()
    if a.shape == b.shape and not bool(torch.equal(a, b)):  # other shapes: parse says so
        raise ValueError(f"{name} has both edge_weight and weight (one value per edge, as "
                         f"torch_geometric.utils.from_networkx writes it) and they differ: "
                         f"keep one of them (del data.weight or del data.edge_weight)")
    return ew


def _sparse_csr(rows, cols, vals, n):
    """CSR tensor from entries sorted by (row, col)."""
    crow = torch.zeros(n + 1, dtype=torch.int64, device=rows.device)
    crow[1:] = torch.cumsum(torch.bincount(rows, minlength=n), 0)
    with warnings.catch_warnings():  # torch flags its CSR support as beta on every build
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(crow, cols, vals, (n, n), check_invariants=False)


class _Graph:
    """An undirected graph with nonnegative edge weights, parsed once and immutable.

    ``src``, ``dst``, ``weight`` list every edge in both directions, sorted by
    (src, dst), without self-loops. Caches Laplacians, eigendecompositions and components,
    so kernels and estimators that meet the same graph again pay for them once.
    """

    def __init__(self, src, dst, weight, n):
        self.src, self.dst, self.weight, self.n = src, dst, weight, n
        self.device = src.device
        self.degree = torch.zeros(n, dtype=_F64, device=self.device).index_add_(0, src, weight)
        self._cache = {}

    @classmethod
    def parse(cls, edge_index, num_nodes, edge_weight=None, name="graph"):
        if isinstance(num_nodes, bool) or not isinstance(num_nodes,
                                                         (int, np.integer, torch.Tensor)):
            raise TypeError(f"{name}: num_nodes must be an int, got {type(num_nodes).__name__}")
        n = int(num_nodes)
        if n < 1:
            raise ValueError(f"{name} has no nodes (num_nodes={n})")
        ei = check_edge_index(edge_index, n, name)
        E = ei.shape[1]
        if edge_weight is None:
            w = torch.ones(E, dtype=_F64, device=ei.device)
        else:
            w = torch.as_tensor(edge_weight).to(device=ei.device, dtype=_F64)
            if w.dim() == 2 and w.shape[1] == 1:
                w = w.reshape(-1)
            if w.shape != (E,):
                raise ValueError(f"{name}: edge_weight must have shape ({E},), one weight per "
                                 f"edge, got {tuple(w.shape)}")
            if not bool(torch.isfinite(w).all()) or bool((w < 0).any()):
                raise ValueError(f"{name}: edge_weight must be finite and >= 0")
        keep = (ei[0] != ei[1]) & (w > 0)  # self-loops cancel in L = D − W; drop them
        u, v, w = ei[0][keep], ei[1][keep], w[keep]
        # An edge listed in both directions (PyG's convention) is one edge: symmetrize by
        # keeping the larger weight of each ordered pair.
        key = torch.cat([u * n + v, v * n + u])
        uniq, inv = torch.unique(key, sorted=True, return_inverse=True)
        wsym = torch.zeros(uniq.numel(), dtype=_F64, device=ei.device)
        wsym.scatter_reduce_(0, inv, torch.cat([w, w]), "amax", include_self=False)
        return cls(uniq // n, uniq % n, wsym, n)

    # -- kept as one object through copies (it is immutable; caches are shared) ---------
    def __deepcopy__(self, memo):
        return self

    def same_as(self, other) -> bool:
        if other is self:
            return True
        # Same graph on another device is another graph here: its cached Laplacian and
        # eigendecomposition live on that device.
        return (isinstance(other, _Graph) and other.n == self.n
                and other.device == self.device
                and other.src.numel() == self.src.numel()
                and bool(torch.equal(other.src.cpu(), self.src.cpu()))
                and bool(torch.equal(other.dst.cpu(), self.dst.cpu()))
                and bool(torch.equal(other.weight.cpu(), self.weight.cpu())))

    def to(self, device) -> "_Graph":
        device = torch.device(device)
        if device == self.device:
            return self
        key = ("to", str(device))
        if key not in self._cache:
            self._cache[key] = _Graph(self.src.to(device), self.dst.to(device),
                                      self.weight.to(device), self.n)
        return self._cache[key]

    @property
    def num_edges(self) -> int:
        """Undirected edges (each counted once)."""
        return self.src.numel() // 2

    # -- what node kernels read -------------------------------------------------------
    def laplacian(self, kind: str) -> torch.Tensor:
        """The sparse (CSR, float64) Laplacian.

        ``"combinatorial"``: L = D − W. ``"normalized"``: L̃ = I − D^{-1/2} W D^{-1/2},
        with L̃_ii = 0 at isolated nodes (Chung 1997), so that L̃'s null space has one
        dimension per connected component, as L's.
        """
        key = ("laplacian", kind)
        if key not in self._cache:
            n, dev = self.n, self.device
            d = self.degree
            if kind == "combinatorial":
                off, diag = -self.weight, d
            else:
                s = torch.where(d > 0, d.clamp_min(1e-300).rsqrt(), torch.zeros_like(d))
                off, diag = -self.weight * s[self.src] * s[self.dst], (d > 0).to(_F64)
            ar = torch.arange(n, device=dev)
            rows = torch.cat([self.src, ar])
            cols = torch.cat([self.dst, ar])
            order = torch.argsort(rows * n + cols)
            self._cache[key] = _sparse_csr(rows[order], cols[order],
                                           torch.cat([off, diag])[order], n)
        return self._cache[key]

    def eigh(self, kind: str):
        """(λ ascending, clamped at 0; U) of the dense Laplacian, float64. O(n³) once.

        Both Laplacians have one zero eigenvalue per connected component (an isolated node
        is one): the c smallest are set to exactly 0. Computed, they are rounding noise of
        size ε‖L‖, and e^{−βλ} read 1 − β·1e-16‖L‖ on the null space (5e-6 off for edge
        weights 1e6 and β = 1e4)."""
        key = ("eigh", kind)
        if key not in self._cache:
            with torch.no_grad():
                lam, U = torch.linalg.eigh(self.laplacian(kind).to_dense())
            lam = lam.clamp_min(0)
            lam[:self.components()[1].numel()] = 0.0
            self._cache[key] = (lam, U)
        return self._cache[key]

    def project_null(self, V: torch.Tensor, kind: str) -> torch.Tensor:
        """P V for P the orthogonal projector onto the null space of the Laplacian ``kind``.

        Per connected component c, ker L is spanned by 1_c and ker L̃ by D^{1/2} 1_c (by
        e_i for an isolated node i, where L̃_ii = 0): P = Σ_c z_c z_cᵀ with z_c = s 1_c /
        ‖s 1_c‖, s = 1 (combinatorial) or √d (normalized; 1 at isolated nodes).
        O(n r)."""
        labels, sizes = self.components()
        if kind == "combinatorial":
            s, mass = None, sizes
        else:
            d = self.degree
            s = torch.where(d > 0, d.sqrt(), torch.ones_like(d))
            mass = torch.zeros_like(sizes).index_add_(0, labels, s * s)
        W = V if s is None else V * s[:, None]
        sums = torch.zeros(sizes.numel(), V.shape[1], dtype=V.dtype, device=V.device)
        out = (sums.index_add(0, labels, W) / mass[:, None])[labels]
        return out if s is None else out * s[:, None]

    def components(self):
        """(labels (n,), sizes (c,) float64) of the connected components, O(n + edges)."""
        if "components" not in self._cache:
            from scipy.sparse import csr_matrix
            from scipy.sparse.csgraph import connected_components
            src, dst = self.src.cpu().numpy(), self.dst.cpu().numpy()
            A = csr_matrix((np.ones(src.size), (src, dst)), shape=(self.n, self.n))
            c, labels = connected_components(A, directed=False)
            labels = torch.as_tensor(labels, dtype=torch.int64, device=self.device)
            sizes = torch.bincount(labels, minlength=c).to(_F64)
            self._cache["components"] = (labels, sizes)
        return self._cache["components"]

    def __repr__(self):
        return f"_Graph(num_nodes={self.n}, num_edges={self.num_edges}, device={self.device})"


# --------------------------------------------------------------------------------------
# e^{−tL} V by Lanczos
# --------------------------------------------------------------------------------------

def _tridiag_expm_e1(alpha, beta, t):
    """exp(−tT)e₁ and tφ₁(−tT)e₁ (φ₁(z) = (eᶻ − 1)/z) for the batch of tridiagonal T with
    diagonals ``alpha`` (m, r) and off-diagonals ``beta`` (m − 1, r); each (r, m)."""
    T = torch.diag_embed(alpha.T)
    if beta.shape[0]:
        T = T + torch.diag_embed(beta.T, 1) + torch.diag_embed(beta.T, -1)
    theta, Y = torch.linalg.eigh(T)
    # L is positive semi-definite, so are the T_m: a negative Ritz value is rounding noise
    # (of size ε‖L‖) that e^{−tθ} would amplify for large t.
    theta = theta.clamp_min(0)
    z = t * theta
    small = z.abs() < 1e-8
    phi = torch.where(small, t * (1 - z / 2), -torch.expm1(-z) / torch.where(small, 1, theta))
    first = Y[:, 0, :]
    return ((Y * (torch.exp(-z) * first)[:, None, :]).sum(-1),
            (Y * (phi * first)[:, None, :]).sum(-1))


def _check_now(j: int) -> bool:
    # Each check costs an m × m eigendecomposition per column: check every step while
    # m is small, then every ~m/10 steps (overshooting convergence by at most ~10%).
    return j < 30 or j % max(1, j // 10) == 0


def _lanczos_expm(L, V, t, tol, max_iter, store_bytes):
    """e^{−tL}V (float64, no autograd) and the number of Lanczos steps.

    One Lanczos process per column of V, all advanced by one product L @ Q per step. The
    basis is kept while it fits ``store_bytes``; otherwise the three-term recurrence is
    replayed with the stored coefficients (one more product per step, O(n r) memory).
    """
    n, r = V.shape
    t = float(t)
    nrm = V.norm(dim=0)
    q = V / torch.where(nrm > 0, nrm, torch.ones_like(nrm))
    q_prev = torch.zeros_like(q)
    b_prev = torch.zeros(r, dtype=_F64, device=V.device)
    alphas, betas = [], []
    basis = [] if n * r * 8 * 2 <= store_bytes else None
    y_old = None
    done = nrm == 0
    for j in range(max_iter):
        if basis is not None:
            basis.append(q)
            if (len(basis) + 1) * n * r * 8 > store_bytes:
                basis = None
        w = L @ q
        a = (q * w).sum(0)
        w = w - a * q - b_prev * q_prev
        b = w.norm(dim=0)
        alphas.append(a)
        # A column whose Krylov space became invariant (β ≈ 0) is exact: stop it there.
        broken = b <= 1e-13 * torch.stack(alphas).abs().amax(0).clamp_min(1e-300)
        b = torch.where(broken, torch.zeros_like(b), b)
        last = j == max_iter - 1
        if _check_now(j) or last or bool((broken | done).all()):
            y, g = _tridiag_expm_e1(torch.stack(alphas), torch.stack(betas) if betas else
                                    alphas[0].new_zeros(0, r), t)
            # Error estimates relative to ‖v‖: the leading term of the error expansion,
            # t β_{m+1} |e_mᵀ φ₁(−tT_m) e₁| (Saad 1992, Thm 5.1; unlike β|e_mᵀ e^{−tT_m} e₁| it
            # does not vanish while e^{−tT_m} is tiny but the smallest eigenvalues are not yet
            # found), the same with e^{−tT_m}, and the change since the last check.
            est = b * torch.maximum(g[:, -1].abs(), y[:, -1].abs())
            if y_old is not None:
                est = torch.maximum(est, (y[:, : y_old.shape[1]] - y_old).norm(dim=1)
                                    + y[:, y_old.shape[1]:].norm(dim=1))
            y_old = y
            done = done | broken | (est <= tol)
            if bool(done.all()):
                break
        betas.append(b)
        q_prev, q, b_prev = q, w / torch.where(b > 0, b, torch.full_like(b, float("inf"))), b
    else:
        warnings.warn(f"Lanczos for exp(-tL)v stopped at max_iter={max_iter} steps with "
                      f"estimated error {float(est.max()):.2e} > tol={tol:.1e} (relative to "
                      f"||v||); raise max_iter", ConvergenceWarning, stacklevel=4)
    m = len(alphas)
    coef = y * nrm[:, None]  # (r, m)
    if basis is not None and len(basis) >= m:
        out = basis[0] * coef[:, 0]
        for k in range(1, m):
            out.add_(basis[k] * coef[:, k])
        return out, m
    # Replay the recurrence with the recorded coefficients.
    q = V / torch.where(nrm > 0, nrm, torch.ones_like(nrm))
    q_prev = torch.zeros_like(q)
    out = q * coef[:, 0]
    for k in range(m - 1):
        w = L @ q - alphas[k] * q - (betas[k - 1] if k else 0) * q_prev
        bk = betas[k]
        q_prev, q = q, w / torch.where(bk > 0, bk, torch.full_like(bk, float("inf")))
        out.add_(q * coef[:, k + 1])
    return out, m


class _ExpmAction(torch.autograd.Function):
    """U = e^{−tL}V with gradients: dV = e^{−tL}G (L symmetric), dt = −⟨G, L U⟩."""

    @staticmethod
    def forward(ctx, t, V, L, tol, max_iter, store_bytes):
        U, _ = _lanczos_expm(L, V, t, tol, max_iter, store_bytes)
        ctx.L, ctx.args = L, (tol, max_iter, store_bytes)
        ctx.save_for_backward(t, U)
        return U

    @staticmethod
    def backward(ctx, G):
        t, U = ctx.saved_tensors
        gt = gV = None
        if ctx.needs_input_grad[0]:
            gt = -(G * (ctx.L @ U)).sum().reshape(t.shape)
        if ctx.needs_input_grad[1]:
            gV, _ = _lanczos_expm(ctx.L, G, t, *ctx.args)
        return gt, gV, None, None, None, None


def expm_action(L, V, t, *, tol=1e-10, max_iter=500, store_bytes=2**28):
    r"""e^{−tL}V for a symmetric positive semi-definite sparse L, by Lanczos.

    For each column v, m Lanczos steps give L Q_m ≈ Q_m T_m with orthonormal Q_m and
    tridiagonal T_m, and e^{−tL}v ≈ ‖v‖ Q_m e^{−tT_m} e₁ (Gallopoulos & Saad 1992;
    Hochbruck & Lubich 1997: m grows like √(t‖L‖) before convergence is superlinear).
    Steps stop when the estimated error is at most ``tol``·‖v‖ for every column; a
    :class:`~torchkern.linalg.ConvergenceWarning` says so otherwise.

    Parameters
    ----------
    L : sparse tensor (or anything with ``@``), (n, n), float64.
    V : Tensor, (n, r) float64.
    t : float or 0-d Tensor (may require grad).
    tol : float
        Error target relative to ‖v‖ per column.
    max_iter : int
        Lanczos steps at most.
    store_bytes : int
        Keep the Lanczos basis when it fits; beyond, replay the recurrence (two products
        per step, O(n r) memory).

    Returns
    -------
    Tensor (n, r): differentiable with respect to ``t`` and ``V``.

    Notes
    -----
    Cost: m products L @ Q (O(nnz(L)·r) each) plus O(n r m) vector work and O(r m³) for the
    small exponentials; memory O(nnz(L) + n r m) (O(n r) when replaying). No
    reorthogonalization: for functions of symmetric matrices the finite-precision
    recurrence converges as in exact arithmetic on a slightly larger spectral interval
    (Druskin, Greenbaum & Knizhnerman 1998).
    """
    t = torch.as_tensor(t, dtype=_F64, device=V.device)
    if torch.is_grad_enabled() and (t.requires_grad or V.requires_grad):
        return _ExpmAction.apply(t, V, L, tol, max_iter, store_bytes)
    with torch.no_grad():
        return _lanczos_expm(L, V, t, tol, max_iter, store_bytes)[0]
