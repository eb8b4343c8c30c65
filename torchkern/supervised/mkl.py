r"""Multiple kernel learning estimators: SimpleMKL, EasyMKL and the heuristic combiners.

They wrap torchkern's :class:`~torchkern.SVC` or :class:`~torchkern.KernelRidge` around a
:class:`~torchkern.learning.MultipleKernel`, so they sit above the estimators; the
weights learned from Gram matrices alone (:func:`~torchkern.learning.easymkl_weights`,
:func:`~torchkern.learning.fheuristic_weights`, :func:`~torchkern.learning.cka_weights`,
:func:`~torchkern.learning.alignf_weights`) live below, in ``torchkern.learning.mkl``.
"""
from __future__ import annotations

import copy
import warnings

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin

from .._estimator import check_fitted
from .._validation import as_generator, is_int
from ..inputs import check_input, take
from ..kernels.base import Kernel, _fmt
from ..linalg import ConvergenceWarning
from ..learning.mkl import (MultipleKernel, alignf_weights, cka_weights, easymkl_weights,
                            fheuristic_weights)
from ._labels import decode_labels, encode_labels
from .ridge import KernelRidge
from .svm import SVC

__all__ = ["SimpleMKL", "EasyMKL", "AverageMKL", "FHeuristic", "CKA"]

_F64 = torch.float64


def _kernel_list(kernels, name="kernels"):
    """Deep copies of the base kernels (a sequence of Kernel, or a MultipleKernel's terms),
    frozen: the estimators learn weights, not the kernels' hyperparameters."""
    if isinstance(kernels, MultipleKernel):
        kernels = list(kernels.kernels)
    elif isinstance(kernels, Kernel):
        raise TypeError(f"{name} must be a sequence of torchkern Kernels or a MultipleKernel, "
                        f"got a single {type(kernels).__name__}")
    try:
        kernels = [copy.deepcopy(k) for k in kernels]
    except TypeError:
        raise TypeError(f"{name} must be a non-empty sequence of torchkern Kernels") from None
    if not kernels or not all(isinstance(k, Kernel) for k in kernels):
        raise TypeError(f"{name} must be a non-empty sequence of torchkern Kernels")
    for k in kernels:
        k.requires_grad_(False)
    return kernels


def _checked_inputs(est, X):
    """The checks every MKL estimator's ``fit`` starts with (estimator, max_samples,
    sharded data); returns the frozen base kernels and the checked X."""
    if est.estimator not in ("svc", "krr"):
        raise ValueError(f"estimator must be 'svc' or 'krr', got {est.estimator!r}")
    ms = est.max_samples
    if ms is not None and (not is_int(ms) or ms < 2):
        raise ValueError(f"max_samples must be None or an int >= 2, got {ms!r}")
    _refuse_sharded(est, X)
    kernels = _kernel_list(est.kernels)
    # an estimator's input: a 1-D X is scikit-learn's "Reshape your data" error
    return kernels, check_input(kernels[0], X, "X")


def _refuse_sharded(est, X):
    """Row-sharded data (a :class:`~torchkern.distributed.ShardedInput`, recognized by its
    ``align_rows``) has no form here: refuse it by name rather than fail inside."""
    if callable(getattr(X, "align_rows", None)):
        raise ValueError(f"{type(est).__name__} has no form for row-sharded data (a "
                         f"ShardedInput): fit it on one process; easymkl_weights, "
                         f"fheuristic_weights, cka_weights and alignf_weights take the "
                         f"sharded Gram matrices with all n labels on every rank")


def _one_hot(y, n):
    classes, codes = encode_labels(y, n)
    return torch.nn.functional.one_hot(torch.as_tensor(codes), classes.size).to(_F64)


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
        # Dual of each one-vs-one SVM: J_p = Σ|γ_p| − ½ γ_pᵀK_ηγ_p (γ_p = y α_p);
        # ∂J_p/∂η_m = −½ γ_pᵀK_mγ_p (Rakotomamonjy et al. 2008, eq. 11). More than two
        # classes: J = Σ_p J_p over the pairs, one η shared (their §4.2).
        G = est._pair_coef.to(_F64)  # (n_SV, n_pairs), zero where a pair does not use a SV
        sv = est.support_vectors_
        q = torch.stack([(G * (k(sv, backend=self.mkl.backend) @ G.to(sv.dtype)).to(_F64)).sum()
                         for k in self.kernels])
        return G.abs().sum() - 0.5 * (eta * q).sum(), -0.5 * q

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
    ``objective_history_`` decreases monotonically. With more than two classes the SVM is
    LIBSVM's one-vs-one (:class:`~torchkern.SVC`) and one weighting η is shared by all
    pairs: J(η) = Σ_pairs J_p(η), the sum of the pairwise dual values, and its gradient the
    sum of theirs — the multiclass SimpleMKL of Rakotomamonjy et al. (2008, §4.2), which
    keeps one combined kernel (and one set of support vectors) for the whole classifier,
    rather than one weighting per pair. With ``estimator="krr"`` J is
    ½ yᵀ(K_η + αI)⁻¹y (the ridge dual, also convex), ∂J/∂η_m = −½ cᵀK_mc, and with the
    inner solver ``"nystrom"`` the Nyström ridge objective at its optimum. It stops when
    the KKT gap (max over active weights of ∂J/∂η minus the min over all) falls under
    ``tol``·abs(J), or after ``max_iter`` outer steps (or when no step decreases J), with
    a :class:`~torchkern.linalg.ConvergenceWarning` in those two cases.

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
    kernels : sequence of Kernel, or MultipleKernel
        The base kernels (a MultipleKernel's terms; its own weights are not used).
    estimator : {"svc", "krr"}
        SVM classification (two or more classes, one-vs-one), or kernel ridge regression
        (1-D or 2-D targets).
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
    max_samples : int or None
        Sample size of the alignment method (None: every training point; the alignment
        then holds dense Gram matrices of that size).
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
    classes_ : numpy.ndarray
        The labels (``"svc"``).

    Examples
    --------
    >>> import numpy as np, torch, torchkern
    >>> g = torch.Generator().manual_seed(0)
    >>> X = torch.rand(60, 2, dtype=torch.float64, generator=g) * 4
    >>> y = np.digitize(X[:, 0].numpy(), [4 / 3, 8 / 3])  # three classes, from feature 0
    >>> ks = [torchkern.RBF(0.7, active_dims=[0]), torchkern.RBF(0.7, active_dims=[1])]
    >>> m = torchkern.SimpleMKL(ks, estimator="svc", C=10.0).fit(X, y)
    >>> bool(m.weights_[0] > m.weights_[1])  # one η for the three one-vs-one pairs
    True
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
        if self.estimator == "svc":
            return SVC(kernel, C=self.C)
        return KernelRidge(kernel, alpha=self.alpha, solver=self.solver,
                           n_centers=self.n_centers, random_state=self.random_state,
                           backend=self.backend)

    def _check(self, X, y):
        if self.method not in ("simplemkl", "alignment"):
            raise ValueError(f"method must be 'simplemkl' or 'alignment', got {self.method!r}")
        kernels, X = _checked_inputs(self, X)
        if self.estimator == "svc":
            classes, _ = encode_labels(y, len(X))
            if classes.size < 2:
                raise ValueError(f"SimpleMKL(estimator='svc') needs at least 2 classes in y, "
                                 f"got {classes.size}")
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
        it, stalled = 0, False
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
                stalled = True
                break
            new, J_new, g_new, est_new = found
            eta, J, grad, est = new, J_new, g_new, est_new
            history.append(J)
            if self.verbose:
                print(f"SimpleMKL step {it}: J = {J:.6g}, weights = {_fmt(eta)}")
        gap = _kkt_gap(eta, grad)
        if self.max_iter > 0 and gap > self.tol * max(abs(J), 1e-12) and \
                float(grad @ _reduced_gradient(eta, grad)) < 0:
            why = "no step along the reduced gradient decreased J" if stalled else \
                f"max_iter={self.max_iter} reached"
            warnings.warn(f"SimpleMKL did not converge: {why} with relative KKT gap "
                          f"{gap / max(abs(J), 1e-12):.3g} > tol={self.tol:g} (weights "
                          f"{_fmt(eta)}); raise max_iter or tol", ConvergenceWarning,
                          stacklevel=3)
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
            if self.max_samples is not None and n > self.max_samples \
            else torch.arange(n, device=X.device)
        Xs = take(X, idx)
        ys = torch.as_tensor(np.asarray(y.cpu() if isinstance(y, torch.Tensor) else y))[idx.cpu()]
        Y = _one_hot(ys, idx.numel()) if self.estimator == "svc" else \
            ys.to(dtype=_F64).reshape(idx.numel(), -1)
        with torch.no_grad():
            return alignf_weights([k(Xs, backend="dense") for k in kernels], Y)

    # -- prediction --------------------------------------------------------------------
    def _fitted(self):
        check_fitted(self, "estimator_")
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


# --------------------------------------------------------------------------------------
# One-step combiners: weights from the Gram matrices and labels, then one fit
# --------------------------------------------------------------------------------------
class _Combiner(ClassifierMixin, BaseEstimator):
    """Weights η from the training Gram matrices and the labels, then an SVC (or a ridge
    classifier) on k_η = Σ_r η_r k_r."""

    def __init__(self, kernels, estimator="svc", C=1.0, alpha=1.0, solver="auto",
                 n_centers=None, max_samples=None, backend=None, random_state=None):
        self.kernels = kernels
        self.estimator = estimator
        self.C = C
        self.alpha = alpha
        self.solver = solver
        self.n_centers = n_centers
        self.max_samples = max_samples
        self.backend = backend
        self.random_state = random_state

    def _weights(self, grams, y):
        """The weights of the base kernels from their Gram matrices on the (sampled)
        training points and the ±1 labels; each combiner writes it."""
        raise NotImplementedError

    def fit(self, X, y):
        """Learn the weights on (a sample of) the training data, then fit the estimator on
        all of it with the combined kernel; returns ``self``."""
        kernels, X = _checked_inputs(self, X)
        n = len(X)
        classes, codes = encode_labels(y, n)
        if classes.size < 2:
            raise ValueError(f"y must have at least 2 classes, got {classes.size}")
        ms = self.max_samples
        if ms is not None and n > ms:
            idx = torch.randperm(n, generator=as_generator(self.random_state))[:ms]
        else:
            idx = torch.arange(n)
        Xs = take(X, idx.to(X.device)) if idx.numel() < n else X
        with torch.no_grad():
            grams = [k(Xs, backend=self.backend) for k in kernels]
            eta = self._weights(grams, codes[idx.numpy()], classes.size)
        if bool((eta < 0).any()):
            raise ValueError(f"{type(self).__name__} gave negative weights {_fmt(eta)}: the "
                             f"combination is not a kernel (use SimpleMKL(method='alignment'), "
                             f"the same alignment under η >= 0)")
        self.weights_ = eta
        self.kernel_ = MultipleKernel(kernels, weights="fixed", init=eta)
        if self.estimator == "svc":
            est = SVC(self.kernel_, C=self.C).fit(X, y)
        else:
            T = torch.as_tensor(np.where(codes == 1, 1.0, -1.0)) if classes.size == 2 else \
                2 * _one_hot(codes, n) - 1
            est = KernelRidge(self.kernel_, alpha=self.alpha, solver=self.solver,
                              n_centers=self.n_centers, random_state=self.random_state,
                              backend=self.backend).fit(X, T.to(X.dtype if torch.is_tensor(X)
                                                               and X.is_floating_point()
                                                               else _F64))
        self.estimator_ = est
        self.classes_ = classes
        self._numpy_labels = not isinstance(y, torch.Tensor)
        return self

    def decision_function(self, X):
        """The SVC's decision values, or the ridge's outputs (positive → ``classes_[1]``
        for two classes; one column per class otherwise)."""
        check_fitted(self, "estimator_")
        est = self.estimator_
        return est.decision_function(X) if self.estimator == "svc" else est.predict(X)

    def predict(self, X):
        """Class labels: the SVC's, or the sign (argmax) of the ridge's outputs."""
        check_fitted(self, "estimator_")
        if self.estimator == "svc":
            return self.estimator_.predict(X)
        # the ridge returns NumPy for NumPy X; labels follow the type of the fitted y, as
        # the SVC's do
        f = torch.as_tensor(self.estimator_.predict(X))
        codes = (f > 0).long() if f.dim() == 1 else f.argmax(1)
        labels = decode_labels(self.classes_, codes)
        if self._numpy_labels and isinstance(labels, torch.Tensor):
            return labels.cpu().numpy()
        return labels

    def score(self, X, y):
        """Accuracy."""
        pred = self.predict(X)
        pred = pred.cpu().numpy() if isinstance(pred, torch.Tensor) else np.asarray(pred)
        y = y.cpu().numpy() if isinstance(y, torch.Tensor) else np.asarray(y)
        return float(np.mean(pred == y.reshape(-1)))


_COMMON = """
    Parameters
    ----------
    kernels : sequence of Kernel, or MultipleKernel
        The base kernels (a MultipleKernel's terms; its own weights are not used).{extra}
    estimator : {{"svc", "krr"}}
        The classifier on the combined kernel: :class:`~torchkern.SVC` (penalty ``C``), or
        :class:`~torchkern.KernelRidge` on ±1 targets (one column per class beyond two;
        penalty ``alpha``, ``solver``, ``n_centers``) predicting by sign (argmax).
    C, alpha, solver, n_centers
        Passed to the SVC or the ridge.
    max_samples : int, optional
        Learn the weights on this many training points drawn at random (the lazy Gram
        matrices of all n otherwise); the final fit uses all of them.
    backend : str, optional
        Gram-matrix backend.
    random_state : int or torch.Generator, optional

    Attributes
    ----------
    weights_ : Tensor of shape (p,)
    kernel_ : MultipleKernel
        The combination, with fixed weights.
    estimator_ : SVC or KernelRidge
    classes_ : numpy.ndarray
    """


class AverageMKL(_Combiner):
    __doc__ = r"""The average of the base kernels: η_r = 1/p (MKLpy's ``AverageMKL``), then an
    SVC or a ridge classifier on it — the baseline every MKL method is compared to (Gönen
    and Alpaydın 2011, "Multiple kernel learning algorithms", JMLR 12).
    """ + _COMMON.format(extra="")

    def _weights(self, grams, codes, n_classes):
        return torch.full((len(grams),), 1.0 / len(grams), dtype=_F64)


def _binary_only(est, n_classes):
    if n_classes != 2:
        raise ValueError(f"{type(est).__name__} learns its weights from binary labels; y has "
                         f"{n_classes} classes (SimpleMKL(estimator='svc') shares one "
                         f"weighting across classes)")


class EasyMKL(_Combiner):
    __doc__ = r"""EasyMKL (Aiolli and Donini 2015, "EasyMKL: a scalable multiple kernel
    learning algorithm", Neurocomputing 169): the weights of
    :func:`~torchkern.learning.easymkl_weights` (the kernels' margins at the solution of
    the λ-regularized margin problem on their sum), then an SVC or a ridge classifier on
    the combination. Binary labels. Equal to MKLpy 0.6's ``EasyMKL(lam).solution.weights``.
    """ + _COMMON.format(extra="""
    lam : float in [0, 1]
        EasyMKL's λ.
    tol, max_iter
        Of the quadratic program (:func:`~torchkern.learning.easymkl_weights`).""")

    def __init__(self, kernels, lam=0.1, estimator="svc", C=1.0, alpha=1.0, solver="auto",
                 n_centers=None, max_samples=None, tol=1e-12, max_iter=20000, backend=None,
                 random_state=None):
        super().__init__(kernels, estimator=estimator, C=C, alpha=alpha, solver=solver,
                         n_centers=n_centers, max_samples=max_samples, backend=backend,
                         random_state=random_state)
        self.lam = lam
        self.tol = tol
        self.max_iter = max_iter

    def _weights(self, grams, codes, n_classes):
        _binary_only(self, n_classes)
        return easymkl_weights(grams, codes, lam=self.lam, tol=self.tol, max_iter=self.max_iter)


class FHeuristic(_Combiner):
    __doc__ = r"""Weights proportional to each kernel's alignment with the labels
    (:func:`~torchkern.learning.fheuristic_weights`; Qiu and Lane 2009, IEEE/ACM TCBB
    6(2)), then an SVC or a ridge classifier. Binary labels. MKLpy's ``FHeuristic``.
    """ + _COMMON.format(extra="")

    def _weights(self, grams, codes, n_classes):
        _binary_only(self, n_classes)
        return fheuristic_weights(grams, codes)


class CKA(_Combiner):
    __doc__ = r"""The combination of maximal centered alignment, unconstrained
    (:func:`~torchkern.learning.cka_weights`; Cortes, Mohri and Rostamizadeh 2012, JMLR 13),
    then an SVC or a ridge classifier; a fit whose weights come out negative raises (the
    combination would not be a kernel: ``SimpleMKL(method="alignment")`` solves the same
    problem under η ≥ 0). Binary labels. MKLpy's ``CKA``.
    """ + _COMMON.format(extra="")

    def _weights(self, grams, codes, n_classes):
        _binary_only(self, n_classes)
        return cka_weights(grams, codes)
