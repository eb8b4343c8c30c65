"""Minimizing an objective over kernel hyperparameters: :func:`fit_kernel`."""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import torch

from .._progress import progress_bar
from .._validation import is_int, is_real
from ..linalg import ConvergenceWarning
from .. import _optimize

__all__ = ["fit_kernel", "KernelLearningResult"]

_OPTIMIZERS = ("lbfgs", "adam")
_TINY = torch.finfo(torch.float64).tiny


@dataclass(repr=False)
class KernelLearningResult:
    """How a kernel was learned: what :func:`fit_kernel` returns, and the
    ``learn_kernel_result_`` of an estimator fitted with ``learn_kernel=``.

    Attributes
    ----------
    loss : float
        The objective where the parameters were left (the kept run's last value).
    history : list of float
        The objective at the start and after each iteration of the kept run (L-BFGS-B),
        or before each step (``torch.optim`` optimizers).
    n_iter : int
        Iterations (steps) of the kept run.
    n_evals : int
        Objective-and-gradient evaluations of all runs together.
    converged : bool
        Whether the kept run met its convergence test (L-BFGS-B: SciPy's ``ftol`` /
        ``gtol`` test; ``torch.optim``: no improvement over ``patience`` steps, with the
        loss rising at one of them or a projected gradient at most ``gtol``).
    reason : str
        Why the kept run stopped, in words, with the values that decided it.
    optimizer : str
        The optimizer's name: ``"lbfgs"``, ``"adam"``, or the ``torch.optim`` class's or
        factory's name.
    start : str
        ``"the given start"`` or ``"restart i of k"``: where the kept run began.
    run_losses : list of float
        The final objective of every run, the given start's first (inf: a restart whose
        start was not positive definite).
    hyperparameters : dict
        {name: value} of the positive (log-parameterized) hyperparameters at the end.
    """

    loss: float
    history: list
    n_iter: int
    n_evals: int
    converged: bool
    reason: str
    optimizer: str
    start: str = "the given start"
    run_losses: list = field(default_factory=list)
    hyperparameters: dict = field(default_factory=dict)

    def __repr__(self):
        hp = ", ".join(f"{k}={v:.6g}" for k, v in self.hyperparameters.items())
        return (f"KernelLearningResult(loss={self.loss:.6g}, n_iter={self.n_iter}, "
                f"converged={self.converged}, optimizer={self.optimizer!r}, "
                f"reason={self.reason!r}" + (f", {hp}" if hp else "") + ")")


def _optimizer_factory(optimizer, lr):
    """(name, factory params -> torch.optim.Optimizer or None for L-BFGS-B)."""
    if isinstance(optimizer, str):
        if optimizer not in _OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {_OPTIMIZERS}, a torch.optim.Optimizer "
                             f"class or a callable params -> Optimizer, got {optimizer!r}")
        if optimizer == "lbfgs":
            return "lbfgs", None
        return "adam", lambda params: torch.optim.Adam(params, lr=lr)
    if isinstance(optimizer, type) and issubclass(optimizer, torch.optim.Optimizer):
        return optimizer.__name__, lambda params: optimizer(params, lr=lr)
    if callable(optimizer):
        return getattr(optimizer, "__name__", type(optimizer).__name__), optimizer
    raise ValueError(f"optimizer must be one of {_OPTIMIZERS}, a torch.optim.Optimizer class "
                     f"or a callable params -> Optimizer, got {optimizer!r}")


def _check(max_iter, tol, gtol, lr, patience, n_restarts):
    if not is_int(max_iter) or max_iter < 1:
        raise ValueError(f"max_iter must be a positive int, got {max_iter!r}")
    # an infinite tol or gtol stopped at the start and called it converged
    if tol is not None and not (is_real(tol) and 0 <= tol < math.inf):
        raise ValueError(f"tol must be None or a finite float >= 0, got {tol!r}")
    if not (is_real(gtol) and 0 <= gtol < math.inf):
        raise ValueError(f"gtol must be a finite float >= 0, got {gtol!r}")
    if not (is_real(lr) and lr > 0):
        raise ValueError(f"lr must be > 0, got {lr!r}")
    if patience is not None and (not is_int(patience) or patience < 1):
        raise ValueError(f"patience must be a positive int or None, got {patience!r}")
    if not is_int(n_restarts) or n_restarts < 0:
        raise ValueError(f"n_restarts must be a non-negative int, got {n_restarts!r}")


def minimize(objective, coords, *, optimizer="lbfgs", max_iter=100, tol=None,
             gtol=_optimize.GTOL, lr=0.05, patience=10, n_restarts=0, random_state=None,
             verbose=False, callback=None, what="fit_kernel",
             log_objective=False) -> KernelLearningResult:
    """:func:`fit_kernel` on :class:`~torchkern._optimize.Coordinates`: runs from
    the given start and ``n_restarts`` random ones, keeps the best, warns (``what`` names
    the caller) and returns the :class:`KernelLearningResult`.

    ``log_objective``: for an objective f ≥ 0 (an error measure in the targets' units),
    the optimizers minimize log f instead, so that their convergence tests — SciPy's
    relative decrease (f_k − f_k+1) / max(|f_k|, |f_k+1|, 1) ≤ ``tol`` and projected
    gradient ≤ ``gtol``, and ``torch.optim``'s improvement ≤ ``tol`` · max(1, |best|),
    all absolute for |f| < 1 — hold relative to f: the same run whatever the units of
    the targets (LOO errors of 1e-5 stopped at the start as "converged"). The minimizer
    is the same; the result's ``loss``, ``history``, ``run_losses`` and the relative
    change it reports are those of f itself."""
    _check(max_iter, tol, gtol, lr, patience, n_restarts)
    if callback is not None and not callable(callback):
        raise TypeError(f"callback must be callable or None, got {type(callback).__name__}")
    name, factory = _optimizer_factory(optimizer, lr)
    if n_restarts and (coords.log_bounds is None or not coords.mask.any()):
        raise ValueError("n_restarts > 0 draws starts log-uniformly within bounds: it needs "
                         "bounds (not None) and positive hyperparameters to draw")

    def evaluate():
        value = objective()
        if not isinstance(value, torch.Tensor) or value.numel() != 1:
            raise TypeError("objective() must return a 0-d tensor")
        value = value.reshape(())
        if torch.is_grad_enabled() and not value.requires_grad:
            raise TypeError("objective() does not depend on the parameters being fit: its "
                            "value has no gradient (is it computed under torch.no_grad(), "
                            "or from other tensors?)")
        if log_objective:  # f = 0 (targets all zero) is a flat log f, not -inf
            return value.to(torch.float64).clamp_min(_TINY).log()
        return value

    def run(theta0, label):
        coords.set(theta0)
        bar = progress_bar(verbose, max_iter, f"{what} ({name}{label})")

        def on_step(loss):
            if log_objective:
                loss = math.exp(loss)
            if bar is not None:
                bar.set_postfix(loss=f"{loss:.6g}", refresh=False)
                bar.update(1)

        try:
            if factory is None:
                stop = {}

                def step(loss):
                    on_step(loss)
                    if callback is not None and callback(
                            len(stop), math.exp(loss) if log_objective else loss):
                        stop["by"] = "callback"
                        raise StopIteration
                    stop[len(stop)] = loss

                res = _optimize.lbfgsb(coords, theta0, evaluate, max_iter=max_iter,
                                       ftol=_optimize.FTOL if tol is None else tol, gtol=gtol,
                                       on_step=step, leave_plateau=True)
                if res is not None and stop.get("by") == "callback":
                    res.update(converged=False, status=3, message="stopped by callback")
                return res
            return _optimize.torch_optim(coords, evaluate, factory, max_iter=max_iter,
                                         tol=1e-6 if tol is None else tol, patience=patience,
                                         gtol=gtol, on_step=on_step, callback=user_callback)
        finally:
            if bar is not None:
                bar.close()

    user_callback = callback
    if callback is not None and log_objective:
        def user_callback(step, loss):
            return callback(step, math.exp(loss))

    start = coords.clip(coords.get())
    runs = _optimize.best_of_runs(run, coords, start, n_restarts, random_state)
    if runs is None:
        # The optimizers take a ValueError for a point where the objective is not defined;
        # at the start it may be the objective's own refusal (y of the wrong length, a
        # one-class y): evaluate once more to say which.
        coords.set(start)
        at = f"at the initial hyperparameters {coords.describe(start)}"
        with torch.enable_grad():
            try:
                value = evaluate()
            except ValueError as err:  # its refusal says why (y, or a Gram not p.d. there)
                raise ValueError(f"{what}: the objective is not defined {at}: {err}") from err
            f0 = float(value.detach())
            if math.isfinite(f0):  # then its gradient was refused: say so, and why
                try:
                    torch.autograd.grad(value, coords.params, allow_unused=True)
                except ValueError as err:
                    raise ValueError(f"{what}: the objective's gradient could not be computed "
                                     f"{at} (its value is {f0}): {err}") from err
        raise ValueError(f"{what}: the objective is not finite {at}: its value is {f0}")
    best, losses, evals = runs
    if log_objective:
        best, losses = _from_log(best, name), [math.exp(f) for f in losses]
    reason = _reason(best, name, max_iter, tol, gtol, log_objective)
    _warn(best, reason, coords, what, name, n_restarts, losses)
    hp = {nm: math.exp(t) for nm, t, m in zip(coords.names, best["theta"], coords.mask) if m}
    return KernelLearningResult(loss=float(best["f"]), history=list(best["history"]),
                                n_iter=int(best["nit"]), n_evals=int(evals),
                                converged=bool(best["converged"]), reason=reason,
                                optimizer=name, start=best["start"], run_losses=losses,
                                hyperparameters=hp)


def _from_log(res, name) -> dict:
    """A run of :func:`minimize` on log f reported in f: its final value and history
    exponentiated, and ``change`` the relative decrease (a − b) / max(a, b) of f over the
    span the optimizer's own test measured (the last iteration of L-BFGS-B, the last tenth
    of the ``torch.optim`` steps)."""
    logs = list(res["history"])
    out = dict(res, f=math.exp(res["f"]), history=[math.exp(h) for h in logs])
    if name == "lbfgs":
        pair = (logs[-2] if len(logs) > 1 else logs[0], res["f"])
    else:
        tail = max(1, len(logs) // 10)
        pair = (logs[-tail - 1], logs[-1]) if len(logs) > tail else None
    if pair is not None and all(math.isfinite(t) for t in pair):
        a, b = math.exp(pair[0]), math.exp(pair[1])
        out["change"] = (a - b) / max(a, b) if max(a, b) > 0 else 0.0
    return out


def _reason(res, name, max_iter, tol, gtol, log_objective=False) -> str:
    """Why a run stopped, with the numbers."""
    change = f"last relative change of the objective {res['change']:.2e}"
    if name != "lbfgs":
        pg = "" if math.isnan(res["pg"]) or res["status"] == 4 else \
            f", largest projected gradient entry {res['pg']:.2e}"
        return f"{res['message']} ({change} over the last tenth of the steps{pg})"
    if res["flat"]:
        return (f"the objective is flat at the start (largest projected gradient entry "
                f"{res['pg']:.2e} <= gtol = {gtol:g}, and level along it): a plateau, not "
                f"necessarily an optimum")
    where = f"after {res['nit']} iterations"
    if res["plateau"]:
        where += f" ({res['plateau']} of them probe steps off a flat start)"
    of = " of log(objective)" if log_objective else ""
    numbers = (f"{change}, largest projected gradient entry{of} {res['pg']:.2e} "
               f"(log-hyperparameters)")
    if res["status"] == 0:
        return f"converged {where}: {res['message']} ({numbers})"
    if res["status"] == 1:
        return f"max_iter = {max_iter} iterations reached without converging ({numbers})"
    if res["status"] == 3:
        return f"stopped by callback {where} ({numbers})"
    return f"L-BFGS-B stopped {where} without converging: {res['message']} ({numbers})"


def _warn(res, reason, coords, what, name, n_restarts, losses):
    where = f" (kept run from {res['start']})" if n_restarts else ""
    shown = coords.mask if coords.mask.any() else [len(coords.names) <= 10] * len(coords.names)
    hp = ", ".join(f"{nm} = {math.exp(t) if m else t:.6g}" for nm, t, m, show in
                   zip(coords.names, res["theta"], coords.mask, shown) if show)
    tail = f"; loss {res['f']:.6g}" + (f", {hp}" if hp else "")
    if res["status"] == 3:
        return
    if name == "lbfgs":
        if res["flat"]:
            warnings.warn(f"{what}: {reason}{where}{tail}; try n_restarts, or a start nearer "
                          f"the data's scale", ConvergenceWarning, stacklevel=4)
        elif not res["converged"]:
            hint = ("raise max_iter" if res["status"] == 1 else
                    "near an optimum this is rounding in the objective (float32: use float64 "
                    "data); a stochastic objective: use optimizer='adam'")
            warnings.warn(f"{what}: {reason}{where}{tail}; {hint}", ConvergenceWarning,
                          stacklevel=4)
    elif res["status"] == 1 and res["change"] > 1e-3:
        warnings.warn(f"{what}: {name} stopped at max_iter with the objective still falling "
                      f"({reason}){where}{tail}; raise max_iter or lr, or use "
                      f"optimizer='lbfgs' for a deterministic objective",
                      ConvergenceWarning, stacklevel=4)
    elif res["status"] == 2:
        warnings.warn(f"{what}: {reason}{where}{tail}", ConvergenceWarning, stacklevel=4)
    elif res["status"] == 4:
        warnings.warn(f"{what}: {name} did not converge: {reason}{where}{tail}; raise lr, or "
                      f"lower tol", ConvergenceWarning, stacklevel=4)
    skipped = sum(1 for f in losses[1:] if f == math.inf)
    if skipped:
        warnings.warn(f"{what}: {skipped} of {n_restarts} restarts were skipped: the objective "
                      f"is not defined at their random starts", ConvergenceWarning,
                      stacklevel=4)
    at = _optimize.bound_report(coords, res["theta"])
    if at:
        warnings.warn(f"{what}: degenerate optimum{where}: {at}{tail}; widen bounds and fit "
                      f"again, or change the kernel", ConvergenceWarning, stacklevel=4)


def fit_kernel(objective, module_or_params, *, optimizer="lbfgs", max_iter=100, tol=None,
               gtol=_optimize.GTOL, lr=0.05, patience=10, bounds=_optimize.BOUNDS,
               n_restarts=0, random_state=None, verbose=False, callback=None, n_iter=None):
    r"""Minimize ``objective()`` over kernel hyperparameters; returns how it went.

    ``objective`` is a function of no arguments returning a 0-d loss to *minimize* — e.g.
    ``lambda: -log_marginal_likelihood(kernel, X, y, noise) / n`` or
    ``lambda: loo_error(kernel, X, y, alpha)``. ``module_or_params`` says what is learned:
    a kernel (or any ``nn.Module``: its parameters that require grad), a tensor, or an
    iterable of modules and tensors (``[kernel, raw_noise, centers]``).

    **Coordinates.** The positive hyperparameters of the modules given (those a kernel
    keeps through softplus, e.g. ``lengthscale``, ``outputscale``) are optimized as
    θ = log v within log ``bounds`` (scikit-learn's GP parameterization: a step in θ is a
    relative change of v, whatever its scale); every other tensor (a network's weights,
    centres, a tensor passed alone) as it is, unbounded.

    **optimizer="lbfgs"** (default): SciPy's L-BFGS-B (Byrd, Lu, Nocedal and Zhu 1995,
    "A limited memory algorithm for bound constrained optimization", SIAM J. Sci. Comput.
    16) on the objective and its gradient in float64, at most ``max_iter`` iterations (each
    one or a few evaluations). It stops when an iteration lowers the objective by less
    than ``tol`` relatively (``(f_k - f_k+1) / max(abs(f_k), abs(f_k+1), 1) <= tol``,
    default SciPy's 2.2e-9) or when every entry of the gradient projected on the bounds is
    at most ``gtol`` (1e-5) — the convergence test of scikit-learn's
    GaussianProcessRegressor. A start where the gradient is already below ``gtol`` is first
    probed by steps of 1, 2, 4 and 8 in θ both ways along the gradient's line: a
    lengthscale far below the data's distances makes the Gram matrix the identity to 1e-12,
    a plateau that gradient tests alone take for an optimum (and where the sign of the
    gradient is rounding); L-BFGS-B goes on from the lowest probe. For deterministic
    objectives (exact LOO, GCV, likelihood, alignment, a fixed holdout split). Both tests
    are absolute for ``abs(f) < 1``: an objective in the targets' units (an error of
    1e-5) meets them at once; minimize its logarithm, or scale it to order 1, as
    :func:`learn_kernel` does for its error objectives.

    **optimizer="adam"**, a ``torch.optim.Optimizer`` class (built with ``lr``) or a
    callable ``params -> Optimizer``: ``max_iter`` steps ``opt.step(closure)`` on the raw
    parameters, projected on ``bounds`` after each; stops early when the best loss has
    improved by less than ``tol * max(1, abs(best))`` (default 1e-6) over ``patience`` steps,
    or when the loss is not finite (the best parameters are restored). A ``patience`` stop
    is convergence when the loss rose at one of those steps (the steps overshoot the
    optimum) or the largest projected gradient entry in θ is at most ``gtol``; a loss that
    fell at each of them with a larger gradient is a stall (a tiny ``lr``): not converged,
    with a warning. For stochastic
    objectives (minibatches, :func:`sgpr_bound` or :func:`nystrom_complexity_reg` over
    many parameters, matrix-free estimates).

    A :class:`~torchkern.linalg.ConvergenceWarning` says when the kept run stopped early
    (``max_iter`` reached, a failed line search; a ``torch.optim`` run still falling by
    more than 1e-3 relatively over its last tenth of steps) with the objective's last
    relative change, the largest projected gradient entry and the hyperparameters; when it
    stopped on a flat start; and when a hyperparameter ends on a bound (scikit-learn's
    degenerate-optimum warning).

    ``n_restarts`` more runs start from the positive hyperparameters drawn log-uniformly
    within ``bounds`` (scikit-learn's ``n_restarts_optimizer``; other parameters restart
    from their given values), drawn by ``random_state``; the run of lowest final objective
    is kept.

    Cost: one objective-and-gradient evaluation per L-BFGS-B function call (``n_evals``
    in the result; typically 1.1–1.5 per iteration) or per ``torch.optim`` step.

    Parameters
    ----------
    objective : callable
        ``objective() -> Tensor`` (0-d), differentiable in the parameters.
    module_or_params : nn.Module, Tensor, or iterable of them
    optimizer : "lbfgs", "adam", torch.optim.Optimizer class or callable
    max_iter : int
        Iterations (L-BFGS-B) or steps (``torch.optim``) per run.
    tol : float, optional
        Relative decrease of the objective below which the run stops (L-BFGS-B; default
        2.2e-9) or a step counts as no progress (``torch.optim``; default 1e-6).
    gtol : float
        Bound on the projected gradient in θ (L-BFGS-B's test; ``torch.optim``: what tells
        convergence from a stall at a ``patience`` stop).
    lr : float
        Learning rate of ``torch.optim`` optimizers (unused by L-BFGS-B).
    patience : int or None
        ``torch.optim``: steps without progress before stopping; None never stops early.
    bounds : (float, float) or None
        Bounds of every positive hyperparameter (default scikit-learn's (1e-5, 1e5));
        None: unbounded (no restarts then). A start outside is clipped into them.
    n_restarts : int
        Runs from random starts after the given one.
    random_state : None, int or torch.Generator
        The restarts' starts.
    verbose : bool
        A tqdm bar of the loss.
    callback : callable, optional
        ``callback(step, loss)`` after each step; returning True stops the run.
    n_iter : int, optional
        The former name of ``max_iter``.

    Returns
    -------
    KernelLearningResult
        ``loss``, ``history`` (loss per iteration), ``n_iter``, ``converged``,
        ``reason`` (why it stopped), ``hyperparameters``, ...; the parameters are left at
        the kept run's end.

    Examples
    --------
    >>> import torch, torchkern
    >>> from torchkern.learning import fit_kernel, loo_error
    >>> g = torch.Generator().manual_seed(0)
    >>> X = torch.randn(80, 2, generator=g, dtype=torch.float64); y = torch.sin(2 * X[:, 0])
    >>> k = torchkern.RBF(3.0)
    >>> res = fit_kernel(lambda: loo_error(k, X, y, 0.01), k)
    >>> res.converged, res.n_iter < 30
    (True, True)
    """
    if not callable(objective):
        raise TypeError(f"objective must be callable, got {type(objective).__name__}")
    if n_iter is not None:
        max_iter = n_iter
    coords = _optimize.coordinates(module_or_params, _optimize.log_bounds(bounds))
    return minimize(objective, coords, optimizer=optimizer, max_iter=max_iter, tol=tol,
                    gtol=gtol, lr=lr, patience=patience, n_restarts=n_restarts,
                    random_state=random_state, verbose=verbose, callback=callback)
