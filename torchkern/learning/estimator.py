"""Learned kernels for the estimator API: :func:`learn_kernel` and the
``fit(..., learn_kernel=...)`` argument of every estimator with a ``kernel``."""
from __future__ import annotations

import copy
import math

import torch

from .._sharding import in_sharded_fit, sharded_fit
from .._threads import one_thread
from .._validation import as_generator, as_vector, is_real
from ..inputs import take
from ..kernels import RBF
from ..kernels.base import Kernel
from .. import _optimize
from .fit import minimize
from .objectives import gcv, kernel_alignment, kernel_ridge_predict, log_posterior, loo_error

__all__ = ["learn_kernel"]

_OBJECTIVES = ("auto", "loo", "gcv", "holdout", "alignment", "lml", "map")
_OPTIONS = ("objective", "optimizer", "max_iter", "n_iter", "tol", "lr", "n_restarts",
            "bounds", "validation_fraction", "random_state", "verbose")


def _is_classifier(estimator) -> bool:
    from sklearn.base import is_classifier
    return is_classifier(estimator)


def _regularization(estimator) -> float:
    """The ridge α of the LOO / GCV / holdout objectives: the estimator's ``alpha`` (a GP's
    ``noise``), 1.0 when it has neither."""
    name = "alpha" if hasattr(estimator, "alpha") else "noise"
    value = getattr(estimator, name, 1.0)
    try:
        value = float(value)
    except (TypeError, ValueError):
        shape = getattr(value, "shape", None)
        got = f"an array of shape {tuple(shape)}" if shape is not None else repr(value)
        raise ValueError(f"learning the kernel by 'loo', 'gcv' or 'holdout' needs one scalar "
                         f"regularization: the estimator's {name} must be a float, got "
                         f"{got}") from None
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"learning the kernel by 'loo', 'gcv' or 'holdout' needs alpha > 0, "
                         f"got {value!r}")
    return value


def _noise_parameter(estimator):
    """The name of the estimator's parameter that is the noise variance σ² of the GP
    whose marginal likelihood the ``"lml"`` / ``"map"`` objectives maximize — a GP's
    ``noise``, kernel ridge regression's ``alpha`` (its solution is that GP's posterior
    mean) — declared by the estimator class as ``_noise_variance_param``; None for the
    others."""
    name = getattr(type(estimator), "_noise_variance_param", None)
    return name if name is not None and hasattr(estimator, name) else None


def _kernel_to_learn(estimator):
    """The kernel ``estimator.fit`` would use, to be learned: ``estimator.kernel``, or for
    ``None`` the estimators' default ``RBF()`` (``torchkern._estimator.resolve_kernel``,
    one layer up, resolves None the same way: tests/learning/test_learn_default_kernel.py
    checks that they agree)."""
    if not hasattr(estimator, "kernel"):
        raise TypeError(f"{type(estimator).__name__} has no kernel parameter to learn")
    kernel = estimator.kernel
    if kernel is None:
        kernel = RBF()
    if isinstance(kernel, str):
        raise TypeError(f"estimator.kernel={kernel!r} has no hyperparameters to learn: it "
                        f"must be a torchkern Kernel (or None for the default RBF())")
    if not isinstance(kernel, Kernel):
        raise TypeError(f"estimator.kernel must be a torchkern Kernel (or None for the "
                        f"default RBF()) to be learned, got {type(kernel).__name__}")
    if not any(p.requires_grad for p in kernel.parameters()):
        raise ValueError(f"estimator.kernel={kernel!r} has no hyperparameters to learn (no "
                         f"parameter that requires grad); give the estimator a kernel with "
                         f"some, e.g. a lengthscale or a variance (c * kernel)")
    return kernel


def _learned_kernel(estimator, X, y, objective="auto", *, optimizer="lbfgs", max_iter=100,
                    n_iter=None, tol=None, lr=0.05, n_restarts=0, bounds=_optimize.BOUNDS,
                    validation_fraction=0.2, random_state=None, verbose=False):
    """(a trained copy of ``estimator.kernel``, the :class:`KernelLearningResult`, {name:
    value} of the estimator parameters learned with it — its noise variance under the
    ``"lml"`` / ``"map"`` objectives): the one implementation behind :func:`learn_kernel`
    and ``fit(..., learn_kernel=...)``."""
    if objective not in _OBJECTIVES:
        raise ValueError(f"objective must be one of {_OBJECTIVES}, got {objective!r}")
    if n_iter is not None:
        max_iter = n_iter
    kernel = _kernel_to_learn(estimator)
    if y is None:
        raise ValueError(f"learning the kernel of {type(estimator).__name__} needs targets y")
    if objective == "auto":
        objective = "alignment" if _is_classifier(estimator) else "loo"
    check = getattr(estimator, "_check_learn_kernel", None)
    if check is not None:  # what the estimator cannot learn with (a fixed noise array)
        check(objective)
    kernel = copy.deepcopy(kernel)
    Xk = kernel.check_input(X, "X")
    if callable(getattr(Xk, "align_rows", None)) and not in_sharded_fit(Xk):
        y = Xk.align_rows(y, "y")  # row-sharded data: each rank's own targets, gathered
    with sharded_fit(Xk):  # the objectives take that whole y as it is
        return _learn(estimator, kernel, Xk, y, objective, optimizer, max_iter, tol, lr,
                      n_restarts, bounds, validation_fraction, random_state, verbose)


def _learn(estimator, kernel, Xk, y, objective, optimizer, max_iter, tol, lr, n_restarts,
           bounds, validation_fraction, random_state, verbose):
    items = [kernel]
    if objective in ("loo", "gcv", "holdout"):
        alpha = _regularization(estimator)
        if objective in ("loo", "gcv"):
            score = loo_error if objective == "loo" else gcv

            def loss():
                return score(kernel, Xk, y, alpha)
        else:
            if not (is_real(validation_fraction) and 0 < validation_fraction < 1):
                raise ValueError(f"validation_fraction must be in (0, 1), got "
                                 f"{validation_fraction!r}")
            n = Xk.shape[0]
            # checked here: indexing y by the split raised torch's IndexError (y too
            # short) or TypeError (strings)
            Y = as_vector(y, "y", n=n).to(device=Xk.device, dtype=Xk.dtype)
            n_val = max(1, int(round(validation_fraction * n)))
            if n_val >= n:
                raise ValueError(f"the 'holdout' objective needs a training and a validation "
                                 f"sample: n = {n} with validation_fraction = "
                                 f"{validation_fraction!r}")
            perm = torch.randperm(n, generator=as_generator(random_state)).to(Xk.device)
            val, tr = perm[:n_val], perm[n_val:]
            Xtr, Xval, ytr, yval = take(Xk, tr), take(Xk, val), Y[tr], Y[val]

            def loss():
                return ((kernel_ridge_predict(kernel, Xtr, ytr, Xval, alpha) - yval) ** 2).mean()
    elif objective == "alignment":
        def loss():
            return -kernel_alignment(kernel, Xk, y)
    else:  # the noise variance is learned too, a positive hyperparameter (softplus(raw))
        noise_prior = getattr(estimator, "noise_prior", None)
        if objective == "map" and noise_prior is None and \
                not any(True for _ in kernel.named_priors()):
            raise ValueError("objective 'map' needs priors: register them on the kernel "
                             "(e.g. RBF(lengthscale_prior=Gamma(3.0, 6.0)) or "
                             "kernel.set_prior('lengthscale', prior)) or give the estimator "
                             "a noise_prior")
        noise = _optimize.Noise()  # from 1, as scikit-learn's WhiteKernel
        items.append(noise)
        n = Xk.shape[0]

        def loss():  # log p(y) + log p(θ): the priors count when there are any (GPyTorch)
            return -log_posterior(kernel, Xk, y, noise.value, noise_prior=noise_prior) / n
    coords = _optimize.coordinates(items, _optimize.log_bounds(bounds))
    # One torch thread on the CPU up to n = 1000, as the GP's exact fits: there a second
    # thread gains little and, on a busy machine, its waits cost 30x (1 s against 30 ms
    # per LOO evaluation at n = 309, load 5 on 2 cores).
    with one_thread(Xk.device.type == "cpu" and len(Xk) <= _optimize.SINGLE_THREAD_MAX_N):
        result = minimize(loss, coords, optimizer=optimizer, max_iter=max_iter, tol=tol,
                          lr=lr, n_restarts=n_restarts, random_state=random_state,
                          verbose=verbose, what=f"learn_kernel ({objective!r} objective)",
                          log_objective=objective in ("loo", "gcv", "holdout"))
    kernel.requires_grad_(True)
    return kernel, result, _learned_params(estimator, items)


def _learned_params(estimator, items) -> dict:
    """The estimator parameters set from what was learned besides the kernel: its noise
    variance (:func:`_noise_parameter`) when the noise was learned; {} otherwise (the
    learned noise of an estimator without one is in the result's hyperparameters
    only)."""
    name = _noise_parameter(estimator)
    noises = [it for it in items if isinstance(it, _optimize.Noise)]
    if name is None or not noises:
        return {}
    return {name: float(noises[0].value.detach())}


def _fit_options(estimator, spec) -> dict:
    """The keyword arguments of :func:`_learned_kernel` for a ``learn_kernel=`` value of
    ``fit``: an objective name, or a dict of :func:`learn_kernel`'s options."""
    if isinstance(spec, str):
        options = {"objective": spec}
    elif isinstance(spec, dict):
        unknown = sorted(set(spec) - set(_OPTIONS))
        if unknown:
            raise ValueError(f"learn_kernel got unknown options {unknown}; expected some of "
                             f"{_OPTIONS}")
        options = dict(spec)
    else:
        raise TypeError(f"learn_kernel must be None, an objective name or a dict of options, "
                        f"got {type(spec).__name__}")
    if "random_state" not in options:
        options["random_state"] = getattr(estimator, "random_state", None)
    return options


def fit_with_learned_kernel(fit, estimator, X, y, spec, args, kwargs):
    """``fit(estimator, X, *args, **kwargs)`` with ``estimator.kernel`` (and, under the
    ``"lml"`` / ``"map"`` objectives, its noise variance) replaced by those learned as
    ``spec`` says, for the length of the fit: the constructor parameters are left as they
    were (scikit-learn's rule), the learned kernel is the fitted ``kernel_``,
    how it was learned is ``learn_kernel_result_`` and its losses are
    ``kernel_learning_history_``."""
    kernel, result, params = _learned_kernel(estimator, X, y, **_fit_options(estimator, spec))
    original = {name: getattr(estimator, name) for name in ("kernel", *params)}
    estimator.kernel = kernel
    for name, value in params.items():
        setattr(estimator, name, value)
    try:
        out = fit(estimator, X, *args, **kwargs)
    finally:
        for name, value in original.items():
            setattr(estimator, name, value)
    estimator.learn_kernel_result_ = result
    estimator.kernel_learning_history_ = result.history
    return out


def learn_kernel(estimator, X, y, objective="auto", *, optimizer="lbfgs", max_iter=100,
                 tol=None, lr=0.05, n_restarts=0, bounds=_optimize.BOUNDS,
                 validation_fraction=0.2, random_state=None, verbose=False, n_iter=None):
    r"""Learn the estimator's kernel hyperparameters by gradient, then fit the estimator.

    The estimator API's path to learned bandwidths without writing a loop: a copy of
    ``estimator.kernel`` — for ``kernel=None`` the default kernel its ``fit`` would use,
    ``RBF()`` with lengthscale 1, as scikit-learn's ``GaussianProcessRegressor`` optimizes
    its default kernel — is trained on one objective by :func:`fit_kernel` — by default
    L-BFGS-B on the log-hyperparameters within ``bounds``, run to SciPy's convergence
    test (relative decrease ≤ ``tol``, projected gradient ≤ 1e-5) or ``max_iter``
    iterations, with a :class:`~torchkern.linalg.ConvergenceWarning` naming the
    objective's last change when it stops early —, set as the estimator's kernel, and the
    estimator is fitted on (X, y) as usual. ``objective``:

    - ``"loo"`` — the closed-form leave-one-out error of kernel ridge regression with the
      estimator's ``alpha`` (a GP's ``noise``) (:func:`loo_error`; Cawley and Talbot
      2004, "Fast exact leave-one-out cross-validation of sparse least-squares support
      vector machines", Neural Networks 17);
    - ``"gcv"`` — the generalized cross-validation score of the same ridge fit
      (:func:`gcv`; Golub, Heath and Wahba 1979, Technometrics 21);
    - ``"holdout"`` — the squared error on a random ``validation_fraction`` of the data
      of a ridge fit on the rest (:func:`kernel_ridge_predict`, implicit gradients);
    - ``"alignment"`` — the centered kernel-target alignment (:func:`kernel_alignment`;
      Cortes, Mohri and Rostamizadeh 2012), for classifiers (labels one-hot encoded);
    - ``"lml"`` — the Gaussian-process log marginal likelihood per sample with a learned
      noise variance σ² (from 1; :func:`log_marginal_likelihood`), which then becomes
      the estimator's σ² — ``GaussianProcessRegressor``'s ``noise``, ``KernelRidge``'s
      ``alpha`` (its solution is that GP's posterior mean); set by this function, the
      fitted model's under ``fit(..., learn_kernel=)`` (the constructor's left as it
      was), so the estimator is fitted with the noise its kernel was learned for (for
      the others it is only in the result's ``hyperparameters["noise"]``), plus the log
      priors of the
      hyperparameters when the kernel has priors (``RBF(lengthscale_prior=...)``) or the
      estimator a ``noise_prior`` (GaussianProcessRegressor): then the MAP objective
      :func:`log_posterior` / n, GPyTorch's ``ExactMarginalLogLikelihood``;
    - ``"map"`` — the same, requiring at least one prior (a ValueError otherwise);
    - ``"auto"`` — ``"alignment"`` for classifiers (``SVC``,
      ``KernelLogisticRegression``), ``"loo"`` otherwise.

    The error objectives ``"loo"``, ``"gcv"`` and ``"holdout"`` are minimized as their
    logarithm (same minimizer), so that the convergence tests, absolute for objectives
    below 1, hold relative to the error whatever the units of y; the result reports the
    objective itself.

    The same learning runs inside ``estimator.fit(X, y, learn_kernel=objective)`` (or
    ``learn_kernel={"objective": ..., "max_iter": ..., ...}`` with this function's keyword
    arguments), which every torchkern estimator with a ``kernel`` accepts; there the
    ``kernel`` parameter is left as it was and the learned kernel is the fitted
    ``kernel_``. On row-sharded data (a ``ShardedKernel`` on a ``ShardedInput``) each rank
    passes its own targets and the ranks learn the one-process hyperparameters (see
    ``docs/learning.md``). Cost: one evaluation of the objective and its gradient per
    L-BFGS-B function call (about 10–30 for one lengthscale; O(n³) each for the exact
    objectives at n ≤ 3000, matrix-free above) per run, then one fit.

    Parameters
    ----------
    estimator : estimator with a ``kernel`` parameter (a torchkern Kernel or None)
        Modified in place: its ``kernel`` becomes the learned kernel (for ``None``, the
        learned default ``RBF()``) and, under ``"lml"`` / ``"map"``, its noise variance
        (``noise`` / ``alpha``) the learned one; then fitted. A kernel without learnable
        hyperparameters (``"precomputed"``, ``Linear()``) is refused with an error naming
        ``estimator.kernel``.
    X : kernel input of n samples
    y : array of shape (n,) or (n, r)
    objective : str
    optimizer : "lbfgs", "adam", torch.optim.Optimizer class or callable
        ``"lbfgs"`` (SciPy's L-BFGS-B) for these deterministic objectives; Adam and other
        ``torch.optim`` optimizers (learning rate ``lr``, on the raw parameters projected
        on ``bounds``) for stochastic ones (see :func:`fit_kernel`).
    max_iter : int
        Iterations per run.
    tol : float, optional
        See :func:`fit_kernel`.
    lr : float
        Learning rate of ``torch.optim`` optimizers.
    n_restarts : int
        More runs from hyperparameters drawn log-uniformly within ``bounds``
        (scikit-learn's ``n_restarts_optimizer``); the lowest objective is kept.
    bounds : (float, float) or None
        Bounds of the positive hyperparameters (scikit-learn's (1e-5, 1e5)).
    validation_fraction : float
        Held-out share for ``"holdout"``.
    random_state : None, int or torch.Generator
        The holdout split and the restarts.
    verbose : bool
        tqdm bar of the loss.
    n_iter : int, optional
        The former name of ``max_iter``.

    Returns
    -------
    estimator
        Fitted, with ``learn_kernel_result_`` (a
        :class:`~torchkern.learning.KernelLearningResult`: ``history``, the loss per
        iteration; ``converged`` and ``reason``, why it stopped; ``n_iter``, ``loss``,
        ``hyperparameters``, ``run_losses`` of the restarts) and
        ``kernel_learning_history_`` (its ``history``).

    Examples
    --------
    >>> import torch, torchkern
    >>> from torchkern.learning import learn_kernel
    >>> g = torch.Generator().manual_seed(0)
    >>> X = torch.randn(100, 2, generator=g, dtype=torch.float64); y = torch.sin(3 * X[:, 0])
    >>> model = learn_kernel(torchkern.KernelRidge(torchkern.RBF(2.0), alpha=0.1), X, y, "loo")
    >>> float(model.kernel.lengthscale.detach()) < 1.0, model.learn_kernel_result_.converged
    (True, True)
    """
    kernel, result, params = _learned_kernel(
        estimator, X, y, objective, optimizer=optimizer, max_iter=max_iter, n_iter=n_iter,
        tol=tol, lr=lr, n_restarts=n_restarts, bounds=bounds,
        validation_fraction=validation_fraction, random_state=random_state, verbose=verbose)
    estimator.set_params(kernel=kernel, **params)
    estimator.fit(X, y)
    estimator.learn_kernel_result_ = result
    estimator.kernel_learning_history_ = result.history
    return estimator
