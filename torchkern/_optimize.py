"""The optimizer behind every learned hyperparameter: L-BFGS-B on log-hyperparameters.

One implementation for :func:`torchkern.learning.fit_kernel`, :func:`learn_kernel`,
``fit(..., learn_kernel=...)`` and ``GaussianProcessRegressor.fit(optimize=True)``:

- :class:`Coordinates` flattens the learnable parameters to one float64 vector θ:
  log v for a positive (softplus-parameterized) hyperparameter v, bounded by the log of
  ``bounds`` (scikit-learn's parameterization), the raw value of any other parameter;
- :func:`lbfgsb` runs SciPy's L-BFGS-B (Byrd, Lu, Nocedal and Zhu 1995) on an objective
  in those coordinates and reports how it stopped: the convergence test is SciPy's (a
  relative decrease below ``ftol`` or every projected-gradient entry below ``gtol``);
- :func:`torch_optim` runs any ``torch.optim`` optimizer (Adam, ...) on the raw
  parameters, projected on the bounds after each step — for stochastic objectives.
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .kernels.base import inv_softplus

_F64 = torch.float64
#: SciPy's L-BFGS-B defaults (scikit-learn's GP uses them): relative decrease, projected
#: gradient.
FTOL = 2.220446049250313e-09
GTOL = 1e-5
#: Default bounds of every positive hyperparameter (scikit-learn's kernels').
BOUNDS = (1e-5, 1e5)
#: Exact learning on the CPU up to this many samples runs on one torch thread (as the GP).
SINGLE_THREAD_MAX_N = 1_000


def softplus_names(module) -> dict:
    """{id(raw parameter): readable name} of the module's learnable positive
    (softplus-parameterized) hyperparameters, e.g. ``base.lengthscale``."""
    out = {}
    for path, mod in module.named_modules():
        for name, kind in getattr(mod, "_hypers", {}).items():
            p = mod._parameters.get("raw_" + name)
            if kind == "softplus" and p is not None and p.requires_grad:
                out[id(p)] = f"{path}.{name}" if path else name
    return out


class Noise(nn.Module):
    """A learnable noise variance σ² = softplus(raw) > 0 (``value``), from ``start``: a
    positive hyperparameter like a kernel's, so that :func:`coordinates` optimizes it as
    log σ² within the bounds and names it ``noise``."""

    _hypers = {"noise": "softplus"}

    def __init__(self, start=1.0):
        super().__init__()
        self.raw_noise = nn.Parameter(inv_softplus(torch.tensor(float(start), dtype=_F64)))

    @property
    def value(self):
        return F.softplus(self.raw_noise)


def log_bounds(bounds, name="bounds"):
    """(log low, log high) of a (low, high) pair with 0 < low < high, or None."""
    if bounds is None:
        return None
    try:
        lo, hi = (float(b) for b in bounds)
    except (TypeError, ValueError):
        lo = hi = math.nan
    if not (0 < lo < hi < math.inf):
        raise ValueError(f"{name} must be None or a pair (low, high) with 0 < low < high, "
                         f"got {bounds!r}")
    return math.log(lo), math.log(hi)


def coordinates(items, log_bounds=None):
    """:class:`Coordinates` of ``items``: ``nn.Module``s (their parameters that require
    grad; the softplus-parameterized hyperparameters in log space) and tensors (raw)."""
    if isinstance(items, (nn.Module, torch.Tensor)):
        items = [items]
    params, names, positive, seen = [], [], [], set()
    try:
        items = list(items)
    except TypeError:
        raise TypeError(f"module_or_params must be an nn.Module or an iterable of modules "
                        f"and tensors, got {type(items).__name__}") from None
    for i, item in enumerate(items):
        if isinstance(item, nn.Module):
            soft = softplus_names(item)
            pairs = [(p, soft.get(id(p), name), id(p) in soft)
                     for name, p in item.named_parameters() if p.requires_grad]
        elif isinstance(item, torch.Tensor):
            pairs = [(item, f"param{i}", False)] if item.requires_grad else []
        else:
            raise TypeError(f"module_or_params must hold nn.Modules and tensors, got "
                            f"{type(item).__name__}")
        for p, name, pos in pairs:
            if id(p) not in seen:
                seen.add(id(p))
                params.append(p)
                names.append(name)
                positive.append(pos)
    if not params:
        raise ValueError("module_or_params holds no tensor that requires grad: nothing to fit")
    return Coordinates(params, names, positive, log_bounds)


class Coordinates:
    """The optimizer's view of the learnable parameters, flattened to one float64 vector
    θ: log v for a positive (softplus-parameterized) hyperparameter v, bounded by
    ``log_bounds`` (scikit-learn's parameterization), the raw value of any other parameter
    (unbounded)."""

    def __init__(self, params, names, positive, log_bounds):
        self.params, self.positive, self.log_bounds = params, positive, log_bounds
        self.sizes = [p.numel() for p in params]
        self.names = [f"{nm}[{i}]" if p.numel() > 1 else nm
                      for nm, p in zip(names, params) for i in range(p.numel())]
        self.mask = np.array([pos for pos, p in zip(positive, params)
                              for _ in range(p.numel())], dtype=bool)
        lo, hi = log_bounds if log_bounds is not None else (None, None)
        self.bounds = [(lo, hi) if m else (None, None) for m in self.mask]

    def get(self) -> np.ndarray:
        with torch.no_grad():
            return torch.cat([(F.softplus(p.to(_F64)).log() if pos else p.to(_F64))
                              .reshape(-1).cpu() for p, pos in zip(self.params, self.positive)]
                             ).numpy()

    def set(self, theta) -> None:
        with torch.no_grad():
            chunks = torch.as_tensor(np.asarray(theta, dtype=np.float64)).split(self.sizes)
            for p, pos, c in zip(self.params, self.positive, chunks):
                p.copy_((inv_softplus(c.exp()) if pos else c).reshape(p.shape))

    def grad(self, grads) -> np.ndarray:
        """∂/∂θ from the gradients in the raw parameters at the current point:
        ∂raw/∂log v = v / (1 − e^{−v}) for raw = softplus⁻¹(v)."""
        out = []
        for p, pos, d in zip(self.params, self.positive, grads):
            d = (torch.zeros_like(p) if d is None else d).detach().to(_F64).reshape(-1).cpu()
            if pos:
                v = F.softplus(p.detach().to(_F64).reshape(-1).cpu())
                d = d * v / -torch.expm1(-v)
            out.append(d)
        return torch.cat(out).numpy()

    def clip(self, theta) -> np.ndarray:
        theta = np.array(theta, dtype=np.float64)
        if self.log_bounds is not None:
            theta[self.mask] = np.clip(theta[self.mask], *self.log_bounds)
        return theta

    def draw(self, theta, generator) -> np.ndarray:
        """θ with every bounded entry drawn uniformly within the log bounds
        (scikit-learn's restarts); other entries kept."""
        theta = np.array(theta, dtype=np.float64)
        lo, hi = self.log_bounds
        u = torch.rand(int(self.mask.sum()), generator=generator, dtype=_F64).numpy()
        theta[self.mask] = lo + (hi - lo) * u
        return theta

    def projected_gradient_norm(self, theta, g) -> float:
        """max |entry| of the gradient projected on the box (L-BFGS-B's pgtol test)."""
        g = np.array(g, dtype=np.float64)
        if self.log_bounds is not None:
            lo, hi = self.log_bounds
            g[self.mask & (theta <= lo) & (g > 0)] = 0
            g[self.mask & (theta >= hi) & (g < 0)] = 0
        return float(np.abs(g).max()) if g.size else 0.0

    def at_bounds(self, theta) -> list:
        """(name, value, "lower"/"upper") of the bounded entries at a bound (within
        numpy.isclose's tolerance in log space, as scikit-learn checks)."""
        if self.log_bounds is None:
            return []
        out = []
        for name, t, m in zip(self.names, theta, self.mask):
            for side, b in zip(("lower", "upper"), self.log_bounds):
                if m and np.isclose(t, b):
                    out.append((name, math.exp(t), side))
        return out

    def describe(self, theta) -> str:
        return ", ".join(f"{name} = {math.exp(t) if m else t:.6g}"
                         for name, t, m in zip(self.names, theta, self.mask))


def best_of_runs(run, coords, start, n_restarts, random_state):
    """Runs ``run(theta0, label)`` (a dict as :func:`lbfgsb` returns, or None when the
    objective is not defined at θ0) from ``start`` and from ``n_restarts`` starts drawn by
    :meth:`Coordinates.draw` with ``random_state``; keeps the run of lowest ``f`` and sets
    the parameters to its end (scikit-learn's ``n_restarts_optimizer``).

    Returns
    -------
    (dict, list, int) or None
        The kept run (``start`` added: ``"the given start"`` or ``"restart i of k"``), the
        final value of every run (inf: a restart whose start was not defined) and the
        evaluations of all runs together; None when ``run`` fails at ``start``.
    """
    from ._validation import as_generator

    best = run(start, "")
    if best is None:
        return None
    best["start"] = "the given start"
    losses, evals = [best["f"]], best.get("nfev", 0)
    gen = as_generator(random_state) if n_restarts else None
    for i in range(n_restarts):
        res = run(coords.draw(start, gen), f", restart {i + 1}/{n_restarts}")
        losses.append(math.inf if res is None else res["f"])
        if res is not None:
            evals += res.get("nfev", 0)
            if res["f"] < best["f"]:
                best = dict(res, start=f"restart {i + 1} of {n_restarts}")
    coords.set(best["theta"])
    return best, losses, evals


def bound_report(coords, theta, bounds_name="bounds"):
    """The text of scikit-learn's degenerate-optimum warning — ``"name = v at its lower
    bound, ... (bounds = (lo, hi))"`` — or None when no bounded entry of θ is at a
    bound."""
    at = coords.at_bounds(theta)
    if not at:
        return None
    lo, hi = (math.exp(b) for b in coords.log_bounds)
    return (", ".join(f"{nm} = {v:.6g} at its {side} bound" for nm, v, side in at)
            + f" ({bounds_name} = ({lo:g}, {hi:g}))")


def lbfgsb(coords, theta0, evaluate, *, max_iter, ftol=FTOL, gtol=GTOL, scale=1.0,
           on_step=None, leave_plateau=False):
    r"""One L-BFGS-B run from θ0 on ``evaluate()`` (a 0-d tensor at the parameters
    ``coords`` holds) in :class:`Coordinates`, in float64.

    A trial point where ``evaluate`` raises ``ValueError`` (a Gram matrix that is not
    positive definite) or returns a non-finite value counts as +inf, so the line search
    backtracks. ``leave_plateau``: a start whose projected gradient is already below
    ``gtol`` (SciPy would stop at once) is probed by steps of 1, 2, 4, 8 both ways along
    the gradient's line in θ (the length of L-BFGS-B's own first step, then doublings)
    while the objective falls by more than ``ftol`` relatively; when it fell, the start
    was a plateau (a lengthscale far below the data's distances: the Gram matrix is the
    identity to rounding, and the sign of a 1e-12 gradient is not to be trusted), and
    L-BFGS-B goes on from the lowest probe. L-BFGS-B's own BLAS work (on vectors of θ's
    length) runs on one thread: on a busy machine OpenBLAS's threads only wait.

    Returns
    -------
    dict or None
        ``f`` (the final value), ``theta``, ``history`` (``scale`` · the value at the
        start and after each iteration), ``nit``, ``nfev``, ``converged``, ``message``,
        ``status`` (SciPy's: 0 converged, 1 ``max_iter`` reached, 2 other — a failed line
        search), ``pg`` (the largest projected-gradient entry), ``change`` (the relative
        decrease of the last iteration), ``plateau`` (probe steps taken) and ``flat`` (a
        start where the objective is level to rounding, left nowhere); None when
        ``evaluate`` raises ``ValueError`` or is not finite at θ0.
    """
    from scipy.optimize import minimize
    from threadpoolctl import threadpool_limits

    last, count = {}, [0]

    def fun(theta):
        if "theta" in last and np.array_equal(theta, last["theta"]):
            return last["f"], last["g"]  # SciPy's first call repeats x0
        coords.set(theta)
        count[0] += 1
        with torch.enable_grad():
            try:
                value = evaluate()
            except ValueError:  # not positive definite at this trial point
                if not last:
                    raise
                return math.inf, np.zeros_like(theta)
            f = float(value.detach())
            if not math.isfinite(f):
                return math.inf, np.zeros_like(theta)
            grads = torch.autograd.grad(value, coords.params, allow_unused=True)
        last.update(theta=np.array(theta), f=f, g=coords.grad(grads))
        return last["f"], last["g"]

    try:
        f0, g0 = fun(np.array(theta0, dtype=np.float64))
    except ValueError:
        return None
    if not math.isfinite(f0):
        return None
    history = [f0 * scale]

    def step(theta):
        history.append(last["f"] * scale)
        if on_step is not None:
            on_step(history[-1])

    start, probes, flat, stopped = np.array(theta0, dtype=np.float64), 0, False, False
    pg0 = coords.projected_gradient_norm(start, g0)
    if leave_plateau and pg0 <= gtol and max_iter > 0:
        flat = pg0 == 0  # no direction to probe
        if pg0 > 0:  # the gradient is rounding-level: probe both ways along its line
            direction = -np.array(g0) / np.linalg.norm(g0)
            best, f_best, g_best, level = start, f0, g0, True
            for length in (1.0, 2.0, 4.0, 8.0):
                improved = False
                for sign in (1.0, -1.0):
                    trial = coords.clip(start + sign * length * direction)
                    f, g = fun(trial)
                    tol = ftol * max(abs(f0), abs(f), 1.0)
                    level = level and abs(f - f0) <= tol
                    if f < f_best - tol:
                        best, f_best, g_best, improved = trial, f, g, True
                if not improved:
                    break
                probes += 1
                history.append(f_best * scale)
                if on_step is not None:
                    try:
                        on_step(history[-1])
                    except StopIteration:  # on_step's way to stop, as in SciPy's callback
                        stopped = True
                        break
                if coords.projected_gradient_norm(best, g_best) > gtol:
                    break
            flat = probes == 0 and level  # a minimum rises both ways; a plateau is level
            start = best
            fun(start)  # last = the start of the L-BFGS-B run
    with threadpool_limits(1, user_api="blas"):
        res = minimize(fun, start, jac=True, method="L-BFGS-B", callback=step,
                       bounds=coords.bounds,
                       options=dict(maxiter=0 if stopped else max(max_iter - probes, 0),
                                    ftol=ftol, gtol=gtol))
    coords.set(res.x)
    f = float(res.fun)
    prev = history[-2] / scale if len(history) > 1 else f0
    change = (prev - f) / max(abs(prev), abs(f), 1.0)
    message = res.message.decode() if isinstance(res.message, bytes) else str(res.message)
    flat = flat and int(res.nit) == 0
    return dict(f=f, theta=np.array(res.x), history=history, nit=int(res.nit) + probes,
                nfev=count[0], converged=bool(res.success) and not flat, status=int(res.status),
                message=message, pg=coords.projected_gradient_norm(res.x, res.jac),
                change=change, plateau=probes, flat=flat)


def torch_optim(coords, evaluate, optimizer, *, max_iter, tol=1e-6, patience=10,
                gtol=GTOL, scale=1.0, on_step=None, callback=None, final_value=True):
    r"""Steps of a ``torch.optim`` optimizer (``optimizer(params)`` builds it) on the raw
    parameters, each one ``opt.step(closure)``, projected on ``coords``' bounds after each
    step. Stops after ``max_iter`` steps, when the best loss has improved by less than
    ``tol`` · max(1, |best|) over ``patience`` steps, when the loss is not finite (the best
    parameters seen are restored), or when ``callback(step, loss)`` returns True.

    Small progress is not convergence when the steps are small (a tiny ``lr``): a
    ``patience`` stop counts as converged when the loss rose at some step of the window
    (the optimizer overshoots: it is at the optimum to the resolution of its steps) or the
    largest projected-gradient entry in θ where the parameters are left is at most
    ``gtol``; a loss that fell at every step with a larger gradient is a stall (status 4).

    Returns the dict of :func:`lbfgsb` (``converged``: as above; ``change``: the relative
    decrease over the last tenth of the steps; ``f``: one more evaluation where the
    parameters are left, NaN when not ``final_value``; ``pg``: the projected gradient
    there after a ``patience`` stop, else NaN); None when ``evaluate`` raises
    ``ValueError`` at the first step.
    """
    opt = optimizer(coords.params)
    if not isinstance(opt, torch.optim.Optimizer):
        raise TypeError(f"optimizer(params) must return a torch.optim.Optimizer, got "
                        f"{type(opt).__name__}")
    history, best, since = [], math.inf, 0
    count, state = [0], {}

    def closure():
        opt.zero_grad()
        count[0] += 1
        value = evaluate()
        if not isinstance(value, torch.Tensor) or value.numel() != 1:
            raise TypeError("the objective must return a 0-d tensor")
        f = float(value.detach())
        if math.isfinite(f) and f < state.get("best", math.inf):
            state.update(best=f, params=[p.detach().clone() for p in coords.params])
        value.backward()
        return value

    status, message = 1, f"max_iter = {max_iter} steps reached"
    with torch.enable_grad():
        for i in range(max_iter):
            try:
                loss = float(opt.step(closure).detach()) * scale
            except ValueError:
                if i == 0:
                    return None
                raise
            theta = coords.get()
            if not np.array_equal(coords.clip(theta), theta):  # project on the box
                coords.set(coords.clip(theta))
            history.append(loss)
            if on_step is not None:
                on_step(loss)
            if not math.isfinite(loss):
                status, message = 2, f"the objective became {loss} (best parameters restored)"
                break
            if loss < best - tol * max(1.0, abs(best)) or not math.isfinite(best):
                since = 0
            else:
                since += 1
            best = min(best, loss)
            if callback is not None and callback(i, loss):
                status, message = 3, "stopped by callback"
                break
            if patience is not None and since >= patience:
                status, message = 0, (f"no relative improvement above tol = {tol:g} over "
                                      f"{patience} steps")
                break
    if status == 2 and "params" in state:
        with torch.no_grad():
            for p, v in zip(coords.params, state["params"]):
                p.copy_(v)
    theta, pg = coords.get(), math.nan
    if status == 2:
        f = state.get("best", math.inf)
    elif not final_value:
        f = math.nan
    else:  # the value where the parameters are left (the history is before each step)
        with torch.set_grad_enabled(status == 0):
            value = evaluate()
            f = float(value.detach())
            if status == 0:
                grads = torch.autograd.grad(value, coords.params, allow_unused=True)
                pg = coords.projected_gradient_norm(theta, coords.grad(grads))
    if status == 0 and final_value:
        window = history[-patience:] + [f * scale]
        if all(b < a for a, b in zip(window, window[1:])) and not pg <= gtol:
            status, message = 4, (f"{message}, but the objective fell at each of them and "
                                  f"the largest projected gradient entry is {pg:.2e} > gtol "
                                  f"= {gtol:g} (log-hyperparameters): a stall (steps too "
                                  f"small), not an optimum")
    tail = max(1, len(history) // 10)
    change = 0.0
    if len(history) > tail:
        a, b = history[-tail - 1] / scale, history[-1] / scale
        change = (a - b) / max(abs(a), abs(b), 1.0) if math.isfinite(a - b) else math.nan
    return dict(f=f, theta=theta, history=history, nit=len(history), nfev=count[0],
                converged=status == 0, status=status, message=message, pg=pg,
                change=change, plateau=0, flat=False)
