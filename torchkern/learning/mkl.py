r"""Multiple kernel learning: a learnable convex combination of kernels, and SimpleMKL."""
from __future__ import annotations

import copy
import functools
import operator

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.base import BaseEstimator
from torch import nn

from .._validation import as_generator, is_int
from ..gram import DenseKernelMatrix, Formula, ScaledKernelMatrix, SumKernelMatrix, combine_formulas
from ..inputs import take
from ..kernels.base import Kernel, _fmt, inv_softplus
from .objectives import _targets

__all__ = ["MultipleKernel", "SimpleMKL"]

_F64 = torch.float64
_MODES = ("simplex", "nonneg", "fixed")


class MultipleKernel(Kernel):
    r"""k(x, y) = Σ_i η_i k_i(x, y) with learnable, constrained weights η.

    ``weights="simplex"``: η = softmax(θ), so η_i > 0 and Σ η_i = 1 under any gradient step;
    ``"nonneg"``: η = softplus(θ) > 0; ``"fixed"``: η is a buffer (zeros allowed: those
    terms are skipped), what :class:`SimpleMKL` uses for its inner solves. The combination
    is p.s.d. as a non-negative sum of p.s.d. kernels (Lanckriet et al. 2004, "Learning the
    kernel matrix with semidefinite programming", JMLR 5).

    On vectors the terms are fused into one formula (one KeOps reduction or one pass of
    row blocks, whatever the number of kernels), so the Gram matrix is lazy at any n; terms
    on structured inputs are summed as lazy Gram matrices. Combine with ``active_dims`` for
    one kernel per feature or per data source.

    Parameters
    ----------
    kernels : sequence of Kernel
    weights : {"simplex", "nonneg", "fixed"}
    init : array-like of shape (p,), optional
        Initial weights (default 1/p each); > 0 unless ``"fixed"``.

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
            torch.as_tensor(init, dtype=_F64).detach().clone().reshape(-1)
        self._check_weights(eta)
        if weights == "fixed":
            self.register_buffer("fixed_weights", eta)
        else:
            raw = eta.log() if weights == "simplex" else inv_softplus(eta)
            self.raw_weights = nn.Parameter(raw)

    def _check_weights(self, eta):
        p = len(self.kernels)
        if eta.numel() != p:
            raise ValueError(f"init must have one weight per kernel ({p}), got {eta.numel()}")
        bad = (eta < 0) if self.mode == "fixed" else (eta <= 0)
        if not bool(torch.isfinite(eta).all()) or bool(bad.any()):
            raise ValueError(f"weights must be finite and {'>=' if self.mode == 'fixed' else '>'}"
                             f" 0, got {eta.tolist()}")

    @property
    def weights(self) -> torch.Tensor:
        if self.mode == "fixed":
            return self.fixed_weights
        if self.mode == "simplex":
            return torch.softmax(self.raw_weights, 0)
        return F.softplus(self.raw_weights)

    def set_weights(self, eta) -> "MultipleKernel":
        """Set η (on the simplex for ``"simplex"``: it is renormalized)."""
        eta = torch.as_tensor(eta, dtype=_F64).detach().reshape(-1)
        self._check_weights(eta)
        with torch.no_grad():
            if self.mode == "fixed":
                self.fixed_weights.copy_(eta)
            elif self.mode == "simplex":
                self.raw_weights.copy_((eta / eta.sum()).log())
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
                                 lambda xs, ys, ps, fn=f.fn: ps[-1] * fn(xs, ys, ps[:-1])))
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

    def extra_repr(self):
        return f"weights={self.mode}: {_fmt(self.weights)}"


# --------------------------------------------------------------------------------------
# SimpleMKL
# --------------------------------------------------------------------------------------
class _Objective:
    """J(η) and ∂J/∂η_m for one inner fit (the estimator's optimal value as a function
    of the weights; gradients by Danskin's / the envelope theorem)."""

    def __init__(self, mkl, kernels, X, y):
        self.mkl, self.kernels, self.X, self.y = mkl, kernels, X, y

    def __call__(self, eta):
        kernel = MultipleKernel(self.kernels, weights="fixed", init=eta)
        est = self.mkl._inner(kernel)
        with torch.no_grad():
            est.fit(self.X, self.y)
            J, grad = getattr(self, "_" + self.mkl.estimator)(est, eta)
        return float(J), grad.to(_F64), est

    def _svc(self, est, eta):
        # Dual of the SVM: J = Σα − ½ γᵀK_ηγ (γ = yα); ∂J/∂η_m = −½ γᵀK_mγ
        # (Rakotomamonjy et al. 2008, eq. 11).
        g = est.dual_coef_.reshape(-1).to(_F64)
        sv = est.support_vectors_
        q = torch.stack([(k(sv, backend=self.mkl.backend) @ g.to(sv.dtype)).to(_F64) @ g
                         for k in self.kernels])
        return g.abs().sum() - 0.5 * (eta * q).sum(), -0.5 * q

    def _krr(self, est, eta):
        y = self.y if isinstance(self.y, torch.Tensor) else torch.as_tensor(np.asarray(self.y))
        Y = y.to(dtype=_F64, device=self.X.device).reshape(len(self.X), -1)
        B = est.dual_coef_.to(_F64).reshape(-1, Y.shape[1])
        a = float(self.mkl.alpha)
        if est.solver_ != "nystrom":
            # J = ½ yᵀ(K_η + αI)⁻¹y = max_c cᵀy − ½ cᵀ(K_η + αI)c; ∂J/∂η_m = −½ cᵀK_m c.
            q = torch.stack([(B * (k(self.X, backend=self.mkl.backend) @ B.to(self.X.dtype))
                              .to(_F64)).sum() for k in self.kernels])
            return 0.5 * (Y * B).sum(), -0.5 * q
        # Nyström: J = (‖K_nmβ − y‖² + α βᵀK_mmβ) / (2α) at the optimal β.
        Z = est.X_fit_
        U = [(k(self.X, Z, backend=self.mkl.backend) @ B.to(self.X.dtype)).to(_F64)
             for k in self.kernels]
        W = torch.stack([(B * (k(Z, backend="dense") @ B.to(Z.dtype)).to(_F64)).sum()
                         for k in self.kernels])
        R = sum(e * u for e, u in zip(eta, U)) - Y
        J = ((R * R).sum() + a * (eta * W).sum()) / (2 * a)
        return J, torch.stack([(u * R).sum() / a for u in U]) + 0.5 * W


def _reduced_gradient(eta, grad):
    """SimpleMKL's descent direction on the simplex (Rakotomamonjy et al. 2008, eq. 14)."""
    mu = int(torch.argmax(eta))
    D = -(grad - grad[mu])
    D[(eta <= 0) & (grad - grad[mu] > 0)] = 0
    D[mu] = 0
    D[mu] = -D.sum()
    return D


def _kkt_gap(eta, grad):
    """max over active weights of ∂J/∂η_m minus min over all: 0 at the optimum."""
    return float(grad[eta > 0].max() - grad.min())


class SimpleMKL(BaseEstimator):
    r"""Multiple kernel learning: the weights η of k = Σ_m η_m k_m on the simplex that
    minimize the optimal value J(η) of an SVM or of kernel ridge regression.

    ``method="simplemkl"`` (Rakotomamonjy, Bach, Canu and Grandvalet 2008, "SimpleMKL",
    JMLR 9): J(η) is the SVM dual value Σα − ½γᵀK_ηγ (γ = yα), convex and differentiable
    in η with ∂J/∂η_m = −½ γᵀK_mγ at the inner solution (Danskin's theorem); η descends
    along the reduced gradient on the simplex (the largest weight absorbs the equality
    constraint) with a backtracking line search that accepts only decreases of J, so
    ``objective_history_`` decreases monotonically. With ``estimator="krr"`` J is
    ½ yᵀ(K_η + αI)⁻¹y (the ridge dual, also convex), ∂J/∂η_m = −½ cᵀK_mc, and with the
    inner solver ``"nystrom"`` the Nyström ridge objective at its optimum. It stops when
    the KKT gap (max over active weights of ∂J/∂η minus the min over all) falls under
    ``tol``·abs(J), or after ``max_iter`` outer steps.

    ``method="alignment"`` (Cortes, Mohri and Rostamizadeh 2012, "alignf"): η ∝ v with
    v ≥ 0 minimizing vᵀMv − 2vᵀa, M_kl = ⟨K_k^c, K_l^c⟩_F, a_k = ⟨K_k^c, Y_cY_cᵀ⟩_F —
    the combination of maximal centered alignment — computed on at most ``max_samples``
    points drawn at random; then one final fit.

    Inner solves are torchkern's :class:`~torchkern.SVC` / :class:`~torchkern.KernelRidge`
    on a :class:`MultipleKernel` with fixed weights: one fused formula, lazy Gram
    matrices, so n ≫ 10⁴ works (each step costs one inner fit plus p products with the
    kernels' Gram matrices, at the support vectors for the SVM).

    Parameters
    ----------
    kernels : sequence of Kernel
    estimator : {"svc", "krr"}
        Binary SVM classification, or kernel ridge regression (1-D or 2-D targets).
    method : {"simplemkl", "alignment"}
    C : float
        SVM penalty.
    alpha : float
        Ridge penalty, (K + αI)c = y.
    solver : str
        ``KernelRidge`` solver ("auto", "cholesky", "cg", "nystrom").
    n_centers : int, optional
        Nyström centres (``solver="nystrom"``).
    max_iter : int
        Outer (reduced-gradient) steps.
    tol : float
        Relative KKT gap at which to stop.
    max_samples : int
        Sample size of the alignment method.
    backend : str, optional
        Gram-matrix backend of the gradient products.
    random_state, verbose
        Passed to the inner estimator (and the alignment subsample).

    Attributes
    ----------
    weights_ : Tensor of shape (p,)
        η on the simplex.
    kernel_ : MultipleKernel
        The learned combination (fixed weights).
    estimator_ : SVC or KernelRidge
        The final inner fit.
    objective_history_ : list of float
        J at each accepted η (``"simplemkl"``).
    n_iter_ : int
    """

    def __init__(self, kernels, estimator="svc", method="simplemkl", C=1.0, alpha=1.0,
                 solver="auto", n_centers=None, max_iter=20, tol=1e-2, max_samples=2000,
                 backend=None, random_state=None, verbose=False):
        self.kernels = kernels
        self.estimator = estimator
        self.method = method
        self.C = C
        self.alpha = alpha
        self.solver = solver
        self.n_centers = n_centers
        self.max_iter = max_iter
        self.tol = tol
        self.max_samples = max_samples
        self.backend = backend
        self.random_state = random_state
        self.verbose = verbose

    def _inner(self, kernel):
        from ..supervised import SVC, KernelRidge
        if self.estimator == "svc":
            return SVC(kernel, C=self.C)
        return KernelRidge(kernel, alpha=self.alpha, solver=self.solver,
                           n_centers=self.n_centers, random_state=self.random_state,
                           backend=self.backend)

    def _check(self, X, y):
        if self.estimator not in ("svc", "krr"):
            raise ValueError(f"estimator must be 'svc' or 'krr', got {self.estimator!r}")
        if self.method not in ("simplemkl", "alignment"):
            raise ValueError(f"method must be 'simplemkl' or 'alignment', got {self.method!r}")
        kernels = [copy.deepcopy(k) for k in self.kernels]
        if not kernels or not all(isinstance(k, Kernel) for k in kernels):
            raise TypeError("kernels must be a non-empty sequence of torchkern Kernels")
        for k in kernels:
            k.requires_grad_(False)
        X = kernels[0].check_input(X, "X")
        if self.estimator == "svc" and len(np.unique(np.asarray(
                y.cpu() if isinstance(y, torch.Tensor) else y))) != 2:
            raise ValueError("SimpleMKL(estimator='svc') needs binary labels (2 classes)")
        it = self.max_iter
        if not is_int(it) or it < 0:
            raise ValueError(f"max_iter must be a non-negative int, got {self.max_iter!r}")
        return kernels, X

    def fit(self, X, y):
        """Learn the weights, then fit the inner estimator with them; returns ``self``."""
        kernels, X = self._check(X, y)
        p = len(kernels)
        J_of = _Objective(self, kernels, X, y)
        if self.method == "alignment":
            eta = self._alignment_weights(kernels, X, y)
            J, _, est = J_of(eta)
            history, it = [J], 0
        else:
            eta, J, est, history, it = self._descend(J_of, p)
        self.weights_ = eta
        self.kernel_ = MultipleKernel(kernels, weights="fixed", init=eta)
        self.estimator_ = est
        self.objective_history_ = history
        self.n_iter_ = it
        if hasattr(est, "classes_"):
            self.classes_ = est.classes_
        return self

    def _descend(self, J_of, p):
        eta = torch.full((p,), 1.0 / p, dtype=_F64)
        J, grad, est = J_of(eta)
        history = [J]
        it = 0
        for it in range(1, self.max_iter + 1):
            if _kkt_gap(eta, grad) <= self.tol * max(abs(J), 1e-12):
                break
            D = _reduced_gradient(eta, grad)
            slope = float(grad @ D)
            if slope >= 0:
                break
            neg = D < 0
            found = self._line_search(J_of, eta, J, D, slope, float((-eta[neg] / D[neg]).min()))
            if found is None:
                break
            new, J_new, g_new, est_new = found
            eta, J, grad, est = new, J_new, g_new, est_new
            history.append(J)
            if self.verbose:
                print(f"SimpleMKL step {it}: J = {J:.6g}, weights = {_fmt(eta)}")
        return eta, J, est, history, it

    @staticmethod
    def _line_search(J_of, eta, J, D, slope, step_max):
        """A step along D on [0, step_max] that decreases J (None if none is found):
        the full step (a weight reaches zero) when J still decreases there, else the
        minimizer of the quadratic through J(0), J'(0), J(step_max), then halving."""

        def at(step):
            new = (eta + step * D).clamp(min=0)
            new[new < 1e-10 * float(new.max())] = 0
            return (new / new.sum(), *J_of(new / new.sum()))

        step = step_max
        cand = at(step)
        if cand[1] <= J + 1e-4 * step * slope and float(cand[2] @ D) <= 0:
            return cand
        curv = cand[1] - J - slope * step
        if curv > 0:
            step = min(max(-slope * step * step / (2 * curv), 0.01 * step_max), step_max)
            if step < step_max:
                cand = at(step)
        for _ in range(12):
            if cand[1] <= J + 1e-4 * step * slope:
                return cand
            step /= 2
            cand = at(step)
        return None

    def _alignment_weights(self, kernels, X, y):
        n = X.shape[0]
        gen = as_generator(self.random_state)
        idx = torch.randperm(n, generator=gen)[:self.max_samples].to(X.device) \
            if n > self.max_samples else torch.arange(n, device=X.device)
        Xs = take(X, idx)
        ys = torch.as_tensor(np.asarray(y.cpu() if isinstance(y, torch.Tensor) else y))[idx.cpu()]
        Y = _targets(ys, idx.numel(), _F64, X.device) if self.estimator == "svc" else \
            ys.to(dtype=_F64, device=X.device).reshape(idx.numel(), -1)
        Y = Y - Y.mean(0)
        with torch.no_grad():
            Kc = []
            for k in kernels:
                K = k(Xs, backend="dense").to_dense().to(_F64)
                K = K - K.mean(0) - K.mean(1, keepdim=True) + K.mean()
                Kc.append(K.reshape(-1))
            Kc = torch.stack(Kc)
            M = Kc @ Kc.T
            a = torch.stack([(Y.T @ K.reshape(len(idx), -1) @ Y).trace() for K in Kc])
        from scipy.optimize import nnls
        Mn = M.cpu().numpy()
        L = np.linalg.cholesky(Mn + 1e-10 * np.trace(Mn) * np.eye(len(kernels)))
        v, _ = nnls(L.T, np.linalg.solve(L, a.cpu().numpy()))
        if v.sum() <= 0:
            raise ValueError("no kernel is positively aligned with the targets")
        return torch.as_tensor(v / v.sum(), dtype=_F64)

    # -- prediction --------------------------------------------------------------------
    def _fitted(self):
        if not hasattr(self, "estimator_"):
            from sklearn.exceptions import NotFittedError
            raise NotFittedError("This SimpleMKL instance is not fitted yet. Call 'fit' first.")
        return self.estimator_

    def predict(self, X):
        """Labels (``"svc"``) or values (``"krr"``) of the inner estimator."""
        return self._fitted().predict(X)

    def decision_function(self, X):
        """f(x) = Σ_i γ_i k_η(x_i, x) + b (``"svc"``), or the ridge prediction."""
        est = self._fitted()
        return est.decision_function(X) if hasattr(est, "decision_function") else est.predict(X)

    def score(self, X, y):
        """Accuracy (``"svc"``) or R² (``"krr"``)."""
        return self._fitted().score(X, y)
