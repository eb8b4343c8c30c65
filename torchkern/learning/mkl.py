r"""Multiple kernel learning below the estimators: a learnable combination of kernels
(:class:`MultipleKernel`) and the weights of the combination learned from Gram matrices
and labels alone — EasyMKL's, the alignment heuristics', and the alignf combination.

The estimators that wrap an SVM or kernel ridge regression around these weights
(``SimpleMKL``, ``EasyMKL``, ``AverageMKL``, ``FHeuristic``, ``CKA``) live in
``torchkern.supervised.mkl`` (exported by :mod:`torchkern.supervised`), above the
estimators they use.
"""
from __future__ import annotations

import functools
import operator
import warnings

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .._validation import check_symmetric, is_int, is_real, real_tensor
from ..gram import (DenseKernelMatrix, Formula, KernelMatrix, ScaledKernelMatrix,
                    SumKernelMatrix, combine_formulas)
from ..kernels.base import Kernel, _fmt, inv_softplus
from ..linalg import ConvergenceWarning

__all__ = ["MultipleKernel", "easymkl_weights", "fheuristic_weights", "cka_weights",
           "alignf_weights"]

_F64 = torch.float64
_TINY = torch.finfo(_F64).tiny
_MODES = ("simplex", "nonneg", "fixed")


class MultipleKernel(Kernel):
    r"""k(x, y) = Σ_i η_i k_i(x, y) with learnable, constrained weights η.

    ``weights="simplex"``: η = softmax(θ), so η_i > 0 and Σ η_i = 1 under any gradient step;
    ``"nonneg"``: η = softplus(θ) > 0; ``"fixed"``: η is a buffer (zeros allowed: those
    terms are skipped; not all of them), what :class:`~torchkern.supervised.SimpleMKL`
    uses for its inner solves. The combination is p.s.d. as a non-negative sum of p.s.d.
    kernels (Lanckriet et al. 2004, "Learning the kernel matrix with semidefinite
    programming", JMLR 5).

    On vectors the terms are fused into one formula (one KeOps reduction or one pass of
    row blocks, whatever the number of kernels), so the Gram matrix is lazy at any n; terms
    on structured inputs are summed as lazy Gram matrices. Combine with ``active_dims`` for
    one kernel per feature or per data source.

    Parameters
    ----------
    kernels : sequence of Kernel
    weights : {"simplex", "nonneg", "fixed"}
    init : array-like of shape (p,), optional
        Initial weights (default 1/p each), finite and > 0; ``"fixed"`` weights may be 0
        but not all of them.

    Attributes
    ----------
    weights : Tensor of shape (p,)
        The current η (differentiable).

    Examples
    --------
    >>> import torch, torchkern
    >>> from torchkern.learning import MultipleKernel
    >>> k = MultipleKernel([torchkern.RBF(active_dims=[0]), torchkern.RBF(active_dims=[1])])
    >>> k.weights
    tensor([0.5000, 0.5000], dtype=torch.float64, grad_fn=<SoftmaxBackward0>)
    """

    def __init__(self, kernels, weights="simplex", init=None):
        super().__init__()
        if isinstance(kernels, Kernel):  # list(kernel) said "'RBF' object is not iterable"
            raise TypeError(f"kernels must be a non-empty sequence of torchkern Kernels, got "
                            f"one {type(kernels).__name__}: wrap it in a list")
        kernels = list(kernels)
        if not kernels or not all(isinstance(k, Kernel) for k in kernels):
            raise TypeError("kernels must be a non-empty sequence of torchkern Kernels")
        if weights not in _MODES:
            raise ValueError(f"weights must be one of {_MODES}, got {weights!r}")
        self.kernels = nn.ModuleList(kernels)
        self.vector_input = all(k.vector_input for k in kernels)
        if not self.vector_input and any(k.vector_input for k in kernels):
            raise TypeError("cannot combine kernels on vectors with kernels on structured "
                            "inputs: they take different data")
        self.mode = weights
        p = len(kernels)
        eta = torch.full((p,), 1.0 / p, dtype=_F64) if init is None else \
            real_tensor(init, "init").detach().clone()
        if eta.dim() > 1:  # [[0.5, 0.5]] was read as its flattening
            raise ValueError(f"init must be a 1-D sequence of weights, got shape "
                             f"{tuple(eta.shape)}")
        eta = eta.reshape(-1)
        self._check_weights(eta)
        if weights == "fixed":
            self.register_buffer("fixed_weights", eta)
        else:
            raw = eta.log() if weights == "simplex" else inv_softplus(eta)
            self.raw_weights = nn.Parameter(raw)

    def _check_weights(self, eta, name: str = "init"):
        p = len(self.kernels)
        if eta.numel() != p:
            raise ValueError(f"{name} must have one weight per kernel ({p}), got {eta.numel()}")
        bad = (eta < 0) if self.mode == "fixed" else (eta <= 0)
        if not bool(torch.isfinite(eta).all()) or bool(bad.any()):
            raise ValueError(f"{name}: weights must be finite and "
                             f"{'>=' if self.mode == 'fixed' else '>'} 0, got {eta.tolist()}")
        if not bool((eta > 0).any()):  # "fixed" only: the combination would be the zero kernel
            raise ValueError(f"{name}: the fixed weights are all 0, so the kernel would be 0 "
                             f"everywhere; give at least one weight > 0")

    @property
    def weights(self) -> torch.Tensor:
        if self.mode == "fixed":
            return self.fixed_weights
        if self.mode == "simplex":
            return torch.softmax(self.raw_weights, 0)
        return F.softplus(self.raw_weights)

    def set_weights(self, eta) -> "MultipleKernel":
        """Set η (on the simplex for ``"simplex"``: it is renormalized)."""
        eta = real_tensor(eta, "eta").detach().reshape(-1)
        self._check_weights(eta, "eta")
        with torch.no_grad():
            if self.mode == "fixed":
                self.fixed_weights.copy_(eta)
            elif self.mode == "simplex":
                # softmax(log η) = η / Σ η, without the sum (Σ η overflowed for η_i
                # near 1e308: log 0 and NaN weights)
                self.raw_weights.copy_(eta.log())
            else:
                self.raw_weights.copy_(inv_softplus(eta))
        return self

    def check_input(self, X, name: str = "X", **kw):
        return self.kernels[0].check_input(X, name, **kw)

    def _active(self):
        w = self.weights
        idx = range(len(self.kernels)) if self.mode != "fixed" else \
            [i for i in range(len(self.kernels)) if float(w[i]) > 0]
        return w, list(idx) or [0]

    def _formula(self, X, Y=None):
        w, idx = self._active()
        parts = []
        for i in idx:
            f = self.kernels[i].formula(X, Y)
            wi = w[i:i + 1].to(dtype=f.dtype, device=f.device)
            parts.append(Formula(f.xs, f.ys, f.ps + (wi,),
                                 lambda xs, ys, ps, fn=f.fn: ps[-1] * fn(xs, ys, ps[:-1]),
                                 needs_float64=f.needs_float64))
        return combine_formulas(parts, lambda terms: functools.reduce(operator.add, terms))

    def forward(self, X, Y=None, *, backend=None):
        if self.vector_input:
            return super().forward(X, Y, backend=backend)
        X = self.check_input(X, "X")
        Y = None if Y is None else self.check_input(Y, "Y")
        w, idx = self._active()
        mats = [self.kernels[i](X, Y, backend=backend) for i in idx]
        ws = [w[i].to(dtype=M.dtype, device=M.device) for i, M in zip(idx, mats)]
        if backend == "dense":
            return DenseKernelMatrix(sum(c * M.to_dense() for c, M in zip(ws, mats)))
        return SumKernelMatrix([ScaledKernelMatrix(M, c) for c, M in zip(ws, mats)])

    def diag(self, X):
        if self.vector_input:
            return super().diag(X)
        X = self.check_input(X, "X")
        w, idx = self._active()
        return sum(w[i].to(X.dtype) * self.kernels[i].diag(X) for i in idx)

    def pairs(self, X, Y):
        if self.vector_input:
            return super().pairs(X, Y)
        # Structured terms have no formula: Σ_i η_i times each term's own pairs, never the
        # diagonal of the combined k(X, Y)
        w, idx = self._active()
        out = [self.kernels[i].pairs(X, Y) for i in idx]
        return sum(w[i].to(p.dtype) * p for i, p in zip(idx, out))

    def extra_repr(self):
        return f"weights={self.mode}: {_fmt(self.weights)}"


# --------------------------------------------------------------------------------------
# Weights of a combination from Gram matrices and labels (no estimator inside)
# --------------------------------------------------------------------------------------
def _as_grams(grams, name: str = "grams") -> list:
    """A list of square KernelMatrix of one size: KernelMatrix kept as they are (lazy),
    (n, n) arrays or tensors wrapped as dense ones, a (p, n, n) array split."""
    if isinstance(grams, KernelMatrix):
        raise TypeError(f"{name} must be a sequence of Gram matrices, one per kernel; got "
                        f"a single KernelMatrix")
    if isinstance(grams, (torch.Tensor, np.ndarray)):
        if grams.ndim != 3:
            raise ValueError(f"{name} as one array must have shape (p, n, n), got "
                             f"{tuple(grams.shape)}")
        grams = list(grams)
    try:
        grams = list(grams)
    except TypeError:
        raise TypeError(f"{name} must be a sequence of Gram matrices (KernelMatrix or "
                        f"(n, n) arrays), got {type(grams).__name__}") from None
    if not grams:
        raise ValueError(f"{name} is empty: give at least one Gram matrix")
    out = []
    for i, K in enumerate(grams):
        if not isinstance(K, KernelMatrix):
            try:
                t = K.detach() if isinstance(K, torch.Tensor) else \
                    torch.as_tensor(np.asarray(K, dtype=np.float64))
            except (TypeError, ValueError):
                raise TypeError(f"{name}[{i}] must be a KernelMatrix or an (n, n) array, got "
                                f"{type(K).__name__}") from None
            if t.dim() != 2:
                raise ValueError(f"{name}[{i}] must be 2-D, got shape {tuple(t.shape)}")
            if not t.is_floating_point():
                t = t.to(_F64)
            if not bool(torch.isfinite(t).all()):
                raise ValueError(f"{name}[{i}] has NaN or infinite entries")
            if t.shape[0] == t.shape[1]:
                check_symmetric(t, f"{name}[{i}]", "the MKL weights read K v and vᵀK alike")
            K = DenseKernelMatrix(t)
        if not K.is_square:
            raise ValueError(f"{name}[{i}] must be a square (training) Gram matrix, got "
                             f"shape {tuple(K.shape)}")
        if out and K.shape != out[0].shape:
            raise ValueError(f"{name}[{i}] has shape {tuple(K.shape)} but {name}[0] has "
                             f"{tuple(out[0].shape)}")
        out.append(K)
    return out


def _binary_labels(y, n: int, device) -> torch.Tensor:
    """y as ±1 (float64): +1 for the larger of the two classes in sorted order."""
    arr = y.detach().cpu().numpy() if isinstance(y, torch.Tensor) else np.asarray(y)
    arr = arr.reshape(-1) if arr.ndim == 2 and 1 in arr.shape else arr
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ValueError(f"y must have one label per row of the Gram matrices ({n}), got "
                         f"shape {arr.shape}")
    if arr.dtype.kind == "f" and not np.isfinite(arr).all():
        raise ValueError("y has NaN or infinite labels")
    classes, codes = np.unique(arr, return_inverse=True)
    if classes.size != 2:
        raise ValueError(f"y must have exactly 2 classes, got {classes.size}: these "
                         f"weights are defined for binary labels")
    return torch.as_tensor(np.where(codes == 1, 1.0, -1.0), dtype=_F64, device=device)


def _mv(K: KernelMatrix, v: torch.Tensor) -> torch.Tensor:
    return (K @ v.to(K.dtype)).to(_F64)


def _frobenius(grams, centered: bool, diag_only: bool = False) -> torch.Tensor:
    """M_rs = ⟨K_r, K_s⟩_F (of the centered HK_rH with ``centered``), by dense row blocks:
    O(p n²) kernel evaluations, O(p · block · n) memory, never an n × n allocation
    beyond one block. ``diag_only``: the p squared norms."""
    mats = [K.centered() if centered else K for K in grams]
    n, p = grams[0].shape[0], len(grams)
    M = torch.zeros(p, p, dtype=_F64)
    b = max(1, min(K.block_rows() for K in grams) // p)
    with torch.no_grad():
        for s in range(0, n, b):
            idx = torch.arange(s, min(n, s + b), device=grams[0].device)
            R = torch.stack([A.rows(idx).to(_F64).reshape(-1) for A in mats])
            M += torch.diag((R * R).sum(1)).cpu() if diag_only else (R @ R.T).cpu()
    return M


@torch.no_grad()
def fheuristic_weights(grams, y) -> torch.Tensor:
    r"""Weights proportional to each kernel's (uncentered) alignment with the labels.

    .. math::
        \eta_r \propto A(K_r, yy^\top) = \frac{y^\top K_r y}{n\,\lVert K_r\rVert_F},
        \qquad \sum_r \eta_r = 1

    with y ∈ {−1, +1}ⁿ (Cristianini, Shawe-Taylor, Elisseeff and Kandola 2002, "On
    kernel-target alignment", NIPS 14, for the alignment; Qiu and Lane 2009, "A framework
    for multiple kernel support vector regression and its applications to siRNA efficacy
    prediction", IEEE/ACM TCBB 6(2), for the heuristic), MKLpy's ``FHeuristic``.

    Parameters
    ----------
    grams : sequence of KernelMatrix or (n, n) arrays
        The p training Gram matrices; lazy ones stay lazy.
    y : array-like of shape (n,)
        Binary labels.

    Returns
    -------
    Tensor of shape (p,), float64, summing to 1.

    Notes
    -----
    Cost: one product K_r y and one pass of row blocks (‖K_r‖_F) per kernel, O(p n²)
    kernel evaluations in O(n · block) memory.
    """
    grams = _as_grams(grams)
    yv = _binary_labels(y, grams[0].shape[0], grams[0].device)
    a = torch.stack([_mv(K, yv) @ yv for K in grams]).cpu()
    norms = _frobenius(grams, centered=False, diag_only=True).diag().sqrt()
    # a zero Gram matrix gets the weight 0 (its alignment 0/0 made every weight NaN)
    a = torch.where(norms > 0, a / (len(yv) * norms.clamp_min(_TINY)), torch.zeros_like(a))
    if float(a.sum()) <= 0:
        raise ValueError("the kernels' alignments with y sum to a non-positive value: no "
                         "weighting by alignment exists")
    return a / a.sum()


@torch.no_grad()
def cka_weights(grams, y) -> torch.Tensor:
    r"""The combination of maximal centered alignment with the labels, unconstrained.

    .. math::
        \eta = \frac{M^{-1}a}{\lVert M^{-1}a\rVert_2},\qquad
        M_{rs} = \langle K_r^c, K_s^c\rangle_F,\quad a_r = \langle K_r^c, yy^\top\rangle_F,
        \quad K^c = HKH,\; H = I - \tfrac1n \mathbf 1\mathbf 1^\top

    (Cortes, Mohri and Rostamizadeh 2012, "Algorithms for learning kernels based on
    centered alignment", JMLR 13, Proposition 9), as MKLpy's ``CKA``: η may have negative
    entries (the combination is then not a kernel; :func:`alignf_weights` is the same
    problem restricted to η ≥ 0), and M may be ill-conditioned when kernels are nearly
    collinear (η then is as accurate as M's condition number allows).

    Parameters
    ----------
    grams : sequence of KernelMatrix or (n, n) arrays
    y : array-like of shape (n,)
        Binary labels.

    Returns
    -------
    Tensor of shape (p,), float64, of unit Euclidean norm.

    Notes
    -----
    Cost: O(p² n²) flops over dense row blocks of the centered Gram matrices, O(p · block
    · n) memory.
    """
    grams = _as_grams(grams)
    yv = _binary_labels(y, grams[0].shape[0], grams[0].device)
    yc = yv - yv.mean()
    a = torch.stack([_mv(K, yc) @ yc for K in grams]).cpu()
    M = _frobenius(grams, centered=True)
    try:
        w = torch.linalg.solve(M, a)
    except RuntimeError:
        raise ValueError("the centered Gram matrices are linearly dependent (M is "
                         "singular): drop the duplicate kernels") from None
    return w / w.norm()


@torch.no_grad()
def alignf_weights(grams, Y) -> torch.Tensor:
    r"""The nonnegative combination of maximal centered alignment with targets Y (alignf).

    η ∝ v, v = argmin_{v ≥ 0} vᵀMv − 2vᵀa with M_rs = ⟨K_r^c, K_s^c⟩_F and
    a_r = ⟨K_r^c, Y_cY_cᵀ⟩_F (Cortes, Mohri and Rostamizadeh 2012, "Algorithms for learning
    kernels based on centered alignment", JMLR 13, Proposition 10), solved as a
    nonnegative least-squares problem on the Cholesky factor of M.

    Parameters
    ----------
    grams : sequence of KernelMatrix or (n, n) arrays
    Y : array-like of shape (n,) or (n, r)
        Real targets (one column per output; for classification, one-hot labels).

    Returns
    -------
    Tensor of shape (p,), float64, on the simplex.

    Notes
    -----
    Cost: O(p² n²) flops over dense row blocks, O(p · block · n) memory.
    """
    from scipy.optimize import nnls
    grams = _as_grams(grams)
    n = grams[0].shape[0]
    Y = torch.as_tensor(Y.detach() if isinstance(Y, torch.Tensor) else np.asarray(Y, dtype=float))
    Y = Y.to(dtype=_F64, device=grams[0].device).reshape(n, -1) if Y.numel() % max(n, 1) == 0 \
        and Y.shape[0] == n else None
    if Y is None or not bool(torch.isfinite(Y).all()):
        raise ValueError(f"Y must be finite with one row per row of the Gram matrices ({n})")
    Yc = Y - Y.mean(0)
    with torch.no_grad():
        a = torch.stack([(Yc * (K @ Yc.to(K.dtype)).to(_F64)).sum() for K in grams]).cpu()
    Mn = _frobenius(grams, centered=True).numpy()
    try:  # the jitter only where M is singular: it moved the weights by 4e-7 at cond 2e4
        L = np.linalg.cholesky(Mn)
    except np.linalg.LinAlgError:
        L = np.linalg.cholesky(Mn + 1e-10 * np.trace(Mn) * np.eye(len(grams)))
    v, _ = nnls(L.T, np.linalg.solve(L, a.numpy()))
    if v.sum() <= 0:
        raise ValueError("no kernel is positively aligned with the targets")
    return torch.as_tensor(v / v.sum(), dtype=_F64)


def _project_simplices(v: torch.Tensor, groups) -> torch.Tensor:
    """Euclidean projection of v onto the product of unit simplices {x_g ≥ 0, Σ x_g = 1}
    (Held, Wolfe and Crowder 1974; Duchi et al. 2008, "Efficient projections onto the
    l1-ball", ICML, Fig. 1)."""
    out = torch.empty_like(v)
    for g in groups:
        x = v[g]
        u = torch.sort(x, descending=True).values
        css = u.cumsum(0) - 1
        k = torch.arange(1, x.numel() + 1, dtype=x.dtype, device=x.device)
        rho = int(torch.nonzero(u - css / k > 0).max())
        out[g] = (x - css[rho] / (rho + 1)).clamp(min=0)
    return out


def _fw_gap(gamma, grad, groups) -> float:
    """Frank–Wolfe gap Σ_g (γ_gᵀ∇_g − min ∇_g) ≥ f(γ) − f*, 0 at the optimum."""
    return float(sum(gamma[g] @ grad[g] - grad[g].min() for g in groups))


@torch.no_grad()
def easymkl_weights(grams, y, lam=0.1, *, tol=1e-12, max_iter=20000, return_gamma=False):
    r"""EasyMKL's kernel weights (Aiolli and Donini 2015).

    γ solves the regularized margin problem between the two classes' convex hulls in the
    feature space of the plain sum K = Σ_r K_r:

    .. math::
        \gamma = \arg\min_{\gamma \in \Gamma}\;
        (1-\lambda)\,\gamma^\top Y K Y \gamma + \lambda \lVert\gamma\rVert^2,\qquad
        \Gamma = \{\gamma \ge 0,\ \textstyle\sum_{y_i=+1}\gamma_i = 1,\
        \sum_{y_i=-1}\gamma_i = 1\}

    (Y = diag(y)), and the weights are the margins each kernel gives to that γ,

    .. math:: \eta_r = \frac{\gamma^\top Y K_r Y\gamma}{\sum_s \gamma^\top Y K_s Y\gamma}

    (F. Aiolli and M. Donini 2015, "EasyMKL: a scalable multiple kernel learning
    algorithm", Neurocomputing 169, eqs. 5-8), as MKLpy's ``EasyMKL``. The quadratic
    program is solved by accelerated projected gradient on the product of the two
    simplices (FISTA with backtracking and adaptive restarts: Beck and Teboulle 2009;
    O'Donoghue and Candès 2015) until the Frank–Wolfe gap, an upper bound of the
    suboptimality, falls under ``tol`` times the objective; then the KKT system on the
    support is solved exactly (for a support of at most 4000 points), which is kept when
    it is feasible and no worse.

    Parameters
    ----------
    grams : sequence of KernelMatrix or (n, n) arrays
        The p training Gram matrices. Lazy ones stay lazy: each iteration costs one
        product with their sum.
    y : array-like of shape (n,)
        Binary labels.
    lam : float in [0, 1]
        λ, the weight of the ‖γ‖² regularizer (MKLpy's ``lam``, default 0.1).
    tol : float
        Relative Frank–Wolfe gap at which to stop.
    max_iter : int
        Most products with K.
    return_gamma : bool
        Also return γ (shape (n,), each class summing to 1).

    Returns
    -------
    weights : Tensor of shape (p,), float64, on the simplex
    gamma : Tensor of shape (n,), only with ``return_gamma``

    Notes
    -----
    Cost: O(n²) kernel evaluations per iteration (lazy products), plus one dense #S³
    solve on the support S; memory O(n) beyond the Gram matrices' own.
    """
    grams = _as_grams(grams)
    if not is_real(lam) or not 0 <= float(lam) <= 1:
        raise ValueError(f"lam must be a real number in [0, 1], got {lam!r}")
    if not is_real(tol) or not float(tol) > 0:
        raise ValueError(f"tol must be a positive real number, got {tol!r}")
    if not is_int(max_iter) or max_iter < 1:
        raise ValueError(f"max_iter must be a positive int, got {max_iter!r}")
    lam = float(lam)
    n, dev = grams[0].shape[0], grams[0].device
    yv = _binary_labels(y, n, dev)
    if all(isinstance(K, DenseKernelMatrix) for K in grams):
        Ksum = DenseKernelMatrix(sum(K.to_dense().to(_F64) for K in grams))
    else:
        Ksum = SumKernelMatrix(grams) if len(grams) > 1 else grams[0]
    groups = [torch.nonzero(yv > 0).squeeze(1), torch.nonzero(yv < 0).squeeze(1)]

    with torch.no_grad():
        def Q(v):
            return (1 - lam) * yv * _mv(Ksum, yv * v) + lam * v

        gamma = torch.empty(n, dtype=_F64, device=dev)
        for g in groups:
            gamma[g] = 1.0 / g.numel()
        Qg = Q(gamma)
        L = 2 * ((1 - lam) * float(_mv(Ksum, torch.ones(n, dtype=_F64, device=dev)).sum()) / n
                 + lam) + 1e-300
        z_prev, Qz_prev, t = gamma, Qg, 1.0
        it, next_polish, done = 1, 20, False
        while it < max_iter:
            f = float(gamma @ Qg)
            if _fw_gap(gamma, 2 * Qg, groups) <= tol * max(f, 1e-300):
                done = True
                break
            if it >= next_polish:  # the support has settled: its KKT system may be exact
                next_polish = it + max(20, it // 4)
                new, Qn = _easymkl_polish(Ksum, yv, lam, gamma, Qg, groups, Q)
                if new is not gamma and _fw_gap(new, 2 * Qn, groups) <= tol * float(new @ Qn):
                    gamma, Qg, done = new, Qn, True
                    break
            # extrapolated point and its Q-image (Q is linear: no product needed)
            t_next = 0.5 * (1 + (1 + 4 * t * t) ** 0.5)
            beta = (t - 1) / t_next
            w = gamma + beta * (gamma - z_prev)
            Qw = Qg + beta * (Qg - Qz_prev)
            while True:
                z = _project_simplices(w - (2 / L) * Qw, groups)
                Qz = Q(z)
                it += 1
                d = z - w
                dd = float(d @ d)
                if dd == 0 or float(d @ (Qz - Qw)) <= 0.5 * L * dd * (1 + 1e-12) or it >= max_iter:
                    break
                L *= 2
            if float((2 * Qw) @ (z - gamma)) > 0:  # adaptive restart: momentum went uphill
                t_next = 1.0
            z_prev, Qz_prev, gamma, Qg, t = gamma, Qg, z, Qz, t_next
        if not done:
            gamma, Qg = _easymkl_polish(Ksum, yv, lam, gamma, Qg, groups, Q)
            gap, f = _fw_gap(gamma, 2 * Qg, groups), float(gamma @ Qg)
            if gap > tol * f:
                warnings.warn(f"easymkl_weights: max_iter={max_iter} reached with relative "
                              f"Frank-Wolfe gap {gap / f:.3g} > tol={tol:g}", ConvergenceWarning,
                              stacklevel=3)
        yg = yv * gamma
        q = torch.stack([_mv(K, yg) @ yg for K in grams]).cpu()
    w = q / q.sum()
    return (w, gamma) if return_gamma else w


def _easymkl_polish(Ksum, yv, lam, gamma, Qg, groups, Q, max_support=4000):
    """Solve the KKT system of EasyMKL's QP on the support of γ exactly; keep the result
    when it is feasible and its Frank–Wolfe gap is no larger."""
    S = torch.nonzero(gamma > 1e-12 * float(gamma.max())).squeeze(1)
    if S.numel() > max_support:
        return gamma, Qg
    yS = yv[S]
    QSS = (1 - lam) * yS[:, None] * Ksum.submatrix(S, S).to(_F64) * yS[None, :] + \
        lam * torch.eye(S.numel(), dtype=_F64, device=gamma.device)
    E = torch.stack([(yS > 0), (yS < 0)], 1).to(_F64)
    A = torch.cat([torch.cat([2 * QSS, -E], 1),
                   torch.cat([E.T, torch.zeros(2, 2, dtype=_F64, device=gamma.device)], 1)])
    rhs = torch.cat([torch.zeros(S.numel(), dtype=_F64, device=gamma.device),
                     torch.ones(2, dtype=_F64, device=gamma.device)])
    try:
        sol = torch.linalg.solve(A, rhs)
    except RuntimeError:
        return gamma, Qg
    new = torch.zeros_like(gamma)
    new[S] = sol[:S.numel()]
    if bool((new[S] < 0).any()):
        return gamma, Qg
    Qn = Q(new)
    if _fw_gap(new, 2 * Qn, groups) <= _fw_gap(gamma, 2 * Qg, groups):
        return new, Qn
    return gamma, Qg
