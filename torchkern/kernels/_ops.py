"""Operations that work on torch tensors and on KeOps LazyTensors alike.

A kernel formula receives its variables already broadcast — torch tensors of shape
(n, 1, d) and (1, m, d), or KeOps ``Vi``/``Vj`` LazyTensors — and must return an expression
whose last dimension is 1. Arithmetic, ``exp``, ``log``, ``sqrt``, ``rsqrt``, ``abs``,
``sin``, ``cos``, ``atan2``, ``relu``, ``clamp`` and integer powers are common to both; the
few operations whose spelling differs live here.
"""
import functools
import math

import torch

from .._config import FAST_FORM_MAX_ROUNDOFF  # noqa: F401 (re-exported)
from .._config import fast_form_max_roundoff  # the fast form's round-off bounds

# The floor under square roots (safe_sqrt): keeps the gradient of ‖x − y‖ finite (zero) at
# x = y; √0 reads 1e-15.
SQRT_EPS = 1e-30

# A scaled distance s at which e^{-s} is 0 in float64, and so in float32: half the smallest
# float64 subnormal is 2^-1075 = e^-745.13 (float32's, 2^-150 = e^-103.97). A kernel
# p(s)e^{-s} (Matérn) evaluated at min(s, EXP_ZERO) is exactly what it was below the bound
# and p(EXP_ZERO)·0 = 0 above it, where p(s)e^{-s} gave ∞·0 = NaN once s overflowed
# (‖x − y‖/ℓ past 1e19 in float32, 1e154 in float64).
EXP_ZERO = 746.0


def is_torch(t) -> bool:
    return isinstance(t, torch.Tensor)


def fsum(t):
    """Sum over the feature dimension, keeping it (size 1)."""
    return t.sum(-1, keepdim=True) if is_torch(t) else t.sum(-1)


def fdim(t) -> int:
    """Size of the feature dimension."""
    return t.shape[-1] if is_torch(t) else t.ndim


def felem(t, k: int):
    """Feature ``k`` of ``t`` (size-1 feature dimension)."""
    return t[..., k:k + 1] if is_torch(t) else t.elem(k)


def fmin(a, b):
    """Elementwise minimum, written with ``abs`` so that KeOps and torch agree."""
    return (a + b - (a - b).abs()) * 0.5


def inplace_ok(t) -> bool:
    """Whether ``t`` is a plain tensor outside autograd, whose fresh buffer a formula may
    overwrite in place (saves full-size temporaries when a Gram block is evaluated)."""
    return isinstance(t, torch.Tensor) and not (torch.is_grad_enabled() and t.requires_grad)


def sqdist(x, y, center: bool = True):
    """‖x − y‖² with the feature dimension kept, fast form.

    On torch blocks of shape (b, 1, d) × (1, m, d) it is ‖x‖² + ‖y‖² − 2⟨x, y⟩ through one
    matrix product, clipped at 0, after subtracting the mean of y (``center=True``; the
    distance is translation invariant). Its round-off is of order ε·(‖x‖² + ‖y‖²): it is
    several times faster than materializing the (b, m, d) differences, but pairs closer
    than √ε‖x‖ lose relative accuracy. Stationary kernels centre their data once per
    product and choose the precision of this form (:func:`fast_form_dtype`), and pass
    ``center=False``; kernels that take a square root of the distance use
    :func:`sqdist_exact`. Elsewhere (KeOps, paired diagonals) both are the plain sum of
    squared differences.
    """
    if is_torch(x) and x.dim() == 3 and x.shape[1] == 1 and y.dim() == 3 and y.shape[0] == 1:
        a, b = x[:, 0, :], y[0]
        if center:
            c = b.mean(0, keepdim=True).detach()
            a, b = a - c, b - c
        d2 = torch.addmm((a * a).sum(-1, keepdim=True), a, b.T, alpha=-2.0)
        d2.add_((b * b).sum(-1)[None, :])
        d2 = d2.clamp_min_(0.0) if inplace_ok(d2) else d2.clamp_min(0.0)
        return d2.unsqueeze(-1)
    return fsum(_difference(x, y) ** 2)


def _difference(x, y):
    """x − y; on torch blocks under autograd clamped to ±2^(e/2 + 1), e the dtype's largest
    exponent: the same squares (past √max they are ∞ either way), but 2(x − y), the
    gradient of (x − y)², no longer overflows — where it did, times a kernel's zero
    derivative at an infinite distance it was ∞·0 = NaN, and the NaN reached every point
    through the sums (RBF, RationalQuadratic, inverse multiquadric: entries ±1e308 in
    float64). Outside autograd, and in KeOps and Triton formulas, the plain difference."""
    u = x - y
    if is_torch(u) and not inplace_ok(u) and u.is_floating_point():
        b = 2.0 ** (math.frexp(torch.finfo(u.dtype).max)[1] // 2 + 1)
        u = u.clamp(-b, b)
    return u


def center(x, y=None):
    """``(x − c, y − c)`` for one c per column from the rows of x and y together (x alone
    when y is None, which is returned as None), detached, in one O((n + m) d) pass.

    A translation-invariant kernel sees the same distances, and the subtraction is exact:
    c_k is the column's mean moved into [max_k / 2, 2 min_k] (Sterbenz: a − b is exact
    for floats within a factor 2), where that interval exists — columns whose values are
    all of one sign within a factor 4, i.e. offset data, whose offset then no longer
    costs precision (in the lengthscale division, and as round-off ε·(‖x‖² + ‖y‖²) of the
    fast form). Other columns (spread over a range that includes small values) are left
    as they are: centring them would round the small values. Where no column moves (data
    about the origin, the usual case) x and y are returned as they are, without a copy.
    """
    with torch.no_grad():
        zs = (x,) if y is None else (x, y)
        ranges = [torch.aminmax(z, dim=0) for z in zs]  # no concatenated copy of x and y
        lo = functools.reduce(torch.minimum, [r[0] for r in ranges])
        hi = functools.reduce(torch.maximum, [r[1] for r in ranges])
        mean = sum(z.sum(0) for z in zs) / sum(z.shape[0] for z in zs)
        pos = (lo > 0) & (hi <= 4 * lo)
        neg = (hi < 0) & (lo >= 4 * hi)
        if not bool((pos | neg).any()):
            return x, y
        c = torch.where(pos, torch.minimum(torch.maximum(mean, hi / 2), 2 * lo), 0.0)
        c = torch.where(neg, torch.minimum(torch.maximum(mean, 2 * hi), lo / 2), c)
    return x - c, None if y is None else y - c


def fast_form_dtype(x, y=None, max_roundoff: float | None = None):
    """The dtype in which :func:`sqdist`'s fast form on the rows of x and y (centred, see
    :func:`center`) has round-off ε·(max‖x‖² + max‖y‖²) at most ``max_roundoff`` (default:
    the bound for the data's dtype, ``_config.fast_form_max_roundoff``; 2^-16 for float32,
    2^-36 for float64): their own where their spread allows, float64 where only it does
    (scikit-learn's ``euclidean_distances`` likewise computes float32 distances in
    float64), None where not even float64 does (the sum of squared differences is
    needed). O((n + m) d)."""
    if max_roundoff is None:
        max_roundoff = fast_form_max_roundoff(x.dtype)
    with torch.no_grad():
        s = (x * x).sum(1).max()
        s = 2 * s if y is None else s + (y * y).sum(1).max()
        s = float(s)
    for dt in (x.dtype, torch.float64):
        if torch.finfo(dt).eps * s <= max_roundoff:
            return dt
    return None


def in_precision(fn, dtype, like):
    """A formula ``fn(xs, ys, ps)`` that computes on torch blocks in ``dtype`` and rounds
    its result back to ``like`` (the data's dtype), or — dtype None — evaluates every
    variable pair by its exact differences (x broadcast to the block's full shape, which
    :func:`sqdist` takes by differences). KeOps LazyTensors pass through unchanged (KeOps
    sums squared differences). Differentiable: gradients come back in the data's dtype."""
    if dtype == like:
        return fn

    def wrapped(xs, ys, ps):
        if not is_torch(xs[0]):
            return fn(xs, ys, ps)
        if dtype is None:
            return fn([x.expand(torch.broadcast_shapes(x.shape, y.shape))
                       for x, y in zip(xs, ys)], ys, ps)
        return fn([x.to(dtype) for x in xs], [y.to(dtype) for y in ys],
                  [p.to(dtype) for p in ps]).to(like)

    return wrapped


def sqdist_exact(x, y, bound=None):
    """‖x − y‖² as the sum of squared differences (exact for near-identical points).

    ``bound``: for kernels that are 0 beyond a scaled distance (:data:`EXP_ZERO`), whose
    value is the same for any sum past bound², each difference is clamped to [−bound,
    bound] where a gradient can be taken (KeOps and Triton formulas, torch blocks under
    autograd): a zero gradient to the coordinates past it, where x − y or 2(x − y)
    overflowed and the gradient of (x − y)² times the kernel's zero derivative was
    ∞·0 = NaN. Torch blocks outside autograd skip the clamp (a pass over the (b, m, d)
    differences: about 15 % of a blocked Matérn product)."""
    if bound is None:
        return fsum(_difference(x, y) ** 2)
    u = x - y
    if not inplace_ok(u):
        # the Triton tracer's grad_clamp drops the clamp from its forward product
        u = u.grad_clamp(-bound, bound) if hasattr(u, "grad_clamp") else u.clamp(-bound, bound)
    return fsum(u ** 2)


def safe_sqrt(t, upper=None):
    """√max(t, SQRT_EPS): √t (exactly, above 1e-30) with a zero gradient where t ≤ 1e-30
    — at t = 0 and where round-off made t negative. Written as relu(t − ε) + ε: KeOps
    differentiates relu by a step that is 1 at 0 (torch: 0), so relu(t) + ε gave KeOps
    the gradient 1/(2√ε) = 5e14 times ∂t at t = 0, which is round-off where t cancels
    (the arc-cosine kernel's ‖x‖²‖y‖² − ⟨x, y⟩² on its diagonal: KeOps gradients off by
    1–10 %).

    ``upper``: min(√t, upper), finite with a zero gradient where t is large or ∞ (an
    overflowed squared distance). On torch tensors one clamp to [ε, upper²] (two passes
    over the block instead of four; its gradient is 0 at t = 0 as well, exact below the
    bound); the other formula types (KeOps LazyTensors, and the
    Triton engine's tracer, which has no clamp) take 1 / (1/upper + relu(1/√t −
    1/upper)), within a few units in the last place of √t below the bound (√t ≥ 1e-15,
    so 1/√t is finite)."""
    if upper is None:
        return ((t - SQRT_EPS).relu() + SQRT_EPS).sqrt()
    if is_torch(t):
        return t.clamp(SQRT_EPS, upper * upper).sqrt()
    inv = 1.0 / upper
    return 1.0 / ((1.0 / safe_sqrt(t) - inv).relu() + inv)


def log1p(t):
    """log(1 + t), accurate for |t| ≪ 1 where log(1 + t) is not: ``torch.log1p`` on torch
    tensors; on KeOps LazyTensors (which have no log1p) log w + (t − (w − 1)) / w with
    w = 1 + t rounded — for |t| ≤ 1, t − (w − 1) is exactly the rounding error of w
    (Fast2Sum; Dekker 1971, "A floating-point technique for extending the available
    precision", Numer. Math. 18), and log(1 + t) = log w + log(1 + (t − (w − 1)) / w)."""
    if is_torch(t):
        return t.log1p()
    w = t + 1.0
    # the correction taken at min(t, 2^20): for t ≥ 2^20 it is at most ulp(w)/(2w), below
    # half an ulp of log w (≥ 13.8), so log w alone is right there; at t = ∞ (an
    # overflowed distance) the unclamped correction was (∞ − ∞)/∞ = NaN
    c = t.clamp(-1.0, 2.0 ** 20)
    wc = c + 1.0
    return w.log() + (c - (wc - 1.0)) / wc


def dot(x, y):
    """⟨x, y⟩ with the feature dimension kept (one matrix product on torch blocks)."""
    if is_torch(x) and x.dim() == 3 and x.shape[1] == 1 and y.dim() == 3 and y.shape[0] == 1:
        return (x[:, 0, :] @ y[0].T).unsqueeze(-1)
    return fsum(x * y)
