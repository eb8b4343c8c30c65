"""A small training loop for kernel hyperparameters: :func:`fit_kernel`."""
from __future__ import annotations

import math

import torch
from torch import nn

from .._validation import is_int
from .._progress import progress_bar

__all__ = ["fit_kernel"]

_OPTIMIZERS = ("adam", "lbfgs")


def _parameters(module_or_params):
    if isinstance(module_or_params, nn.Module):
        params = list(module_or_params.parameters())
    elif isinstance(module_or_params, torch.Tensor):
        params = [module_or_params]
    else:
        try:
            params = list(module_or_params)
        except TypeError:
            raise TypeError(f"module_or_params must be an nn.Module or an iterable of "
                            f"tensors, got {type(module_or_params).__name__}") from None
    params = [p for p in params if isinstance(p, torch.Tensor) and p.requires_grad]
    if not params:
        raise ValueError("module_or_params holds no tensor that requires grad: nothing to fit")
    return params


def fit_kernel(objective, module_or_params, *, optimizer="adam", lr=0.05, n_iter=100,
               tol=1e-6, patience=10, verbose=False, callback=None):
    r"""Minimize ``objective()`` over parameters by Adam or L-BFGS; returns the loss history.

    ``objective`` is a function of no arguments returning a 0-d loss to *minimize* — e.g.
    ``lambda: -log_marginal_likelihood(kernel, X, y, noise) / n`` or
    ``lambda: loo_error(kernel, X, y, alpha)``. ``module_or_params`` says what is learned:
    a kernel (or any ``nn.Module``: its parameters that require grad) or an iterable of
    tensors (a learnable ``noise``, Nyström centres, ...).

    Training stops after ``n_iter`` steps, or earlier when the best loss has improved by
    less than ``tol`` · max(1, abs(best loss)) over ``patience`` steps (early stopping), or
    when the loss is not finite (the parameters are then restored to the best ones seen).

    The same loop written with plain ``torch.optim``::

        opt = torch.optim.Adam(kernel.parameters(), lr=0.05)
        for _ in range(100):
            opt.zero_grad()
            loss = objective()
            loss.backward()
            opt.step()

    Parameters
    ----------
    objective : callable
        ``objective() -> Tensor`` (0-d), differentiable in the parameters.
    module_or_params : nn.Module or iterable of Tensor
    optimizer : {"adam", "lbfgs"}
        ``"lbfgs"``: one step is one ``torch.optim.LBFGS`` step (up to 20 evaluations,
        strong-Wolfe line search) — for deterministic objectives (exact methods).
    lr : float
        Learning rate (Adam) or initial step (L-BFGS, where 1 is usual).
    n_iter : int
        Maximum number of steps.
    tol : float
        Relative improvement below which a step counts as no progress.
    patience : int
        Steps without progress before stopping; ``None`` never stops early.
    verbose : bool
        Show a tqdm bar with the current loss.
    callback : callable, optional
        ``callback(step, loss)`` after each step; returning True stops training.

    Returns
    -------
    list of float
        The loss at each step (before the step's update).
    """
    if optimizer not in _OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {_OPTIMIZERS}, got {optimizer!r}")
    if not callable(objective):
        raise TypeError(f"objective must be callable, got {type(objective).__name__}")
    if not is_int(n_iter) or n_iter < 1:
        raise ValueError(f"n_iter must be a positive int, got {n_iter!r}")
    if not lr > 0:
        raise ValueError(f"lr must be > 0, got {lr!r}")
    if patience is not None and (not is_int(patience) or patience < 1):
        raise ValueError(f"patience must be a positive int or None, got {patience!r}")
    params = _parameters(module_or_params)
    if optimizer == "adam":
        opt = torch.optim.Adam(params, lr=lr)
    else:
        opt = torch.optim.LBFGS(params, lr=lr, max_iter=20, line_search_fn="strong_wolfe")
    history = []
    best, best_state, since = math.inf, None, 0
    bar = progress_bar(verbose, n_iter, "fit_kernel")

    def closure():
        opt.zero_grad()
        loss = objective()
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            raise TypeError("objective() must return a 0-d tensor")
        loss.backward()
        return loss

    try:
        with torch.enable_grad():
            for step in range(n_iter):
                if optimizer == "adam":
                    loss = float(closure().detach())
                    finite = math.isfinite(loss)
                    if finite:
                        if loss < best:
                            best_state = [p.detach().clone() for p in params]
                        opt.step()
                else:
                    loss = float(opt.step(closure).detach())
                    finite = math.isfinite(loss)
                history.append(loss)
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(loss=f"{loss:.5g}")
                if not finite:
                    if best_state is not None:
                        with torch.no_grad():
                            for p, v in zip(params, best_state):
                                p.copy_(v)
                    break
                if not math.isfinite(best) or loss < best - tol * max(1.0, abs(best)):
                    since = 0
                else:
                    since += 1
                best = min(best, loss)
                if callback is not None and callback(step, loss):
                    break
                if patience is not None and since >= patience:
                    break
    finally:
        if bar is not None:
            bar.close()
    return history
