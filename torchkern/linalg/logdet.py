"""Log-determinants and traces: exact Cholesky, stochastic Lanczos quadrature, Hutchinson."""

import math
import warnings
from typing import NamedTuple, Optional

import torch

from .._validation import check_int, check_positive, is_int
from ._common import (
    ConvergenceWarning,
    _check_operator,
    _check_preconditioner,
    _check_rhs,
    _check_symmetric,
    _col_norms,
    _dense,
    _eigh,
    _generator,
    _has_dense,
    _inner,
    _maybe_requires_grad,
    _own,
    _rademacher,
    one_thread,
    _reduce,
    _rows,
    _sharded,
)
from .cg import _identity, _pcg, _warn_not_converged

_FLOAT64 = torch.float64
_EXACT_MAX_N = 3000


def _exact_cholesky(A):
    dense = _dense(A)
    if dense is None:
        raise TypeError(f"method='exact' needs A as a tensor or with to_dense(), got {type(A).__name__}")
    L, info = torch.linalg.cholesky_ex(dense.to(_FLOAT64))
    if int(info) != 0:
        raise ValueError("A is not positive definite: its Cholesky factorization failed")
    return L


def _choose_method(A, n, method):
    if method not in ("auto", "exact", "slq"):
        raise ValueError(f"method must be 'auto', 'exact' or 'slq', got {method!r}")
    if method == "auto":
        return "exact" if n <= _EXACT_MAX_N and _has_dense(A) else "slq"
    return method


def _check_count(value, name):
    if not is_int(value) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")


# Gauss quadrature error control: the first check after this many steps, then every
# _CHECK_EVERY steps (each check is p eigendecompositions of order m + 1).
_FIRST_CHECK = 10
_CHECK_EVERY = 10
DEFAULT_LANCZOS_TOL = 1e-3
# CPU Lanczos processes on vectors of at most this many rows run on one torch thread.
_ONE_THREAD_MAX_ROWS = 1000


class _QuadratureInfo(NamedTuple):
    """How far the Lanczos quadrature of :func:`logdet` went."""

    steps: int
    error: float      # estimated |bias| of n·mean(quadratures), on the log-det scale
    scale: float      # n·mean(e₁ᵀ|log T|e₁): the estimate of tr|log A|
    converged: bool
    rate: float       # error reduction per step over the last checks (nan if unknown)
    cond: float = 1.0       # θ_max/θ_min over the checked processes: a lower bound of κ(A)
    rounding: float = 0.0   # n·ε·θ_max·mean(e₁ᵀT⁻¹e₁): first-order rounding error bound
    bound: float = 0.0      # the bias bound with a Radau node at ε·θ_max (at the cap only)


# A Monte-Carlo standard error above this fraction of what the caller needs (tr|log A|
# for the value, the gradient's norm for the gradient) is worth a warning. Measured at
# p = 30 Rademacher probes: on RBF Grams of 300 points on a line the value's is 0.35 %
# of |log det A| at noise 1e-2 and at 1e-10 alike, the lengthscale gradient's 17 % at
# noise 1e-2 and 54 % at 1e-10 (condition 1e12); 1.2 % for 500 points in 3-D, ℓ = 0.5,
# noise 1e-2 (unbiased, and within the usual use of SLQ).
_VALUE_NOISE = 0.05
_GRAD_NOISE = 0.25


class LogdetInfo(NamedTuple):
    r"""What :func:`logdet` and :func:`inv_quad_logdet` report with ``return_info=True``.

    Attributes
    ----------
    std_error : float
        Monte-Carlo standard error of the log-determinant from the spread of the p probes'
        quadratures: :math:`n\,\mathrm{sd}(q_1..q_p)/\sqrt p` (0.0 for ``"exact"``, inf
        for one probe). The quadrature bias (``quadrature_error``) comes on top.
    num_probes : int
        p (0 for ``"exact"``).
    steps : int
        Lanczos steps taken per probe (0 for ``"exact"``).
    quadrature_error : float
        Estimated bias of the Lanczos quadrature on the log-determinant.
    converged : bool
        Whether the quadrature reached ``lanczos_tol`` within ``lanczos_steps``.
    probe_terms : torch.Tensor or None
        The p per-probe gradient surrogates :math:`w_i^\top A z_i` (w_i = A⁻¹z_i
        detached), whose mean's gradient is the log-determinant's; None without a
        gradient (or for ``"exact"``). :meth:`grad_std_error` uses them.
    """

    std_error: float
    num_probes: int = 0
    steps: int = 0
    quadrature_error: float = 0.0
    converged: bool = True
    probe_terms: Optional[torch.Tensor] = None

    def grad_std_error(self, inputs):
        """Monte-Carlo standard error of the SLQ log-determinant's gradient with respect
        to ``inputs`` (a tensor or a sequence of them, as for ``torch.autograd.grad``):
        the spread of the p per-probe Hutchinson gradients divided by √p. Costs p
        backward passes (the graph is kept). Warns with a :class:`ConvergenceWarning`
        when, for an input, the standard error's norm exceeds a quarter of the gradient's
        (an RBF Gram of condition 10¹² at p = 30: 54 %). Zeros for ``"exact"``.

        Returns
        -------
        tuple of torch.Tensor
            One per input, of its shape.
        """
        single = isinstance(inputs, torch.Tensor)
        inputs = (inputs,) if single else tuple(inputs)
        if self.num_probes == 0:
            return tuple(torch.zeros_like(x) for x in inputs)
        if self.probe_terms is None:
            raise ValueError("grad_std_error: this estimate has no gradient path; call "
                             "logdet with grad enabled and A depending on the inputs")
        p = self.num_probes
        per = [torch.autograd.grad(t, inputs, retain_graph=True, allow_unused=True)
               for t in self.probe_terms]
        out = []
        for j, x in enumerate(inputs):
            G = torch.stack([torch.zeros_like(x) if g[j] is None else g[j] for g in per])
            se, mean = G.std(0) / math.sqrt(p), G.mean(0)
            size = float(mean.norm())
            if float(se.norm()) > _GRAD_NOISE * size:
                rel = float(se.norm()) / size if size > 0 else math.inf
                warnings.warn(
                    f"logdet (slq): the Hutchinson gradient's standard error is "
                    f"{rel:.2g} of its size (input {j}, num_probes={p}): the gradient "
                    f"can be off by that much; raise num_probes, or pass a whitening "
                    f"preconditioner", ConvergenceWarning, stacklevel=2)
            out.append(se)
        return tuple(out)


def _std_error(quad, n):
    """n·sd(quadratures)/√p: the Monte-Carlo standard error of n·mean(quadratures)."""
    p = quad.shape[0]
    return float(n * quad.std() / math.sqrt(p)) if p > 1 else math.inf


def _warn_noise(info, scale, what):
    """A ConvergenceWarning when the probes' standard error of the log-determinant
    exceeds _VALUE_NOISE of ``scale`` (tr|log A|)."""
    if info.std_error <= _VALUE_NOISE * scale or info.num_probes < 2:
        return  # one probe has no spread to measure (std_error = inf)
    rel = info.std_error / scale if scale > 0 else math.inf
    warnings.warn(
        f"{what}: the Monte-Carlo standard error of the estimate is {info.std_error:.3g} "
        f"({rel:.1e} of tr|log A| ≈ {scale:.4g}) with num_probes={info.num_probes}: raise "
        f"num_probes (the error falls as 1/√p), or pass a whitening preconditioner",
        ConvergenceWarning, stacklevel=3)


def _mask(check, p, device):
    m = torch.zeros(p, dtype=torch.bool, device=device)
    m[check] = True
    return m


def _tridiagonals(alpha, beta, k, dtype):
    """(p, k, k) Lanczos tridiagonals after k steps, the part past an invariant Krylov
    space (β ≈ 0) replaced by the identity (e₁ has no weight there), and the mask of the
    columns whose space became invariant within k steps."""
    a, b = alpha[:k], beta[:k]
    scale = a.abs().amax(dim=0)
    tiny = b <= 1e2 * torch.finfo(dtype).eps * scale
    alive = torch.ones_like(tiny)
    alive[1:] = torch.cumprod(~tiny[:-1], dim=0).bool()
    diag = torch.where(alive, a, torch.ones_like(a)).T
    off = torch.where(alive[1:], b[:-1], torch.zeros_like(b[:-1])).T
    T = torch.diag_embed(diag) + torch.diag_embed(off, 1) + torch.diag_embed(off, -1)
    return T, (tiny & alive).any(dim=0)


def _gauss(T):
    """Per column e₁ᵀ log(T) e₁, e₁ᵀ |log T| e₁, e₁ᵀ T⁻¹ e₁ and the smallest and largest
    Ritz values."""
    theta, Y = _eigh(T)
    w = Y[:, 0, :] ** 2
    live = torch.where(w > 0, theta, torch.ones_like(theta))
    if not bool((live > 0).all()):
        low = float(live.min())
        raise ValueError(f"A is not positive definite: Lanczos found a non-positive Ritz "
                         f"value ({low:.3g}, largest {float(theta.max()):.3g}). In float32 "
                         f"a matrix whose smallest eigenvalue is below about 1e-7 of its "
                         f"largest (a kernel matrix with a small noise or jitter) is not "
                         f"positive definite to working precision: use float64 data, or a "
                         f"larger noise")
    logt = theta.clamp(min=torch.finfo(_FLOAT64).tiny).log()
    inv = (w / live).sum(1)
    return (w * logt).sum(1), (w * logt.abs()).sum(1), inv, theta[:, 0], theta[:, -1]


def _radau(T, b_last, a):
    """Per column e₁ᵀ log(T̂) e₁ for the Gauss–Radau rule with a node fixed at a < θ_min:
    T̂ is T extended by one row so that a is one of its eigenvalues (Golub and Meurant
    2010, ch. 6): α̂ = a + δ_k with (T − aI)δ = β_k² e_k."""
    p, k, _ = T.shape
    eye = torch.eye(k, dtype=T.dtype, device=T.device)
    rhs = torch.zeros(p, k, 1, dtype=T.dtype, device=T.device)
    rhs[:, -1, 0] = b_last ** 2
    delta = torch.linalg.solve(T - a * eye, rhs)[:, -1, 0]
    Te = torch.zeros(p, k + 1, k + 1, dtype=T.dtype, device=T.device)
    Te[:, :k, :k] = T
    Te[:, k, k - 1] = Te[:, k - 1, k] = b_last
    Te[:, k, k] = a + delta
    theta, Y = _eigh(Te)
    return (Y[:, 0, :] ** 2 * theta.clamp(min=torch.finfo(_FLOAT64).tiny).log()).sum(1)


def _lanczos_quadrature(A, Q0, AQ0, steps, n, tol=DEFAULT_LANCZOS_TOL, check=None):
    """:func:`_quadrature` on one torch thread for CPU vectors of at most
    ``_ONE_THREAD_MAX_ROWS`` rows: its steps are short batched GEMVs (reorthogonalization)
    and small products, which threads slow down on a busy machine (n = 500, 10 probes,
    120 steps: 6.1 s on 2 threads, 0.87 s on 1, load 5 on 2 cores)."""
    small = Q0.device.type == "cpu" and Q0.shape[0] <= _ONE_THREAD_MAX_ROWS
    with one_thread(small):
        return _quadrature(A, Q0, AQ0, steps, n, tol, check)


def _quadrature(A, Q0, AQ0, steps, n, tol, check):
    """Per-column Gauss quadratures e₁ᵀ log(T_m) e₁ for the block Q0 of unit columns.

    Runs one Lanczos process per column of Q0 (all in one product A @ Q per step), with
    full reorthogonalization against the stored basis, for at most ``steps`` steps. ``AQ0``
    is A @ Q0, already known; n is A's order (Q0 holds this process's rows of the vectors
    when A is sharded). ``check`` (a boolean mask or slice of the columns, default all)
    selects the columns whose mean n·mean(quadrature) is the estimate: every
    ``_CHECK_EVERY`` steps its quadrature error is estimated by the gap between the Gauss
    and the Gauss–Radau rules (see :func:`logdet`), and the process stops once that is
    ≤ tol times the estimate of tr|log A|. Returns (quadratures of shape (p,) in float64,
    _QuadratureInfo).
    """
    rows, p = Q0.shape
    cap = min(steps, n)
    check = slice(None) if check is None else check
    dtype = Q0.dtype
    # chunks[c][i, j] is Lanczos vector c·_CHECK_EVERY + j of column i (batched GEMVs
    # reorthogonalize); chunks are added as the process goes, so one that converges early
    # never holds the cap's memory, and nothing is copied
    chunks = []
    alpha = torch.zeros(cap, p, dtype=_FLOAT64, device=Q0.device)
    beta = torch.zeros(cap, p, dtype=_FLOAT64, device=Q0.device)
    q, w = Q0, AQ0
    history = []
    info = None
    prev = None
    for j in range(cap):
        c, i = divmod(j, _CHECK_EVERY)
        if i == 0:
            chunks.append(torch.empty(p, min(_CHECK_EVERY, cap - j), rows, dtype=dtype,
                                      device=Q0.device))
        chunks[c][:, i] = q.T
        if j > 0:
            w = A @ q
        a = _inner(A, q, w)
        alpha[j] = a
        w = w - a.to(dtype) * q
        if j > 0:
            w = w - beta[j - 1].to(dtype) * prev
        prev = q
        blocks = chunks[:-1] + [chunks[-1][:, : i + 1]]
        wt = w.T.unsqueeze(-1)
        for _ in range(2):  # classical Gram–Schmidt twice, one reduction per pass
            coef = _reduce(A, torch.cat([V @ wt for V in blocks], dim=1))
            at = 0
            for V in blocks:
                wt = wt - V.transpose(1, 2) @ coef[:, at:at + V.shape[1]]
                at += V.shape[1]
        w = wt.squeeze(-1).T
        b = _col_norms(A, w)
        beta[j] = b
        q = w / torch.where(b > 0, b, torch.ones_like(b)).to(dtype)
        k = j + 1
        if k == cap or (k >= _FIRST_CHECK and (k - _FIRST_CHECK) % _CHECK_EVERY == 0):
            T, done = _tridiagonals(alpha, beta, k, dtype)
            gauss, absq, inv, theta_min, theta_max = _gauss(T)
            if k == n:
                done = torch.ones_like(done)
            open_ = ~done
            open_[~_mask(check, p, open_.device)] = False

            def gap(node):  # n·mean(Gauss − Gauss–Radau with a node at `node`)
                g = torch.zeros_like(gauss)
                if bool(open_.any()):
                    radau = _radau(T[open_], beta[k - 1, open_], node)
                    g[open_] = (gauss[open_] - radau).clamp(min=0)
                return n * float(g[check].mean())

            # Node a: half the smallest Ritz value of the processes (≤ λ_min(A) once one
            # has come within a factor 2 of it; then Radau ≤ quadrature ≤ Gauss).
            error = gap(0.5 * float(theta_min[open_].amin())) if bool(open_.any()) else 0.0
            scale = n * float(absq[check].mean())
            history.append((k, error))
            rate = float("nan")
            if len(history) > 1 and history[-2][1] > 0 and error > 0:
                rate = (error / history[-2][1]) ** (1.0 / (k - history[-2][0]))
            # Products and the recurrence in A's dtype perturb A by about ε‖A‖, which moves
            # log det A by up to ε‖A‖·tr(A⁻¹) (first order; tr A⁻¹ by the same quadrature)
            top = float(theta_max[check].amax())
            low = float(theta_min[check].amin())
            cond = top / low if low > 0 else math.inf
            rounding = n * torch.finfo(dtype).eps * top * float(inv[check].mean())
            info = _QuadratureInfo(k, error, scale, error <= tol * scale, rate, cond, rounding)
            if info.converged or bool(done[check].all()):
                return gauss, info._replace(converged=True)
    # Stopped at the cap: while the smallest Ritz value is still falling the node above
    # can lie over λ_min(A), and `error` then understates the bias (5× on a spectrum
    # 1e-12…1). A node at the rounding floor ε·θ_max lies below the spectrum of any A
    # that is positive definite to working precision, so that Radau gap is a bound.
    if bool(open_.any()):
        info = info._replace(bound=gap(torch.finfo(dtype).eps * top))
    return gauss, info


def _warn_quadrature(info, tol, lanczos_steps, what):
    """A ConvergenceWarning for a Lanczos quadrature stopped at its step cap."""
    if info.converged:
        return
    rel = info.error / info.scale if info.scale > 0 else float("inf")
    hint = ""
    if info.rate == info.rate and 0 < info.rate < 1:  # geometric extrapolation
        more = math.log(tol * info.scale / info.error) / math.log(info.rate)
        hint = f" (about {int(math.ceil(info.steps + more))} at the rate seen)"
    warnings.warn(
        f"{what}: the Lanczos quadrature did not converge in lanczos_steps={lanczos_steps} "
        f"steps: its estimated error is {info.error:.3g} on the log-determinant "
        f"({rel:.1e} of tr|log A| ≈ {info.scale:.4g}) > lanczos_tol={tol:.1e}, at most "
        f"{max(info.bound, info.error):.3g} (Gauss–Radau with a node at the rounding floor "
        f"eps·‖A‖, below every eigenvalue the dtype resolves) — a bias (the estimate is "
        f"too high), on top of the probes' noise; raise "
        f"lanczos_steps{hint}, or pass a preconditioner (whitening clusters the spectrum "
        "near 1)", ConvergenceWarning, stacklevel=3)


# Ritz values spanning more than _UNRESOLVED / ε: the smallest eigenvalues are within a
# factor 4 of the rounding of products in A's dtype (ε‖A‖), where the Lanczos quadrature
# no longer resolves them. Measured, float32, same probes as float64: κ(A) = 1e6 moved
# the estimate by 2e-4 of log det A, κ = 1e7 by 1e-2 (RBF Gram of 1000 points + noise).
_UNRESOLVED = 0.25


def _warn_rounding(info, tol, dtype, what):
    """A ConvergenceWarning when A's smallest eigenvalues are at the rounding level of
    Lanczos in ``dtype`` and the first-order rounding bound exceeds the tolerance."""
    eps = torch.finfo(dtype).eps
    if info.cond < _UNRESOLVED / eps or info.rounding <= tol * info.scale:
        return
    rel = info.rounding / info.scale if info.scale > 0 else float("inf")
    dt = str(dtype).replace("torch.", "")
    warnings.warn(
        f"{what}: A's eigenvalues span at least {info.cond:.2g} (largest/smallest Ritz "
        f"value), more than {dt} resolves ({_UNRESOLVED:g}/eps = {_UNRESOLVED / eps:.2g}): "
        f"products in {dt} move the small eigenvalues by about their own size, and the "
        f"estimate can be off by up to about {info.rounding:.3g} on the log-determinant "
        f"({rel:.1e} of tr|log A|; eps·‖A‖·tr A⁻¹), more where A has eigenvalues below "
        f"eps·‖A‖; use float64, a larger noise or jitter, method='exact' (a float64 "
        "Cholesky factor), or a whitening preconditioner", ConvergenceWarning, stacklevel=3)


class _Whitened:
    """B = Sᵀ A S, S Sᵀ = M⁻¹: S = M.inv_sqrt (M^{-1/2}), Sᵀ = M.inv_sqrt_t where M has it."""

    def __init__(self, A, M):
        self.A, self.M = A, M
        self.shape, self.dtype, self.device = A.shape, A.dtype, A.device

    def __matmul__(self, V):
        return getattr(self.M, "inv_sqrt_t", self.M.inv_sqrt)(self.A @ self.M.inv_sqrt(V))


def _whitens(preconditioner):
    return callable(getattr(preconditioner, "inv_sqrt", None)) and \
        callable(getattr(preconditioner, "logdet", None))


def _slq_logdet(A, n, num_probes, lanczos_steps, lanczos_tol, generator, preconditioner,
                cg_tol, cg_max_iter):
    """(SLQ estimate of log det A, the _QuadratureInfo of its Lanczos processes, its
    LogdetInfo, the scale tr|log A| its noise is judged on)."""
    if _whitens(preconditioner):
        if _sharded(A):
            raise ValueError("logdet: a whitening preconditioner is not supported on a "
                             "row-sharded A (its square root needs a distributed QR); "
                             "pass preconditioner=None")
        # log det A = log det M + log det(M^{-1/2} A M^{-1/2}); M is held fixed, so the
        # gradient is the SLQ surrogate's on the whitened operator, tr(A⁻¹ ∂A).
        B = _Whitened(A, preconditioner)
        ld, info, report, scale = _slq_logdet(B, n, num_probes, lanczos_steps, lanczos_tol,
                                              generator, None, cg_tol, cg_max_iter)
        ld_m = preconditioner.logdet().to(ld.dtype)
        # the noise is judged on all of log det A, not only on the whitened part
        return ld + ld_m, info, report, scale + abs(float(ld_m))
    Z = _own(A, _rademacher((n, num_probes), A.dtype, torch.device(A.device), generator))
    grad_possible = torch.is_grad_enabled() and _maybe_requires_grad(A) is not False
    AZ = A @ Z if grad_possible else None
    with torch.no_grad():
        AZ0 = AZ.detach() if AZ is not None else A @ Z
        scale = math.sqrt(n)
        quad, info = _lanczos_quadrature(A, Z / scale, AZ0 / scale, lanczos_steps, n,
                                         lanczos_tol)
        estimate = n * quad.mean()
    value = estimate.to(A.dtype)
    terms = None
    if AZ is not None and AZ.requires_grad:
        # Gradient surrogate: d/dθ mean_i (A⁻¹z_i)ᵀ A z_i = Hutchinson tr(A⁻¹ dA/dθ).
        with torch.no_grad():
            W, cg_info = _pcg(A, Z, preconditioner or _identity, cg_tol, cg_max_iter)
        _warn_not_converged(cg_info, cg_tol, "logdet (cg solves for the gradient)")
        # On a sharded A this is each process's share: the surrogate's value is 0 and the
        # hyperparameter gradients are summed over the processes by the sharded products.
        terms = (W * AZ).sum(0)
        s = terms.sum() / num_probes
        value = value + (s - s.detach())
    report = LogdetInfo(_std_error(quad, n), num_probes, info.steps, info.error,
                        info.converged, terms)
    return value, info, report, info.scale


def logdet(
    A,
    *,
    method="auto",
    num_probes=30,
    lanczos_steps=100,
    lanczos_tol=DEFAULT_LANCZOS_TOL,
    preconditioner=None,
    cg_tol=1e-4,
    cg_max_iter=None,
    random_state=None,
    return_info=False,
):
    r"""log det A of a symmetric positive definite matrix or operator.

    ``"exact"``: :math:`2\sum_i \log L_{ii}` from a float64 Cholesky factor of the dense
    A (``A`` itself or ``A.to_dense()``), O(n³) time and O(n²) memory.

    ``"slq"``: stochastic Lanczos quadrature. With p Rademacher probes z_i,
    :math:`\log\det A = \mathrm{tr}\log A \approx \frac{n}{p}\sum_i e_1^\top \log(T_i) e_1
    = \frac{n}{p}\sum_i\sum_j \tau_{ij}^2 \log\theta_{ij}`, where T_i is the m × m Lanczos
    tridiagonal started from z_i/√n, θ its eigenvalues and τ the first components of its
    eigenvectors (Gauss quadrature of z_iᵀ log(A) z_i). Its gradient is taken through the
    surrogate :math:`s = \frac1p\sum_i (A^{-1}z_i)^\top (A z_i)` with the solve detached,
    whose gradient :math:`\frac1p\sum_i (A^{-1}z_i)^\top \frac{\partial A}{\partial\theta} z_i`
    is the Hutchinson estimate of :math:`\mathrm{tr}(A^{-1}\partial A/\partial\theta)` —
    one batched CG solve, only when a gradient is needed.

    The estimate has two errors. The probes' (Hutchinson) error is statistical: zero mean,
    standard error ∝ 1/√p. The quadrature error is a bias: the m-point Gauss rule
    overestimates every zᵀ log(A) z (log has negative even derivatives; Golub and Meurant
    2010, Thm 6.3), by an amount that decays geometrically in m at a rate set by the
    condition number — an RBF Gram matrix + 10⁻² I of order 2000 is still 7 % off after
    m = 20 steps. It is controlled: every 10 steps (from step 10) the gap between the Gauss
    rule and the Gauss–Radau rule with a node at half the smallest Ritz value of all
    probes estimates it (a bound when that node is below λ_min(A), as it is near
    convergence; while the smallest Ritz value is far above λ_min the estimate can be
    several times too small, but then it exceeds the tolerance anyway: on seven test
    spectra, condition numbers up to 10⁸, no stop left a bias above the tolerance); SLQ
    stops once this bound, summed as in the estimate, is at most
    ``lanczos_tol`` times the estimate of ``tr|log A|`` (= ``|log det A|`` when all eigenvalues
    lie on one side of 1), and warns with a :class:`ConvergenceWarning` (the bound, and
    the number of steps that would reach ``lanczos_tol`` at the rate seen) when
    ``lanczos_steps`` run out first. That warning also gives the Gauss–Radau gap with a
    node at the rounding floor ε‖A‖, a bound whatever A's smallest eigenvalue (on a
    spectrum 10⁻¹²…1 the half-Ritz-value estimate was 36 against a bias of 190).

    Rounding sets a floor: products and the recurrence in A's dtype perturb A by about
    ε‖A‖ (ε = ``torch.finfo(A.dtype).eps``), which moves log det A by up to
    ε‖A‖·tr A⁻¹, and eigenvalues near ε‖A‖ are not resolved at all. When the Ritz values
    span more than 0.25/ε (2·10⁶ in float32, 10¹⁵ in float64) and that bound exceeds
    ``lanczos_tol`` of ``tr|log A|``, a :class:`ConvergenceWarning` gives it (float32, RBF
    Gram of 1000 points with κ = 10⁷: 1.2 % off, bound 11 %; float32 is 0.03 % off at
    κ = 10⁶). ``"exact"`` factors in float64 and has no such floor.

    ``"auto"``: exact when n ≤ 3000 and A is a tensor or has ``to_dense()``, else SLQ.

    Parameters
    ----------
    A : torch.Tensor or operator
        Symmetric positive definite (n, n), a tensor or anything with ``shape``,
        ``dtype``, ``device`` and ``@`` (and ``to_dense()`` for ``"exact"``).
    method : {"auto", "exact", "slq"}
    num_probes : int
        p, the number of Rademacher probes (SLQ). The standard error decreases as 1/√p.
    lanczos_steps : int
        The most Lanczos steps m per probe (SLQ); fewer when the quadrature converges
        first. A ConvergenceWarning says when they were not enough.
    lanczos_tol : float
        Bound on the quadrature error (the bias) relative to ``tr|log A|`` (SLQ): 1e-3, below
        the probes' relative standard error at p = 30 on kernel matrices. Whitened by a
        preconditioner, this is relative to ``tr|log(M^{-1/2} A M^{-1/2})|``, the part SLQ
        estimates.
    preconditioner : optional
        A low-rank-plus-ridge preconditioner M ≈ A (:class:`PivotedCholesky`,
        :class:`NystromPreconditioner`, or anything with ``inv_sqrt(V)`` and
        ``logdet()``): SLQ then runs on the whitened M^{-1/2} A M^{-1/2}, whose spectrum is
        clustered near 1, and adds log det M exactly — the Hutchinson variance drops by
        orders of magnitude (the preconditioned log-determinant of Gardner et al. 2018).
        Any other callable (R ↦ M⁻¹R) only preconditions the CG solves of the gradient.
    cg_tol : float
        Relative residual of those solves.
    cg_max_iter : int, optional
        Iteration cap of those solves (default and 0 as in :func:`cg`).
    random_state : None, int or torch.Generator
        Probes.
    return_info : bool
        Also return a :class:`LogdetInfo`: the probes' standard error of the value, the
        quadrature's steps and bias, and (:meth:`LogdetInfo.grad_std_error`) the
        standard error of the gradient.

    Returns
    -------
    torch.Tensor
        0-d tensor in A's dtype, differentiable with respect to what A depends on.
    info : LogdetInfo
        Only when ``return_info=True``.

    Warns
    -----
    ConvergenceWarning
        When the quadrature stops at ``lanczos_steps``, when A's spectrum is below its
        dtype's resolution, and when the probes' standard error of the value exceeds 5 %
        of tr|log A| (whitened: of tr|log(M^{-1/2}AM^{-1/2})| plus abs(log det M)). The
        gradient's noise can be far larger than the value's (an RBF Gram of condition
        10¹², p = 30: value 0.3 %, lengthscale gradient 54 %): ask
        :meth:`LogdetInfo.grad_std_error` where it matters.

    Raises
    ------
    ValueError
        When A is not positive definite (Cholesky fails or a Ritz value is ≤ 0).

    Notes
    -----
    SLQ cost: m products ``A @ Z`` with Z of shape (n, p) (O(n² p m) for a dense or KeOps
    matrix), O(n p m) memory for the reorthogonalized bases, O(p m³ / 10) for the
    convergence checks, plus a CG solve of width p for the gradient. Its error is the
    Hutchinson error of tr log A (relative error ~ √(2/p)·‖log A − diag‖_F / abs(log det
    A)) plus the quadrature error, held below ``lanczos_tol``. GPyTorch cuts its
    quadrature (the tridiagonal of its CG solve) at ``max_lanczos_quadrature_iterations``
    steps, 20 by default, with no estimate of the quadrature error.

    References
    ----------
    S. Ubaru, J. Chen and Y. Saad, "Fast estimation of tr(f(A)) via stochastic Lanczos
    quadrature", SIAM J. Matrix Anal. Appl. 38 (2017). G. Golub and G. Meurant, "Matrices,
    Moments and Quadrature with Applications", Princeton University Press 2010, ch. 6-7
    (Gauss and Gauss–Radau bounds of quadratic forms). J. Gardner et al., "GPyTorch",
    NeurIPS 2018. M. Hutchinson, "A stochastic estimator of the trace of the influence
    matrix", 1989.
    """
    n = _check_operator(A, "A")
    _check_symmetric(A, "A")
    method = _choose_method(A, n, method)
    if method == "exact":
        value = 2 * _exact_cholesky(A).diagonal().log().sum().to(A.dtype)
        return (value, LogdetInfo(0.0)) if return_info else value
    _check_count(num_probes, "num_probes")
    _check_count(lanczos_steps, "lanczos_steps")
    check_positive(lanczos_tol, "lanczos_tol")
    check_positive(cg_tol, "cg_tol")
    cg_max_iter = min(10 * n, 1000) if cg_max_iter is None else check_int(cg_max_iter,
                                                                          "cg_max_iter", 0)
    if not _whitens(preconditioner):
        preconditioner = _check_preconditioner(preconditioner, _rows(A, n))
    elif getattr(preconditioner, "shape", None) not in (None, (n, n)):
        raise ValueError(f"preconditioner has shape {tuple(preconditioner.shape)}, but A "
                         f"needs ({n}, {n})")
    value, info, report, scale = _slq_logdet(
        A, n, num_probes, lanczos_steps, lanczos_tol, _generator(random_state), preconditioner,
        cg_tol, cg_max_iter,
    )
    _warn_quadrature(info, lanczos_tol, lanczos_steps, "logdet (slq)")
    _warn_rounding(info, lanczos_tol, A.dtype, "logdet (slq)")
    _warn_noise(report, scale, "logdet (slq)")
    return (value, report) if return_info else value


def trace(A, *, num_probes=30, random_state=None):
    r"""tr A: exact from the diagonal when available, else Hutchinson's estimator.

    If A is a tensor or has ``diag()``, returns :math:`\sum_i A_{ii}` exactly (O(n)).
    Otherwise :math:`\mathrm{tr} A \approx \frac1p\sum_{i=1}^p z_i^\top A z_i` with
    Rademacher probes z_i (unbiased, variance :math:`\frac2p\sum_{i\ne j} A_{ij}^2` for
    symmetric A), from one product ``A @ Z`` of width p.

    Parameters
    ----------
    A : torch.Tensor or operator
        Square (n, n).
    num_probes : int
        p, probes for the Hutchinson estimator.
    random_state : None, int or torch.Generator
        Probes.

    Returns
    -------
    torch.Tensor
        0-d tensor, differentiable with respect to what A depends on.

    References
    ----------
    M. Hutchinson, "A stochastic estimator of the trace of the influence matrix for
    Laplacian smoothing splines", Comm. Stat. Simul. Comput. 18 (1989).
    """
    n = _check_operator(A, "A")
    _check_count(num_probes, "num_probes")  # checked even where the diagonal is exact
    if isinstance(A, torch.Tensor):
        return A.diagonal().sum()
    if callable(getattr(A, "diag", None)):
        return _reduce(A, A.diag().sum())
    Z = _own(A, _rademacher((n, num_probes), A.dtype, torch.device(A.device),
                            _generator(random_state)))
    return _reduce(A, (Z * (A @ Z)).sum()) / num_probes


def inv_quad_logdet(
    A,
    b,
    *,
    method="auto",
    num_probes=30,
    lanczos_steps=100,
    lanczos_tol=DEFAULT_LANCZOS_TOL,
    preconditioner=None,
    tol=1e-6,
    max_iter=None,
    random_state=None,
    return_info=False,
):
    r"""(bᵀA⁻¹b, log det A) together, as the Gaussian-process marginal likelihood needs them.

    ``-log p(y) = ½ yᵀ(K + σ²I)⁻¹y + ½ log det(K + σ²I) + (n/2) log 2π``.

    Exact method: one float64 Cholesky factor serves both. SLQ method: one batched CG
    solve of width r + p, :math:`[x, w_1..w_p] = A^{-1}[b, z_1..z_p]`, gives the quadratic
    term and the log-det gradient; the log-det value is the SLQ estimate (see
    :func:`logdet`). Gradients use detached solves and the surrogates
    :math:`2 b^\top x - x^\top A x` (value bᵀx, gradient 2x·db − xᵀ dA x, exact at the
    solution) and :math:`\frac1p\sum_i w_i^\top A z_i`, evaluated in one product of A.

    Parameters
    ----------
    A : torch.Tensor or operator
        Symmetric positive definite (n, n).
    b : torch.Tensor
        Shape (n,) or (n, r).
    method, num_probes, lanczos_steps, lanczos_tol, random_state
        As in :func:`logdet` (the quadrature's convergence is judged on the probes).
    preconditioner : callable, optional
        For the CG solve (SLQ method).
    tol, max_iter
        CG relative residual and iteration cap (SLQ method; default and 0 as in
        :func:`cg`).
    return_info : bool
        Also return the log-determinant's :class:`LogdetInfo` (as in :func:`logdet`,
        which also gives the standard-error warning).

    Returns
    -------
    inv_quad : torch.Tensor
        bᵀA⁻¹b: 0-d for 1-D b, shape (r,) (one per column) for 2-D b.
    logdet : torch.Tensor
        0-d.
    info : LogdetInfo
        Only when ``return_info=True``.

    Notes
    -----
    Cost (SLQ): one CG solve of width r + p, m Lanczos products of width r + p (the b
    columns ride along so that every product has one width, which matters for KeOps
    formulas compiled per width), one product with gradient.

    References
    ----------
    J. Gardner et al., "GPyTorch: blackbox matrix-matrix Gaussian process inference with
    GPU acceleration", NeurIPS 2018.
    """
    n = _check_operator(A, "A")
    _check_symmetric(A, "A")
    rows = _rows(A, n)  # a row-sharded A: this process's rows of b
    _check_rhs(b, rows, A, "b")
    method = _choose_method(A, n, method)
    vector = b.ndim == 1
    b2 = b[:, None] if vector else b
    r = b2.shape[1]
    if method == "exact":
        L = _exact_cholesky(A)
        y = torch.linalg.solve_triangular(L, b2.to(_FLOAT64), upper=False)
        quad = (y * y).sum(0).to(A.dtype)
        ld = (2 * L.diagonal().log().sum()).to(A.dtype)
        out = (quad[0] if vector else quad), ld
        return (*out, LogdetInfo(0.0)) if return_info else out

    _check_count(num_probes, "num_probes")
    _check_count(lanczos_steps, "lanczos_steps")
    check_positive(lanczos_tol, "lanczos_tol")
    # a NaN tol stopped CG at once and returned bᵀA⁻¹b = 0 without a word
    check_positive(tol, "tol")
    max_iter = min(10 * n, 1000) if max_iter is None else check_int(max_iter, "max_iter", 0)
    preconditioner = _check_preconditioner(preconditioner, rows)
    gen = _generator(random_state)
    Z = _own(A, _rademacher((n, num_probes), A.dtype, torch.device(A.device), gen))
    rhs = torch.cat([b2.detach(), Z], dim=1)
    with torch.no_grad():
        sol, info = _pcg(A, rhs, preconditioner or _identity, tol, max_iter)
        _warn_not_converged(info, tol, "inv_quad_logdet (cg)")
        norms = _col_norms(A, rhs).clamp(min=torch.finfo(_FLOAT64).tiny)
        Q0 = rhs / norms.to(A.dtype)
        quad_all, info = _lanczos_quadrature(A, Q0, A @ Q0, lanczos_steps, n, lanczos_tol,
                                             check=slice(r, None))
        ld_value = n * quad_all[r:].mean()
    _warn_quadrature(info, lanczos_tol, lanczos_steps, "inv_quad_logdet (slq)")
    _warn_rounding(info, lanczos_tol, A.dtype, "inv_quad_logdet (slq)")
    X, W = sol[:, :r], sol[:, r:]
    quad_value = _inner(A, b2.detach(), X).to(A.dtype)
    quad, ld = quad_value, ld_value.to(A.dtype)
    terms = None
    need = torch.is_grad_enabled() and (b.requires_grad or _maybe_requires_grad(A) is not False)
    if need:
        Ar = A @ torch.cat([X, Z], dim=1)
        AX, AZ = Ar[:, :r], Ar[:, r:]
        quad_sur = 2 * (b2 * X).sum(0) - (X * AX).sum(0)
        terms = (W * AZ).sum(0)
        ld_sur = terms.sum() / num_probes
        quad = quad + (quad_sur - quad_sur.detach())
        ld = ld + (ld_sur - ld_sur.detach())
    report = LogdetInfo(_std_error(quad_all[r:], n), num_probes, info.steps, info.error,
                        info.converged, terms)
    _warn_noise(report, info.scale, "inv_quad_logdet (slq)")
    out = (quad[0] if vector else quad), ld
    return (*out, report) if return_info else out
