"""Kernel logistic regression (binary and multinomial) by Newton's method on the lazy Gram."""
from __future__ import annotations

import functools
import warnings

import numpy as np
import torch
from sklearn.base import ClassifierMixin

from .._estimator import Estimator, check_fitted, input_matrix, is_precomputed, kernel_matrix, resolve_kernel
from .._progress import ResidualBar
from .._validation import check_bool, check_positive, check_sample_weight, is_int
from ..approx.nystroem import nystrom_basis, uniform_centers
from ..gram import DenseKernelMatrix, FeatureKernelMatrix
from ..inputs import check_fitted_input, check_precomputed, n_features, take
from ..linalg import ConvergenceWarning, PivotedCholesky
from ..linalg.newton import newton_direction
from ._labels import class_weights, decode_labels, encode_labels

__all__ = ["KernelLogisticRegression"]

_F64 = torch.float64
# Width (rank × classes) of the low-rank part of the Newton preconditioner.
_PRECOND_WIDTH = 160
# Newton systems of at most this order (n·c) on a stored Gram are solved directly by
# Cholesky: cheaper than building the preconditioner and running CG at that size.
_DIRECT_MAX = 2048


class KernelLogisticRegression(ClassifierMixin, Estimator):
    r"""Kernel logistic regression, binary or multinomial, fitted by Newton–CG.

    Two classes (y_i = ±1, +1 for ``classes_[1]``): with f = Σ_j α_j k(x_j, ·) + b,

    .. math::

        \min_{f \in \mathcal H,\, b}\ C \sum_i \log\bigl(1 + e^{-y_i f(x_i)}\bigr)
        + \tfrac12 \lVert f - b \rVert_{\mathcal H}^2,

    the objective of scikit-learn's ``LogisticRegression(C)`` (its linear-kernel special
    case), with an unpenalized intercept. Mind the sign: the logistic loss is
    log(1 + e^{−y f}).
    More classes: the multinomial (softmax) loss over one function per class,
    C Σ_i −log softmax(F_i)_{y_i} + ½ Σ_c ‖f_c‖², not one-vs-rest.

    **Solver.** Newton's method, each step a weighted kernel ridge regression (the IRLS of
    Zhu and Hastie 2005). With per-sample loss Hessians H_i (p(1−p) for two classes,
    diag(p) − ppᵀ for softmax), S_i = H_i^{1/2} and gradients G_i, the step solves the
    symmetric positive definite system

    .. math::

        (I + C\, S K S)\,\beta = C\, S\,(F + C K G) - C\, S\,\mathbf 1\, b^\top,
        \qquad \alpha = -C\,G + S\beta,

    i.e. the full Newton step — the exact Hessian, softmax cross-class terms included, not
    a block-diagonal approximation — for the coefficients α and the intercept b. The
    intercept is eliminated by a Schur complement: one extra right-hand side per class
    and a c × c system from Σ_i α_i = 0 (the optimality condition of the unpenalized b).
    The system is solved by :func:`torchkern.linalg.cg` on the lazy Gram (one product
    K V with c·(c+1) columns per CG step; never an n × n matrix), preconditioned by the
    Woodbury inverse of I + C S L Lᵀ S with a pivoted-Cholesky factor K ≈ L Lᵀ computed
    once per fit. A backtracking (Armijo) line search on the exact objective keeps the
    method globally convergent; it needs no extra product with K.

    **Nyström.** With ``n_centers=m``, f is restricted to the span of k(x_j, ·) for m
    centers drawn uniformly: the problem becomes linear logistic regression on the m
    Nyström features φ(x) = K_mm^{−1/2} k_m(x) (exactly the restricted problem, since
    ‖Σ_j a_j k(c_j, ·)‖² = aᵀK_mm a), solved by the same Newton method with an exact
    preconditioner. Cost O(n m) per product instead of O(n²).

    Parameters
    ----------
    kernel : Kernel, None or "precomputed"
        The kernel (default ``RBF()``). ``"precomputed"``: ``fit`` takes the (n, n) Gram
        matrix, ``predict`` the (m, n) test-vs-train one (no Nyström then).
    C : float
        Inverse regularization strength (scikit-learn's C), > 0.
    fit_intercept : bool
        Fit the unpenalized intercept b.
    solver : {"newton"}
        Newton–CG as above (the only solver).
    n_centers : int, optional
        Number of Nyström centers; ``None`` uses all training points.
    tol : float
        Stop when the full Newton step (before any line-search shortening) changes the
        training decision values by at most ``tol · max(1, max |f|)`` (Newton converges quadratically, so the error left is far
        smaller). In float32 the floor is 1e-4: the products with K carry ~1e-7 error.
    max_iter : int
        Cap on Newton steps.
    random_state : None, int or torch.Generator
        Draw of the Nyström centers.
    verbose : bool
        tqdm bar over Newton steps.
    backend : str, optional
        Gram-matrix backend.
    class_weight : None, "balanced" or dict
        Multiplies each sample's weight by its class's, as scikit-learn's
        ``LogisticRegression``: ``"balanced"`` uses Σw / (n_classes · Σ_{i∈c} w_i) (plain
        counts without ``sample_weight``), a dict {label: weight} (missing labels weigh 1).

    Attributes
    ----------
    classes_ : numpy.ndarray
        Sorted class labels.
    dual_coef_ : torch.Tensor
        α: (n_expansion,) for two classes, (n_expansion, n_classes) for more; the
        expansion points are the training points, or the Nyström centers.
    intercept_ : torch.Tensor
        (1,) or (n_classes,) (multinomial intercepts are centered to sum to zero;
        probabilities do not depend on a common shift).
    expansion_points_ : torch.Tensor, KernelInput or None
        The x_j of f = Σ_j α_j k(x_j, ·) + b (None for a precomputed kernel).
    centers_ : torch.Tensor
        Indices of the Nyström centers (only with ``n_centers``).
    n_iter_ : int
        Newton steps taken.
    kernel_ : Kernel or str
        The fitted copy of the kernel.

    Notes
    -----
    Cost per Newton step: (number of CG steps + 2) products of K with c·(c+1) columns
    (O(n² d) each, O(n m) with Nyström), plus O(n r² c²) for the preconditioner
    (r·c ≤ 160); memory O(n (r + c²)). Newton needs ~5–15 steps.

    References
    ----------
    J. Zhu and T. Hastie, "Kernel logistic regression and the import vector machine",
    JCGS 2005 (KLR by IRLS as weighted KRR). A. Rudi et al.,
    "FALKON", NeurIPS 2017 (Nyström + preconditioned CG).

    Examples
    --------
    >>> import torch, torchkern
    >>> X = torch.tensor([[0.0, 0.0], [0.0, 1.0], [2.0, 2.0], [2.0, 3.0]])
    >>> clf = torchkern.KernelLogisticRegression(torchkern.RBF(), C=10.0).fit(X, [0, 0, 1, 1])
    >>> clf.predict(torch.tensor([[0.1, 0.5], [2.1, 2.4]]))
    tensor([0, 1])
    """

    def __init__(self, kernel=None, C=1.0, fit_intercept=True, solver="newton", n_centers=None,
                 tol=1e-6, max_iter=100, random_state=None, verbose=False, backend=None,
                 class_weight=None):
        self.kernel = kernel
        self.class_weight = class_weight
        self.C = C
        self.fit_intercept = fit_intercept
        self.solver = solver
        self.n_centers = n_centers
        self.tol = tol
        self.max_iter = max_iter
        self.random_state = random_state
        self.verbose = verbose
        self.backend = backend

    # -- fit ---------------------------------------------------------------------------
    def fit(self, X, y, sample_weight=None):
        """Fit on X — any input of the kernel (:mod:`torchkern.inputs`), or the (n, n) Gram
        when precomputed — and labels y (n,). ``sample_weight`` (n,) weights each sample's
        loss, C Σ_i w_i ℓ_i (scikit-learn's ``LogisticRegression`` convention)."""
        check_positive(self.C, "C")
        check_positive(self.tol, "tol")
        if self.solver != "newton":
            raise ValueError(f"solver must be 'newton', got {self.solver!r}")
        if not is_int(self.max_iter) or self.max_iter < 1:
            raise ValueError(f"max_iter must be a positive int, got {self.max_iter!r}")
        self.kernel_ = resolve_kernel(self.kernel)
        precomputed = is_precomputed(self.kernel_)
        X = check_precomputed(X, square=True) if precomputed else input_matrix(self.kernel_, X, "X")
        n = X.shape[0]
        classes, codes = encode_labels(y, n)
        w = None if sample_weight is None else check_sample_weight(sample_weight, n)
        if self.class_weight is not None:
            cw = torch.as_tensor(_class_weights(self.class_weight, classes, codes, w))[codes]
            w = cw if w is None else w * cw.to(w)
        with torch.no_grad():
            if self.n_centers is None:
                K = kernel_matrix(self.kernel_, X, backend=self.backend, reuse=True)
                points, to_centers, L = (None if precomputed else X), None, None
            else:
                if precomputed:
                    raise ValueError("n_centers needs a kernel, not kernel='precomputed'")
                K, points, to_centers = self._nystrom(X)
                L = K.phi_x.to(_F64)
            A, b, n_iter = _newton(K, torch.as_tensor(codes, device=K.device), classes.size,
                                   float(self.C),
                                   check_bool(self.fit_intercept, "fit_intercept"),
                                   float(self.tol),
                                   self.max_iter, self.verbose, factor=L,
                                   weights=None if w is None else w.to(K.device))
            if to_centers is not None:  # α on the n points → coefficients on the m centers
                A = to_centers @ (K.phi_x.T @ A.to(K.dtype)).to(_F64)
        self.classes_ = classes
        self.dual_coef_ = A[:, 0] if classes.size == 2 else A
        self.intercept_ = b
        self.expansion_points_ = points
        self.n_iter_ = n_iter
        d = n if precomputed else n_features(X)
        if d is not None:
            self.n_features_in_ = d
        self.shape_fit_ = tuple(X.shape)
        return self

    def _nystrom(self, X):
        """Nyström features Φ = K_nm M (M = UΛ^{−1/2} from K_mm = UΛUᵀ, tiny λ dropped:
        :func:`~torchkern.approx.nystroem.nystrom_basis`) and the map M from feature
        weights to center coefficients."""
        m = self.n_centers
        if not is_int(m) or m < 1:
            raise ValueError(f"n_centers must be None or a positive int, got {m!r}")
        n = X.shape[0]
        m = min(m, n)
        idx = uniform_centers(n, m, self.random_state, X.device)
        centers = take(X, idx)
        Knm = kernel_matrix(self.kernel_, X, centers, backend=self.backend).to_dense()
        M = nystrom_basis(Knm[idx], m * torch.finfo(X.dtype).eps).whitening
        phi = (Knm.to(_F64) @ M).to(X.dtype)
        self.centers_ = idx
        return FeatureKernelMatrix(phi), centers, M

    # -- predict -----------------------------------------------------------------------
    def decision_function(self, X):
        """f(x): (m,) for two classes (positive → ``classes_[1]``), else (m, n_classes)."""
        check_fitted(self, "dual_coef_")
        with torch.no_grad():
            if is_precomputed(self.kernel_):
                Kx = kernel_matrix("precomputed", check_precomputed(X, self.shape_fit_[0]))
            else:
                X = input_matrix(self.kernel_, X, "X")
                P = self.expansion_points_.to(dtype=X.dtype, device=X.device)
                X = check_fitted_input(self.kernel_, X, P, estimator=self)
                Kx = kernel_matrix(self.kernel_, X, P, backend=self.backend)
            coef = self.dual_coef_.to(dtype=Kx.dtype, device=Kx.device)
            return Kx @ coef + self.intercept_.to(dtype=Kx.dtype, device=Kx.device)

    def predict_proba(self, X):
        """Class probabilities, (m, n_classes): [1 − σ(f), σ(f)] or softmax(F)."""
        f = self.decision_function(X)
        if f.dim() == 1:
            p = torch.sigmoid(f)
            return torch.stack([1 - p, p], dim=1)
        return torch.softmax(f, dim=1)

    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba`, computed stably."""
        f = self.decision_function(X)
        if f.dim() == 1:
            return torch.stack([torch.nn.functional.logsigmoid(-f),
                                torch.nn.functional.logsigmoid(f)], dim=1)
        return torch.log_softmax(f, dim=1)

    def predict(self, X):
        """The most probable class."""
        f = self.decision_function(X)
        best = (f > 0).long() if f.dim() == 1 else f.argmax(1)
        return decode_labels(self.classes_, best)


# --------------------------------------------------------------------------------------
# Newton–CG
# --------------------------------------------------------------------------------------

def _loss_terms(F, codes, binary, weights=None):
    """Loss value Σ_i w_i ℓ_i, gradient G (n, c) and Hessian square roots S (n, c, c)
    (binary: (n, 1)) — each row scaled by w_i (G, H) or √w_i (S) with sample weights."""
    if binary:
        y = codes.to(_F64) * 2 - 1
        u = y * F[:, 0]
        loss = torch.nn.functional.softplus(-u)
        G = (-y * torch.sigmoid(-u))[:, None]
        S = (torch.sigmoid(u) * torch.sigmoid(-u)).sqrt()[:, None]
    else:
        logp = torch.log_softmax(F, dim=1)
        loss = -logp.gather(1, codes[:, None])[:, 0]
        P = logp.exp()
        G = P.clone()
        G[torch.arange(F.shape[0], device=F.device), codes] -= 1
        H = torch.diag_embed(P) - P[:, :, None] * P[:, None, :]
        lam, V = torch.linalg.eigh(H)
        S = (V * lam.clamp(min=0).sqrt()[:, None, :]) @ V.transpose(1, 2)
    if weights is None:
        return loss.sum(), G, S
    root = weights.sqrt().reshape(-1, *([1] * (S.dim() - 1)))
    return (weights * loss).sum(), weights[:, None] * G, root * S


def _low_rank_factor(K, c):
    """K ≈ L Lᵀ for the Newton preconditioner: a pivoted Cholesky with at most
    _PRECOND_WIDTH / c columns."""
    k = max(4, _PRECOND_WIDTH // c)
    return PivotedCholesky(K, min(k, K.shape[0]), 1.0).L


def _initial_intercept(codes, n_classes, fit_intercept, device, weights=None):
    """b at the start: the log (weighted) class frequencies (centered for softmax), or 0."""
    c = 1 if n_classes == 2 else n_classes
    if not fit_intercept:
        return torch.zeros(c, dtype=_F64, device=device)
    counts = torch.bincount(codes, weights=weights, minlength=n_classes).to(_F64)
    counts = counts.clamp_min(1e-12 * float(counts.max()))  # a class of weight 0
    if n_classes == 2:
        return torch.log(counts[1:] / counts[:1])
    return counts.log() - counts.log().mean()


def _armijo(objective, J0, slope, rounding=1e-12):
    """Backtracking line search from t = 1: the first t = 2^{-j} with
    objective(t) ≤ J0 + 10⁻⁴·t·slope + rounding·|J0| (Armijo's sufficient decrease, up to
    the relative error ``rounding`` with which the objective is evaluated). Returns
    (t, objective(t))."""
    t = 1.0
    while True:
        J_t = objective(t)
        if J_t <= J0 + 1e-4 * t * min(slope, 0.0) + rounding * abs(J0) or t < 1e-10:
            return t, J_t
        t *= 0.5


def _newton(K, codes, n_classes, C, fit_intercept, tol, max_iter, verbose, factor=None,
            weights=None):
    """Minimize C Σ loss(F_i) + ½ Σ_c α_cᵀ K α_c, F = Kα + 1bᵀ by damped Newton steps
    (:func:`torchkern.linalg.newton.newton_direction` and an Armijo line search on the
    exact objective); returns α (n, c), b, steps. ``factor``: K ≈ L Lᵀ for the
    preconditioner (default a pivoted Cholesky of K)."""
    n = K.shape[0]
    binary = n_classes == 2
    c = 1 if binary else n_classes
    if K.dtype == torch.float32:
        tol, cg_tol = max(tol, 1e-4), 1e-5
        # J's quadratic term comes from float32 products with K: near the optimum Newton's
        # decrease is below that rounding, and an exact Armijo test would backtrack to a
        # step of ~0 that then looked like convergence
        rounding = 10 * torch.finfo(torch.float32).eps
    else:
        cg_tol, rounding = 1e-12, 1e-12
    cg_tol = max(cg_tol, min(1e-2, tol))
    direct = factor is None and isinstance(K, DenseKernelMatrix) and n * c <= _DIRECT_MAX
    if direct:
        factor = None
    elif factor is None or factor.shape[1] > max(4, _PRECOND_WIDTH // c):
        factor = _low_rank_factor(K, c)

    b = _initial_intercept(codes, n_classes, fit_intercept, K.device, weights)
    loss_terms = functools.partial(_loss_terms, codes=codes, binary=binary, weights=weights)
    A = torch.zeros(n, c, dtype=_F64, device=K.device)
    KA = torch.zeros_like(A)
    F = KA + b
    reg = 0.0  # Σ_c α_cᵀ K α_c
    J = C * loss_terms(F)[0]
    bar = ResidualBar(tol, "KernelLogisticRegression (Newton)", label="step") if verbose else None
    converged, it, step = False, 0, float("inf")
    for it in range(1, max_iter + 1):
        _, G, S = loss_terms(F)
        A_new, b_new = newton_direction(K, F, G, S, C, factor, b=b,
                                        fit_intercept=fit_intercept, tol=cg_tol)
        KA_new = (K @ A_new.to(K.dtype)).to(_F64)
        dA, dKA, db = A_new - A, KA_new - KA, b_new - b
        dF = dKA + db
        # J(t) = C·loss(F + t dF) + ½⟨A + t dA, K(A + t dA)⟩ = … + ½(reg + 2t·cross + t²·quad)
        cross = float((dA * KA).sum() + (A * dKA).sum()) / 2
        quad = float((dA * dKA).sum())
        slope = C * float((G * dF).sum()) + cross  # dJ/dt at t = 0
        t, J = _armijo(lambda t: C * loss_terms(F + t * dF)[0]
                       + 0.5 * (reg + 2 * t * cross + t * t * quad), J, slope, rounding)
        A, KA, b = A + t * dA, KA + t * dKA, b + t * db
        reg = reg + 2 * t * cross + t * t * quad
        F = KA + b
        # converged when the full Newton step is small: a step the line search cut short
        # says nothing about the distance to the optimum
        step = float(dF.abs().max())
        scale = max(1.0, float(F.abs().max()))
        if bar is not None:  # the relative Newton step, toward tol
            bar.update(it, step / scale)
        if step <= tol * scale:
            converged = True
            break
    if bar is not None:
        bar.close()
    if not converged:
        warnings.warn(f"KernelLogisticRegression did not converge in {max_iter} Newton steps: "
                      f"the last Newton step would change f by {step:.3e} > tol={tol:.1e}; raise max_iter",
                      ConvergenceWarning, stacklevel=3)
    if fit_intercept and not binary:
        b = b - b.mean()
    return A, b, it


def _class_weights(class_weight, classes, codes, w):
    """scikit-learn's ``LogisticRegression`` class weights: "balanced" counts the samples
    by their weights (``compute_class_weight`` with ``sample_weight``)."""
    if isinstance(class_weight, str) and class_weight == "balanced" and w is not None:
        counts = np.bincount(codes, weights=w.cpu().numpy(), minlength=classes.size)
        # a class of zero total weight: its samples weigh 0 whatever this is
        return np.where(counts > 0, counts.sum() / (classes.size * np.maximum(counts, 1e-300)), 1.0)
    return class_weights(class_weight, classes, codes)
