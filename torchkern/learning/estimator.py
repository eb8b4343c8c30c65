"""Learned kernels for the estimator API: :func:`learn_kernel` and the
``fit(..., learn_kernel=...)`` argument of every estimator with a ``kernel``."""
from __future__ import annotations

import copy
import math

import torch

from .._validation import as_generator
from ..inputs import take
from ..kernels.base import Kernel
from .fit import fit_kernel
from .objectives import kernel_alignment, kernel_ridge_predict, loo_error, log_marginal_likelihood

__all__ = ["learn_kernel"]

_OBJECTIVES = ("auto", "loo", "holdout", "alignment", "lml")
_OPTIONS = ("objective", "n_iter", "lr", "validation_fraction", "random_state", "verbose")


def _is_classifier(estimator) -> bool:
    from sklearn.base import is_classifier
    return is_classifier(estimator)


def _regularization(estimator) -> float:
    """The ridge α of the LOO / holdout objectives: the estimator's ``alpha`` (a GP's
    ``noise``), 1.0 when it has neither."""
    value = getattr(estimator, "alpha", getattr(estimator, "noise", 1.0))
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"learning the kernel by 'loo' or 'holdout' needs one scalar "
                         f"regularization; the estimator's alpha is {value!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"learning the kernel by 'loo' or 'holdout' needs alpha > 0, "
                         f"got {value!r}")
    return value


def _learned_kernel(estimator, X, y, objective="auto", *, n_iter=50, lr=0.05,
                    validation_fraction=0.2, random_state=None, verbose=False):
    """(a trained copy of ``estimator.kernel``, the loss history): the one implementation
    behind :func:`learn_kernel` and ``fit(..., learn_kernel=...)``."""
    if objective not in _OBJECTIVES:
        raise ValueError(f"objective must be one of {_OBJECTIVES}, got {objective!r}")
    kernel = getattr(estimator, "kernel", None)
    if not isinstance(kernel, Kernel):
        raise TypeError(f"estimator.kernel must be a torchkern Kernel to be learned, got "
                        f"{type(kernel).__name__}")
    if y is None:
        raise ValueError(f"learning the kernel of {type(estimator).__name__} needs targets y")
    if objective == "auto":
        objective = "alignment" if _is_classifier(estimator) else "loo"
    kernel = copy.deepcopy(kernel)
    Xk = kernel.check_input(X, "X")
    params = [p for p in kernel.parameters() if p.requires_grad]
    if objective in ("loo", "holdout"):
        alpha = _regularization(estimator)
        if objective == "loo":
            def loss():
                return loo_error(kernel, Xk, y, alpha)
        else:
            if not 0 < validation_fraction < 1:
                raise ValueError(f"validation_fraction must be in (0, 1), got "
                                 f"{validation_fraction!r}")
            n = Xk.shape[0]
            perm = torch.randperm(n, generator=as_generator(random_state)).to(Xk.device)
            n_val = max(1, int(round(validation_fraction * n)))
            val, tr = perm[:n_val], perm[n_val:]
            Y = torch.as_tensor(y).to(device=Xk.device, dtype=Xk.dtype)
            Xtr, Xval, ytr, yval = take(Xk, tr), take(Xk, val), Y[tr], Y[val]

            def loss():
                return ((kernel_ridge_predict(kernel, Xtr, ytr, Xval, alpha) - yval) ** 2).mean()
    elif objective == "alignment":
        def loss():
            return -kernel_alignment(kernel, Xk, y)
    else:
        raw_noise = torch.zeros((), dtype=torch.float64, requires_grad=True)
        params.append(raw_noise)
        n = Xk.shape[0]

        def loss():
            return -log_marginal_likelihood(kernel, Xk, y, raw_noise.exp()) / n
    history = fit_kernel(loss, params, lr=lr, n_iter=n_iter, verbose=verbose)
    kernel.requires_grad_(True)
    return kernel, history


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
    """``fit(estimator, X, *args, **kwargs)`` with ``estimator.kernel`` replaced by the
    kernel learned as ``spec`` says, for the length of the fit: the constructor parameter
    is left as it was (scikit-learn's rule), the learned kernel is the fitted ``kernel_``
    and the losses are in ``kernel_learning_history_``."""
    kernel, history = _learned_kernel(estimator, X, y, **_fit_options(estimator, spec))
    original = estimator.kernel
    estimator.kernel = kernel
    try:
        out = fit(estimator, X, *args, **kwargs)
    finally:
        estimator.kernel = original
    estimator.kernel_learning_history_ = history
    return out


def learn_kernel(estimator, X, y, objective="auto", *, n_iter=50, lr=0.05,
                 validation_fraction=0.2, random_state=None, verbose=False):
    r"""Learn the estimator's kernel hyperparameters by gradient, then fit the estimator.

    The estimator API's path to learned bandwidths without writing a loop: a copy of
    ``estimator.kernel`` is trained by :func:`fit_kernel` (Adam, ``n_iter`` steps,
    early stopping) on one objective, set as the estimator's kernel, and the estimator is
    fitted on (X, y) as usual. ``objective``:

    - ``"loo"`` — the closed-form leave-one-out error of kernel ridge regression with the
      estimator's ``alpha`` (a GP's ``noise``) (:func:`loo_error`; Cawley and Talbot
      2004, "Fast exact leave-one-out cross-validation of sparse least-squares support
      vector machines", Neural Networks 17);
    - ``"holdout"`` — the squared error on a random ``validation_fraction`` of the data
      of a ridge fit on the rest (:func:`kernel_ridge_predict`, implicit gradients);
    - ``"alignment"`` — the centered kernel-target alignment (:func:`kernel_alignment`;
      Cortes, Mohri and Rostamizadeh 2012), for classifiers (labels one-hot encoded);
    - ``"lml"`` — the Gaussian-process log marginal likelihood per sample with a learned
      noise variance (:func:`log_marginal_likelihood`);
    - ``"auto"`` — ``"alignment"`` for classifiers (``SVC``,
      ``KernelLogisticRegression``), ``"loo"`` otherwise.

    The same learning runs inside ``estimator.fit(X, y, learn_kernel=objective)`` (or
    ``learn_kernel={"objective": ..., "n_iter": ..., ...}``), which every torchkern
    estimator with a ``kernel`` accepts; there the ``kernel`` parameter is left as it was
    and the learned kernel is the fitted ``kernel_``. Cost: ``n_iter`` evaluations of the
    objective and its gradient (O(n³) each for the exact objectives at n ≤ 3000, matrix-free
    above), then one fit.

    Parameters
    ----------
    estimator : estimator with a ``kernel`` parameter (a torchkern Kernel)
        Modified in place: its ``kernel`` becomes the learned kernel; then fitted.
    X : kernel input of n samples
    y : array of shape (n,) or (n, r)
    objective : str
    n_iter, lr : Adam steps and learning rate.
    validation_fraction : float
        Held-out share for ``"holdout"``.
    random_state : None, int or torch.Generator
        The holdout split.
    verbose : bool
        tqdm bar of the loss.

    Returns
    -------
    estimator
        Fitted, with ``kernel_learning_history_`` (the loss at each step).

    Examples
    --------
    >>> import torch, torchkern
    >>> from torchkern.learning import learn_kernel
    >>> g = torch.Generator().manual_seed(0)
    >>> X = torch.randn(100, 2, generator=g, dtype=torch.float64); y = torch.sin(3 * X[:, 0])
    >>> model = learn_kernel(torchkern.KernelRidge(torchkern.RBF(2.0), alpha=0.1), X, y, "loo")
    >>> float(model.kernel.lengthscale.detach()) < 1.0
    True
    """
    kernel, history = _learned_kernel(estimator, X, y, objective, n_iter=n_iter, lr=lr,
                                      validation_fraction=validation_fraction,
                                      random_state=random_state, verbose=verbose)
    estimator.set_params(kernel=kernel)
    estimator.fit(X, y)
    estimator.kernel_learning_history_ = history
    return estimator
