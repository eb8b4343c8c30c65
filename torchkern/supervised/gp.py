r"""Exact Gaussian-process regression: dense Cholesky or matrix-free CG + SLQ."""
from __future__ import annotations

import math
import warnings

import torch
import torch.nn.functional as F
from sklearn.base import RegressorMixin

from .._estimator import Estimator, check_fitted, resolve_kernel
from .._validation import (as_generator as _generator, as_vector, check_bool, check_positive,
                           check_sample_weight, is_int, is_real, real_tensor)
from ..inputs import check_fitted_input, check_input
from .._progress import progress_bar
from ..linalg import ConvergenceWarning, PivotedCholesky, cg, logdet
from .._optimize import BOUNDS as _BOUNDS, FTOL as _FTOL, GTOL as _GTOL
from .._optimize import Noise as _Noise, best_of_runs, bound_report, lbfgsb
from .._optimize import coordinates as _coordinates, log_bounds as _log_bounds
from .._optimize import torch_optim
from ..learning.likelihood import lml_cg, lml_cholesky, threads_for  # noqa: F401 (lml_*: re-exported)
from ..learning.objectives import log_prior
from ._common import r2_score

__all__ = ["GaussianProcessRegressor"]

_F64 = torch.float64
_METHODS = ("auto", "cholesky", "cg")
_MEANS = ("zero", "constant")
_OPTIMIZERS = ("lbfgs", "adam")
# L-BFGS-B on −log p(y) in log-hyperparameters, as scikit-learn: it stops when an
# iteration lowers the objective by less than _FTOL relatively or when no entry of the
# projected gradient exceeds _GTOL (SciPy's defaults, which scikit-learn's GP uses); the
# default bounds _BOUNDS of every positive hyperparameter and of the noise are
# scikit-learn's kernels'. The optimizer is torchkern._optimize's (one implementation).
# method="auto": dense Cholesky up to this many training points, CG + SLQ beyond.
_AUTO_CHOLESKY_MAX_N = 5_000
# Fits on the CPU (either method) up to this many points run on one torch thread: their
# operations (n² ≤ 10⁶ entries, a few ms each) gain little from a second thread on an idle machine,
# and on a busy one every parallel region waits for a descheduled thread (n = 500 on the
# 2-core machine at load 10: 2.4 s on 1 thread, 19 s on 2). Larger fits keep the thread
# setting (a load-average rule was tried and dropped; docs/performance.md on threads).
# The threshold, _optimize.SINGLE_THREAD_MAX_N (1,000), is learn_kernel's too
# (torchkern.learning.likelihood.threads_for).
_PREDICT_CHUNK = 512


def _default_rank(n: int) -> int:
    """Pivoted-Cholesky preconditioner rank for CG: 500, lowered for large n so that the
    float64 factor (n × rank) stays near 200 MB, never below 100 (or above n). A rank
    that leaves the spectrum of K above α uncovered costs many CG iterations when α is small
    (on 5,000 points with α = 10⁻², rank 100 needed ~40× the time of rank 500)."""
    return min(n, 500, max(100, int(2.5e7 // n)))


class GaussianProcessRegressor(RegressorMixin, Estimator):
    r"""Gaussian-process regression with a torchkern kernel, exact or matrix-free.

    Prior f ~ GP(m, k) with m = 0 (``mean="zero"``) or a constant m = μ
    (``mean="constant"``), observations y_i = f(x_i) + ε_i with ε_i ~ N(0, σ²). With
    A = K + σ²I the posterior at test points x is (Rasmussen and Williams 2006, "Gaussian
    Processes for Machine Learning", §2.2, eqs. 2.23–2.24; §2.7 for the mean function)

    .. math::
        \bar m(x) = m(x) + k_{xD} A^{-1}(y - m_D), \qquad
        \bar k(x, x') = k(x, x') - k_{xD} A^{-1} k_{Dx'},

    and the log marginal likelihood of the training data is

    .. math::
        \log p(y) = -\tfrac12 (y - m_D)^\top A^{-1}(y - m_D) - \tfrac12\log\det A
                    - \tfrac n2 \log 2\pi

    (ibid., eq. 2.30). The posterior mean with m = 0 is kernel ridge regression with α = σ² (ibid.,
    §6.2; σ² = nλ for a loss (1/n)Σ(f(x_i) − y_i)² + λ‖f‖²). With ``mean="constant"`` the
    constant is its maximum-likelihood value μ = 1ᵀA⁻¹y / 1ᵀA⁻¹1 (generalized least
    squares), recomputed for the current hyperparameters. ``noise`` is scikit-learn's
    ``alpha``: with the same kernel, mean, std and log marginal likelihood equal
    :class:`sklearn.gaussian_process.GaussianProcessRegressor` with ``optimizer=None``.

    Parameters
    ----------
    kernel : Kernel or None
        Prior covariance (``None`` is ``RBF()``). Use ``c * RBF()`` for a learnable signal
        variance.
    noise : float or array of shape (n_samples,)
        σ² ≥ 0, added to the diagonal of the training Gram matrix (> 0 for ``"cg"`` and
        for hyperparameter learning). An array gives each training sample its own noise
        variance σ²_i (heteroscedastic noise, scikit-learn's ``alpha`` array): A = K +
        diag(σ²), a lazy diagonal with ``"cg"`` (preconditioned by L Lᵀ + diag(σ²)). It
        is fixed, as scikit-learn's: ``fit(optimize=True)`` then learns the kernel's
        hyperparameters only (``noise_prior`` is refused), and kernel learning
        (``learn_kernel``) takes only the objective "alignment" ("lml" / "map" learn one
        σ², "loo" / "gcv" / "holdout" need one ridge).
    mean : {"zero", "constant"}
        Prior mean.
    normalize_y : bool
        Standardize each target (mean 0, variance 1) before fitting, as scikit-learn does;
        predictions are mapped back. The log marginal likelihood is that of the
        standardized targets (as in scikit-learn).
    method : {"auto", "cholesky", "cg"}
        ``"cholesky"``: a float64 Cholesky factor of A, O(n³) time, O(n²) memory.
        ``"cg"``: A⁻¹ by :func:`torchkern.linalg.cg` preconditioned by a pivoted Cholesky
        factor M (rank as in :class:`KernelRidge`'s ``"cg"``), log det A = log det M + log det(M^{-1/2}AM^{-1/2}) with the second
        term by stochastic Lanczos quadrature (:func:`torchkern.linalg.logdet`), all on
        the lazy Gram matrix: O(n²)
        kernel evaluations per product, O(n) memory; the log marginal likelihood is then
        a stochastic estimate. ``"auto"``: cholesky for n ≤ 5,000, else cg.
    tol : float
        Relative residual of the CG solves (``"cg"``).
    max_iter : int, optional
        CG iteration cap (``"cg"``).
    num_probes : int
        Rademacher probes of the SLQ log-determinant (``"cg"``).
    random_state : None, int or torch.Generator
        SLQ probes, the starts of ``n_restarts_optimizer`` and, by default,
        :meth:`sample_y`.
    optimizer : {"lbfgs", "adam"} or None
        How ``fit(..., optimize=True)`` maximizes log p(y): ``"lbfgs"`` (default) runs
        SciPy's L-BFGS-B in log-hyperparameters within ``hyperparameter_bounds`` to
        convergence, as scikit-learn does; ``"adam"`` takes a fixed number of Adam steps
        (for noisy stochastic objectives), projected on the same bounds. ``None``
        (scikit-learn's value for a fixed kernel) keeps the kernel and noise as given;
        ``fit`` keeps them anyway unless called with ``optimize=True``.
    verbose : bool
        tqdm bar over the hyperparameter-learning iterations (kept on screen).
    backend : str, optional
        Gram-matrix backend of the lazy products (``"cg"``) and of predictions.
    n_restarts_optimizer : int
        scikit-learn's parameter: after the run from the kernel's and ``noise``'s values,
        this many more runs of ``fit(..., optimize=True)`` from starts whose positive
        hyperparameters (and noise) are drawn log-uniformly within
        ``hyperparameter_bounds`` (other learnable parameters, e.g. a deep kernel's
        weights, keep their values); the run of largest log p(y) is kept.
    hyperparameter_bounds : (float, float) or None
        (low, high) of every positive hyperparameter of the kernel (variances,
        lengthscales, ...) and of the noise while they are learned: (1e-5, 1e5), the
        default bounds of scikit-learn's kernels. A start outside is clipped into them;
        an optimum on a bound is reported by a
        :class:`~torchkern.linalg.ConvergenceWarning`. ``None``: unbounded (then
        ``n_restarts_optimizer`` must be 0).
    noise_prior : torch.distributions.Distribution, optional
        A prior on the noise variance σ² (GPyTorch's ``GaussianLikelihood(noise_prior=)``),
        e.g. ``Gamma(1.1, 0.05)``. With it, or with priors on the kernel's
        hyperparameters (``RBF(lengthscale_prior=Gamma(3.0, 6.0))``,
        :meth:`~torchkern.kernels.Kernel.set_prior`), ``fit(optimize=True)`` maximizes
        the log posterior log p(y) + log p(θ) (MAP;
        :func:`torchkern.learning.log_posterior`) instead of log p(y).

    Attributes
    ----------
    kernel_ : Kernel
        The fitted kernel (hyperparameters learned if ``fit(..., optimize=True)``).
    noise_ : float or Tensor of shape (n,)
        The fitted σ² (the per-sample variances, float64, for an array ``noise``).
    X_train_ : Tensor of shape (n, d)
    y_train_ : Tensor of shape (n,) or (n, r)
        Targets after normalization.
    alpha_ : Tensor of shape (n,) or (n, r)
        A⁻¹(y − m_D).
    mean_ : Tensor of shape () or (r,)
        The prior constant μ (zeros for ``mean="zero"``), normalized units.
    L_ : Tensor of shape (n, n) or None
        Lower Cholesky factor of A (float64), ``"cholesky"`` only.
    log_marginal_likelihood_value_ : Tensor
        log p(y) at the fitted hyperparameters (summed over targets).
    loss_history_ : list of float
        −log p(y)/n (−(log p(y) + log p(θ))/n with priors) at the start and after each
        hyperparameter-learning iteration of the run kept (empty without).
    n_iter_ : int
        Hyperparameter-learning iterations of the run kept (1 without: the one direct
        solve).

    Examples
    --------
    >>> import torch, torchkern
    >>> X = torch.linspace(0, 5, 40, dtype=torch.float64)[:, None]; y = X[:, 0].sin()
    >>> gp = torchkern.GaussianProcessRegressor(torchkern.RBF(1.0), noise=1e-2).fit(X, y)
    >>> mean, std = gp.predict(X[:3], return_std=True)
    >>> mean.shape, std.shape
    (torch.Size([3]), torch.Size([3]))
    """

    _noise_variance_param = "noise"  # learn_kernel's "lml" / "map" objectives learn it

    def __init__(self, kernel=None, noise=1e-2, mean="zero", normalize_y=False, method="auto",
                 tol=1e-6, max_iter=None, num_probes=30, random_state=None, optimizer="lbfgs",
                 verbose=False, backend=None, n_restarts_optimizer=0,
                 hyperparameter_bounds=_BOUNDS, noise_prior=None):
        self.kernel = kernel
        self.noise = noise
        self.mean = mean
        self.normalize_y = normalize_y
        self.method = method
        self.tol = tol
        self.max_iter = max_iter
        self.num_probes = num_probes
        self.random_state = random_state
        self.optimizer = optimizer
        self.verbose = verbose
        self.backend = backend
        self.n_restarts_optimizer = n_restarts_optimizer
        self.hyperparameter_bounds = hyperparameter_bounds
        self.noise_prior = noise_prior

    # ---------------------------------------------------------------------------------
    def _check_params(self, n: int) -> str:
        if self.method not in _METHODS:
            raise ValueError(f"method must be one of {_METHODS}, got {self.method!r}")
        if self.mean not in _MEANS:
            raise ValueError(f"mean must be one of {_MEANS}, got {self.mean!r}")
        if self.optimizer is not None and self.optimizer not in _OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {_OPTIMIZERS} or None, "
                             f"got {self.optimizer!r}")
        method = self.method
        if method == "auto":
            method = "cholesky" if n <= _AUTO_CHOLESKY_MAX_N else "cg"
        noise = self._noise(n)
        if method == "cg" and not bool((torch.as_tensor(noise) > 0).all()):
            raise ValueError("noise must be > 0 with method='cg'")
        if not (is_real(self.tol) and 0 < self.tol < math.inf):
            raise ValueError(f"tol must be a finite positive float, got {self.tol!r}")
        check_bool(self.normalize_y, "normalize_y")
        if self.noise_prior is not None and not callable(getattr(self.noise_prior, "log_prob",
                                                                  None)):
            raise TypeError(f"noise_prior must be a torch.distributions.Distribution (or have "
                            f"a log_prob method), got {type(self.noise_prior).__name__}")
        if not is_int(self.n_restarts_optimizer) or self.n_restarts_optimizer < 0:
            raise ValueError(f"n_restarts_optimizer must be a non-negative int, "
                             f"got {self.n_restarts_optimizer!r}")
        self._log_bounds()
        return method, noise

    def _noise(self, n: int):
        """σ² as a float, or as a float64 tensor (n,) for a per-sample ``noise`` (a length
        one array is the scalar, as scikit-learn's ``alpha``)."""
        t = real_tensor(self.noise, "noise").detach()  # fixed: no gradient to the caller's
        if t.numel() == 1 and t.dim() <= 1:
            check_positive(self.noise, "noise", allow_zero=True)  # its message shows the value
            return float(t)
        return check_sample_weight(t, n, min_positive=0, name="noise")

    def _check_learn_kernel(self, objective) -> None:
        """``learn_kernel``'s ``objective`` ("auto" resolved): a per-sample ``noise`` array
        is fixed, which only "alignment" (no noise) takes — "lml" / "map" learn one noise
        variance and would replace it, "loo" / "gcv" / "holdout" need one ridge."""
        noise = real_tensor(self.noise, "noise")
        if objective != "alignment" and noise.numel() > 1:
            does = ("learns one noise variance, which would replace"
                    if objective in ("lml", "map") else "needs one scalar ridge, not")
            raise ValueError(f"learn_kernel objective {objective!r} {does} the per-sample "
                             f"noise (an array of shape {tuple(noise.shape)}): with a "
                             f"per-sample noise, learn the kernel by objective='alignment' "
                             f"or fit(X, y, optimize=True) (log p(y), the noise fixed), or "
                             f"pass a float noise")

    def _log_bounds(self):
        """(log low, log high) of the hyperparameter bounds, or None (unbounded)."""
        return _log_bounds(self.hyperparameter_bounds, "hyperparameter_bounds")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.requires_fit = False  # predict and sample_y before fit draw on the prior
        return tags

    def fit(self, X, y, optimize: bool = False, n_iter: int = 100, lr: float = 0.05):
        r"""Condition the GP on (X, y); with ``optimize=True`` first learn the kernel's
        hyperparameters and the noise by maximizing log p(y) — the log posterior
        log p(y) + log p(θ) when the kernel or ``noise_prior`` sets priors (MAP; log p(y)
        below stands for it then).

        The objective is −log p(y) in the logarithms θ = log v of the positive
        hyperparameters v (the kernel's softplus-parameterized ones and σ²), each bounded
        to ``hyperparameter_bounds`` (1e-5 ≤ v ≤ 1e5 by default), as scikit-learn does;
        other learnable parameters (a deep kernel's weights) enter as they are. Its
        gradient is ½ tr((ααᵀ − A⁻¹)∂A) from the float64 Cholesky factor in closed form (one
        ``cholesky_inverse``), autograd reaching only the kernel entries (``"cholesky"``;
        Rasmussen and Williams 2006, eq. 5.9; the implementation of
        :func:`torchkern.learning.log_marginal_likelihood`), or
        (``"cg"``) that of the surrogate 2yᵀx − xᵀAx of the quadratic term (x = A⁻¹y by
        preconditioned CG) and the Hutchinson gradient of the preconditioned SLQ
        log-determinant: CG solves of width r (+ num_probes), O(n²) kernel evaluations per
        product. With ``"cg"`` the SLQ probes are drawn once per fit, so that L-BFGS sees
        one deterministic objective. Fits on the CPU of at most 1,000 points (either
        method) run on one torch thread (the setting is restored afterwards): at that size a second
        thread gains little, and on a busy machine its waits cost several times the work
        (``docs/performance.md``).

        ``optimizer="lbfgs"``: SciPy's L-BFGS-B (Byrd, Lu, Nocedal and Zhu 1995) on the
        float64 objective and gradient, at most ``n_iter`` iterations (each one or a few
        evaluations, one O(n³) Cholesky factorization and inverse each); it stops when an
        iteration lowers the objective by less than 2.2e-9 relatively or every entry of
        the projected gradient in θ is below 1e-5 (SciPy's defaults, scikit-learn's
        criterion). A variance pushed towards 0 by a first step from a poor start
        stops at its bound, where its gradient v ∂/∂v still counts (in the raw softplus
        coordinates it vanishes like v, and L-BFGS stalled on that plateau).
        ``optimizer="adam"``: ``n_iter`` Adam steps of learning rate ``lr`` on
        −log p(y)/n in the raw parameters, projected on the bounds.
        ``n_restarts_optimizer`` more runs start from values drawn log-uniformly within
        the bounds; the run of largest log p(y) is kept (scikit-learn's semantics).

        A :class:`~torchkern.linalg.ConvergenceWarning` gives the hyperparameters and
        log p(y) when the kept run stopped early (``n_iter`` reached, a failed line
        search; Adam's objective still falling at the end) and when its optimum is
        degenerate: a hyperparameter on a bound of ``hyperparameter_bounds`` (in log space
        within ``numpy.isclose``'s tolerance, scikit-learn's test), e.g. a signal
        variance at 1e-5 when the kernel explains none of y.

        Parameters
        ----------
        X : Tensor or array of shape (n, d)
        y : Tensor or array of shape (n,) or (n, r)
        optimize : bool
            Learn the hyperparameters and the noise first.
        n_iter : int
            At most this many L-BFGS-B iterations per run (the number of Adam steps with
            ``optimizer="adam"``).
        lr : float
            Adam's learning rate (``optimizer="adam"`` only).

        Returns
        -------
        self
        """
        kernel = resolve_kernel(self.kernel)
        if isinstance(kernel, str):
            raise ValueError("GaussianProcessRegressor needs a Kernel; 'precomputed' is not supported")
        # Data are constants here: a graph hanging on X or y must not be backpropagated.
        Xt = check_input(kernel, X).detach()
        n = Xt.shape[0]
        method, noise = self._check_params(n)
        Y = as_vector(y, "y", n=n).detach()
        Y = Y.to(dtype=Xt.dtype if Y.is_floating_point() else Xt.dtype, device=Xt.device)
        ravel = Y.dim() == 1
        Y2 = Y.reshape(n, -1)
        if self.normalize_y:
            y_mean = Y2.mean(0)
            y_std = Y2.std(0, unbiased=False)
            y_std = torch.where(y_std > 10 * torch.finfo(y_std.dtype).eps, y_std, torch.ones_like(y_std))
            Y2 = (Y2 - y_mean) / y_std
        else:
            y_mean = torch.zeros(Y2.shape[1], dtype=Xt.dtype, device=Xt.device)
            y_std = torch.ones_like(y_mean)
        Xf = Xt.to(_F64) if method == "cholesky" else Xt
        Yf = Y2.to(Xf.dtype)

        if isinstance(noise, torch.Tensor):
            noise = noise.to(Xt.device)
        self.loss_history_ = []
        if optimize:
            if not is_int(n_iter) or n_iter < 0:
                raise ValueError(f"n_iter must be a non-negative int, got {n_iter!r}")
            if not (is_real(lr) and lr > 0):
                raise ValueError(f"lr must be a positive float, got {lr!r}")
            if isinstance(noise, torch.Tensor) and self.noise_prior is not None:
                raise ValueError("noise_prior needs a learned noise: a per-sample noise "
                                 "array is fixed (optimize=True learns the kernel only)")
            if not isinstance(noise, torch.Tensor) and noise <= 0:
                raise ValueError("noise must be > 0 to be learned (as log noise)")
            if self.optimizer is None:
                raise ValueError("optimize=True needs optimizer='lbfgs' or 'adam', got "
                                 "optimizer=None (scikit-learn's value for a fixed kernel)")
            with threads_for(Xf):
                noise = self._learn(kernel, Xf, Yf, method, noise, n_iter, float(lr))
        else:
            self.n_iter_ = 1  # one direct solve, no hyperparameter steps

        self.kernel_ = kernel
        self.noise_ = noise
        self.method_ = method
        self.X_train_ = Xt
        self.y_train_ = Y2.reshape(-1) if ravel else Y2
        self._y_mean, self._y_std, self._ravel = y_mean, y_std, ravel
        with torch.no_grad(), threads_for(Xf):
            self._condition(Xf, Yf)
        self.n_features_in_ = Xt.shape[1]
        return self

    # -- the marginal likelihood -------------------------------------------------------
    def _lml(self, kernel, X, Y, noise, method, generator):
        """log p(Y) summed over targets, differentiable in the kernel and ``noise``, and
        what conditioning needs: (μ, A⁻¹(Y − μ), L or preconditioner)."""
        const = self.mean == "constant"
        per_sample = isinstance(noise, torch.Tensor) and noise.dim() == 1
        if method == "cholesky":
            K = kernel(X, backend="dense").to_dense()
            if per_sample:  # fixed (never learned): on K's diagonal
                K = K + torch.diag(noise.to(K.dtype))
                noise = 0.0
            return lml_cholesky(K, Y, noise, constant_mean=const)
        Kop = kernel(X, backend=self.backend)
        if per_sample:
            noise = noise.to(Kop.dtype)
        with torch.no_grad():
            # L Lᵀ + diag(noise) for per-sample noise (with the mean variance, the SLQ
            # log-determinant of the whitened A had a standard error of 0.4 at n = 200)
            P = PivotedCholesky(Kop, _default_rank(X.shape[0]),
                                noise if per_sample else float(noise))
        return lml_cg(Kop, Y, noise, P, constant_mean=const, tol=self.tol,
                      max_iter=self.max_iter, num_probes=self.num_probes, generator=generator)

    def _objective(self, kernel, X, Y, method, noise):
        """The learnable parameters — the kernel's and the noise σ² = softplus(ρ) — in
        optimizer coordinates (:func:`torchkern._optimize.coordinates`), the raw
        noise ρ and loss(generator) = −log p(Y), differentiable in them."""
        if isinstance(noise, torch.Tensor):  # per-sample: fixed, the kernel alone learned
            raw_noise = None
            try:
                coords = _coordinates([kernel], self._log_bounds())
            except ValueError:
                raise ValueError("optimize=True with a per-sample noise array learns the "
                                 "kernel's hyperparameters only, and the kernel has none "
                                 "that requires grad") from None
        else:
            learned_noise = _Noise(noise)
            raw_noise = learned_noise.raw_noise
            coords = _coordinates([kernel, learned_noise], self._log_bounds())

        with_priors = self.noise_prior is not None or any(True for _ in kernel.named_priors())

        def loss(generator):
            sigma2 = noise if raw_noise is None else F.softplus(raw_noise)
            lml, _ = self._lml(kernel, X, Y, sigma2.to(X.dtype) if method == "cg" else sigma2,
                               method, generator)
            if with_priors:  # MAP: log p(y) + log p(θ), as GPyTorch's MLL with priors
                lml = lml + log_prior(kernel, sigma2, self.noise_prior).to(lml)
            return -lml

        return coords, raw_noise, loss

    def _learn(self, kernel, X, Y, method, noise, n_iter, lr) -> float:
        """Maximize log p(Y) from the given start and ``n_restarts_optimizer`` random
        ones; keep the best; warn about an early stop or an optimum on a bound."""
        coords, raw_noise, loss = self._objective(kernel, X, Y, method, noise)
        restarts = int(self.n_restarts_optimizer)
        if restarts and coords.log_bounds is None:
            raise ValueError("n_restarts_optimizer > 0 draws starts within "
                             "hyperparameter_bounds: they must not be None")
        seed = _probe_seed(self.random_state) if method == "cg" else None
        learn = self._lbfgs if self.optimizer == "lbfgs" else self._adam

        def run(theta0, label):
            return learn(coords, theta0, loss, seed, X.shape[0], n_iter, lr, label)

        runs = best_of_runs(run, coords, coords.clip(coords.get()), restarts,
                            self.random_state)
        if runs is None:
            raise ValueError("K + noise*I is not positive definite at the initial "
                             "hyperparameters; increase noise")
        best, losses, _ = runs
        not_pd = sum(1 for f in losses[1:] if f == math.inf)
        self.loss_history_ = best["history"]
        self.n_iter_ = int(best["nit"])
        where = f" (from {best['start']})" if restarts else ""
        if best["early"] is not None and n_iter > 0:
            warnings.warn(f"GaussianProcessRegressor: {best['early']}{where}; hyperparameters "
                          f"{coords.describe(best['theta'])}", ConvergenceWarning, stacklevel=5)
        if not_pd:
            warnings.warn(f"GaussianProcessRegressor: {not_pd} of {restarts} restarts were "
                          f"skipped: K + noise*I is not positive definite at their random "
                          f"starts", ConvergenceWarning, stacklevel=5)
        at = bound_report(coords, best["theta"], "hyperparameter_bounds")
        if at:
            warnings.warn(f"GaussianProcessRegressor: degenerate optimum{where}: {at}, "
                          f"log p(y) = {-best['f']:.6g}, hyperparameters {coords.describe(best['theta'])}; "
                          f"widen hyperparameter_bounds and fit again, or change the kernel "
                          f"(a signal variance at its lower bound: the kernel explains none "
                          f"of y)", ConvergenceWarning, stacklevel=5)
        return noise if raw_noise is None else float(F.softplus(raw_noise.detach()))

    def _lbfgs(self, coords, theta0, loss, seed, n, n_iter, lr, label):
        """One L-BFGS-B run from θ0 on −log p(y) in :class:`~torchkern._optimize.Coordinates` (the optimizer of
        :mod:`torchkern.learning`); None if K + σ²I is not positive definite at θ0."""
        def evaluate():
            return loss(None if seed is None else torch.Generator().manual_seed(seed))

        if n_iter == 0:
            # SciPy's L-BFGS-B takes a step even at maxiter=0 (n_iter=0 moved RBF(1.0) to
            # a lengthscale of 1e-5): the start itself, evaluated
            coords.set(theta0)
            try:
                with torch.no_grad():
                    f = float(evaluate())
            except ValueError:  # not positive definite at θ0
                return None
            if not math.isfinite(f):
                return None
            return dict(f=f, theta=coords.get(), history=[f / n], nit=0, early=None)
        bar = progress_bar(self.verbose, n_iter, f"GaussianProcessRegressor (L-BFGS{label})")

        def step(value):
            if bar is not None:
                bar.set_postfix(loss=f"{value:.6g}", refresh=False)
                bar.update(1)

        try:
            res = lbfgsb(coords, theta0, evaluate, max_iter=n_iter, ftol=_FTOL, gtol=_GTOL,
                         scale=1.0 / n, on_step=step)
        finally:
            if bar is not None:
                bar.close()
        if res is None:
            return None
        early = None
        if not res["converged"]:
            if res["status"] == 1:
                reason = "raise n_iter"
            elif seed is not None:  # method="cg"
                reason = ("the line search failed: the stochastic (SLQ) objective is not "
                          "accurate enough to go further; raise num_probes, or use "
                          "method='cholesky' where n allows")
            else:
                reason = ("the line search failed: near an optimum this is rounding in "
                          "the objective; otherwise standardize X and use normalize_y=True")
            early = (f"L-BFGS-B stopped after {res['nit']} iterations without converging "
                     f"({res['message']}) at log p(y) = {-res['f']:.6g}, largest "
                     f"projected gradient entry {res['pg']:.2e} (log-hyperparameters); {reason}")
        return dict(f=res["f"], theta=res["theta"], history=res["history"],
                    nit=res["nit"], early=early)

    def _adam(self, coords, theta0, loss, seed, n, n_iter, lr, label):
        """``n_iter`` Adam steps on −log p(y)/n in the raw parameters from θ0, projected on
        the bounds after each step (:mod:`torchkern.learning`'s loop); None if K + σ²I is
        not positive definite at θ0."""
        coords.set(theta0)
        gen = _generator(self.random_state)
        bar = progress_bar(self.verbose, n_iter, f"GaussianProcessRegressor (Adam{label})")

        def step(value):
            if bar is not None:
                bar.set_postfix(loss=f"{value:.6g}", refresh=False)
                bar.update(1)

        try:
            res = torch_optim(coords, lambda: loss(gen) / n,
                              lambda params: torch.optim.Adam(params, lr=lr), max_iter=n_iter,
                              patience=None, on_step=step, final_value=False)
        finally:
            if bar is not None:
                bar.close()
        if res is None:
            return None
        history = res["history"]
        with torch.no_grad():
            try:
                f = float(loss(None if seed is None else torch.Generator().manual_seed(seed)))
            except ValueError:
                if n_iter == 0:
                    return None
                raise
        early = None
        tail = max(1, len(history) // 10)
        if len(history) >= 20 and history[-tail - 1] - history[-1] > 1e-3 * max(1.0, abs(history[-1])):
            early = (f"-log p(y)/n was still falling after {n_iter} Adam steps "
                     f"({history[-tail - 1]:.6g} -> {history[-1]:.6g} over the last {tail}); "
                     f"raise n_iter or lr, or use optimizer='lbfgs'")
        if res["status"] == 2:  # not finite: the best parameters seen were restored
            early = f"{res['message']} after {len(history)} Adam steps; lower lr"
        return dict(f=f, theta=coords.get(), history=history, nit=len(history), early=early)

    def _condition(self, X, Y):
        gen = _generator(self.random_state)
        lml, (mu, a, fac) = self._lml(self.kernel_, X, Y, self.noise_, self.method_, gen)
        if self.method_ == "cholesky":
            self.L_, self._precond = fac, None
        else:
            self.L_, self._precond = None, fac
        self.mean_ = mu.reshape(()) if self._ravel else mu
        self.alpha_ = a.reshape(-1) if self._ravel else a
        self._alpha2 = a
        self._mu = mu
        self.log_marginal_likelihood_value_ = lml.detach().to(_F64)

    def log_marginal_likelihood(self) -> torch.Tensor:
        """log p(y) of the training targets at the fitted hyperparameters (0-d float64
        tensor; exact with ``"cholesky"``, an SLQ estimate with ``"cg"``, whose noise
        :meth:`log_marginal_likelihood_std_error` gives)."""
        check_fitted(self, "alpha_")
        return self.log_marginal_likelihood_value_

    def log_marginal_likelihood_std_error(self) -> float:
        """Monte-Carlo standard error of :meth:`log_marginal_likelihood`: 0.0 with
        ``"cholesky"``; with ``"cg"``, r/2 times the probes' standard error of the SLQ
        log-determinant (:class:`torchkern.linalg.LogdetInfo`; r targets) — the CG term
        is deterministic to ``tol``. Costs one more SLQ pass (no gradient) on the probes
        of ``random_state``: those of the fit for an int."""
        check_fitted(self, "alpha_")
        if self.method_ == "cholesky":
            return 0.0
        A = self.kernel_(self.X_train_, backend=self.backend).add_diag(self.noise_)
        with torch.no_grad(), threads_for(self.X_train_):
            _, info = logdet(A, method="slq", num_probes=self.num_probes,
                             preconditioner=self._precond, return_info=True,
                             random_state=_generator(self.random_state))
        return 0.5 * self._alpha2.shape[1] * info.std_error

    # -- prediction --------------------------------------------------------------------
    def _solve(self, B):
        """A⁻¹B for dense B of shape (n, b)."""
        if self.L_ is not None:
            return torch.cholesky_solve(B.to(_F64), self.L_)
        A = self.kernel_(self.X_train_, backend=self.backend).add_diag(self.noise_)
        return cg(A, B, preconditioner=self._precond, tol=self.tol, max_iter=self.max_iter)

    def _posterior(self, X, want_var: bool, want_cov: bool):
        """Latent mean (normalized units), variance and covariance at X."""
        if not hasattr(self, "alpha_"):
            return self._prior(X, want_var, want_cov)
        Xt = check_fitted_input(self.kernel_, X, self.X_train_, estimator=self)
        work = _F64 if self.method_ == "cholesky" else self.X_train_.dtype
        Xw = Xt.to(dtype=work, device=self.X_train_.device)
        Xtr = self.X_train_.to(work)
        kernel = self.kernel_
        with torch.no_grad():
            Ks = kernel(Xw, Xtr, backend=self.backend)
            mean = Ks @ self._alpha2.to(work) + self._mu.to(work)
            var = cov = None
            if want_var or want_cov:
                parts, quad_cols = [], []
                for s in range(0, Xw.shape[0], _PREDICT_CHUNK):
                    Kc = kernel(Xtr, Xw[s:s + _PREDICT_CHUNK], backend="dense").to_dense()
                    W = self._solve(Kc).to(Kc.dtype)
                    if want_cov:
                        parts.append((Kc, W))
                    else:
                        quad_cols.append((Kc * W).sum(0))
                if want_cov:
                    Kall = torch.cat([p[0] for p in parts], 1)
                    Wall = torch.cat([p[1] for p in parts], 1)
                    cov = kernel(Xw, backend="dense").to_dense() - Kall.T @ Wall
                    cov = (cov + cov.T) / 2
                else:
                    var = kernel.diag(Xw) - torch.cat(quad_cols)
                    if bool((var < 0).any()):
                        warnings.warn("Predicted variances smaller than 0. Setting those "
                                      "variances to 0.", RuntimeWarning, stacklevel=3)
                        var = var.clamp(min=0)
        return Xt, mean, var, cov

    def _prior(self, X, want_var: bool, want_cov: bool):
        """Mean 0, variance and covariance of the prior at X (before ``fit``, as
        scikit-learn predicts)."""
        kernel = resolve_kernel(self.kernel)
        if isinstance(kernel, str):
            raise ValueError("GaussianProcessRegressor needs a Kernel; 'precomputed' is not supported")
        Xt = check_input(kernel, X).detach()
        Xw = Xt.to(_F64)
        with torch.no_grad():
            mean = torch.zeros(Xw.shape[0], 1, dtype=_F64, device=Xw.device)
            var = kernel.diag(Xw) if want_var else None
            cov = kernel(Xw, backend="dense").to_dense() if want_cov else None
        return Xt, mean, var, cov

    def predict(self, X, return_std: bool = False, return_cov: bool = False):
        r"""Posterior mean (and standard deviation or covariance) of f at X; before
        ``fit``, those of the prior (mean 0), as scikit-learn.

        The std/cov is that of the latent f (noise not added), as in scikit-learn, scaled
        back by the target std when ``normalize_y``. Cost: O(n_test·n) kernel evaluations
        for the mean; the std needs A⁻¹k_{Dx} for every test point (a triangular solve of
        O(n²) each with Cholesky, a batched CG solve with ``"cg"``).

        Returns
        -------
        mean : Tensor of shape (n_test,) or (n_test, r)
            (n_test,) for one target, whether y was fitted as (n,) or (n, 1), as
            scikit-learn returns it.
        std : Tensor of the shape of ``mean``, if ``return_std``
        cov : Tensor of shape (n_test, n_test) or (n_test, n_test, r), if ``return_cov``
        """
        check_bool(return_std, "return_std")
        check_bool(return_cov, "return_cov")
        if return_std and return_cov:
            raise ValueError("At most one of return_std or return_cov can be requested.")
        Xt, mean, var, cov = self._posterior(X, return_std, return_cov)
        dtype, device = Xt.dtype, Xt.device
        fitted = hasattr(self, "alpha_")  # else the prior's, one target
        ys = self._y_std.to(dtype=mean.dtype, device=mean.device) if fitted else 1.0
        ym = self._y_mean.to(dtype=mean.dtype, device=mean.device) if fitted else 0.0
        mean = mean * ys + ym
        # one target, y of shape (n,) or (n, 1): 1-D results, as scikit-learn (a (m, 1) mean
        # minus a (m,) y_test broadcasts to (m, m) without a word)
        single = not fitted or self._ravel or mean.shape[1] == 1
        out_mean = (mean[:, 0] if single else mean).to(dtype=dtype, device=device)
        if return_std:
            std = var.sqrt()[:, None] * ys
            return out_mean, (std[:, 0] if single else std).to(dtype=dtype, device=device)
        if return_cov:
            cov = cov[:, :, None] * ys ** 2
            return out_mean, (cov[:, :, 0] if single else cov).to(dtype=dtype, device=device)
        return out_mean

    def sample_y(self, X, n_samples: int = 1, random_state=None) -> torch.Tensor:
        r"""Draws of f at X from the posterior GP: mean + L z with L the float64 Cholesky
        factor of the posterior covariance (a relative jitter added if needed), z ~ N(0, I).
        O(n_test³) after the covariance.

        Returns
        -------
        Tensor of shape (n_test, n_samples), or (n_test, r, n_samples) for several targets.
        """
        if not is_int(n_samples) or n_samples < 1:
            raise ValueError(f"n_samples must be a positive int, got {n_samples!r}")
        mean, cov = self.predict(X, return_cov=True)
        gen = _generator(self.random_state if random_state is None else random_state)
        M = mean.to(_F64).reshape(mean.shape[0], -1)
        C = cov.to(_F64).reshape(cov.shape[0], cov.shape[1], -1)
        m, r = M.shape
        out = torch.empty(m, r, n_samples, dtype=_F64, device=M.device)
        eye = torch.eye(m, dtype=_F64, device=M.device)
        for j in range(r):
            Cj = C[:, :, j]
            scale = float(Cj.diagonal().abs().max().clamp(min=1e-300))
            jitter = 0.0
            for _ in range(10):
                L, info = torch.linalg.cholesky_ex(Cj + jitter * eye)
                if int(info) == 0:
                    break
                jitter = scale * 1e-12 if jitter == 0 else jitter * 10
            else:
                raise ValueError("the posterior covariance is not positive semi-definite")
            gen_device = gen.device if gen is not None else M.device
            Z = torch.randn(m, n_samples, generator=gen, dtype=_F64, device=gen_device).to(M.device)
            out[:, j, :] = M[:, j, None] + L @ Z
        out = out.to(mean.dtype)
        return out[:, 0, :] if mean.dim() == 1 else out

    def score(self, X, y, sample_weight=None) -> float:
        """R² of the posterior mean (scikit-learn's ``r2_score``, uniform over targets)."""
        return r2_score(y, self.predict(X), sample_weight)


def _probe_seed(random_state) -> int:
    """One seed for the SLQ probes of a whole fit (common random numbers)."""
    gen = _generator(random_state)
    return int(torch.randint(0, 2**62, (), generator=gen))
