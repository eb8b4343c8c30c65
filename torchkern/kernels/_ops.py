"""Operations that work on torch tensors and on KeOps LazyTensors alike.

A kernel formula receives its variables already broadcast — torch tensors of shape
(n, 1, d) and (1, m, d), or KeOps ``Vi``/``Vj`` LazyTensors — and must return an expression
whose last dimension is 1. Arithmetic, ``exp``, ``log``, ``sqrt``, ``rsqrt``, ``abs``,
``sin``, ``cos``, ``atan2``, ``relu`` and integer powers are common to both; the few
operations whose spelling differs live here.
"""
import torch

# Added under square roots: keeps the gradient of ‖x − y‖ finite (zero) at x = y while
# changing values by at most 1e-15.
SQRT_EPS = 1e-30


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


def sqdist(x, y):
    """‖x − y‖² with the feature dimension kept, fast form.

    On torch blocks of shape (b, 1, d) × (1, m, d) it is ‖x‖² + ‖y‖² − 2⟨x, y⟩ through one
    matrix product, after subtracting the mean of y (the distance is translation
    invariant; centering shrinks the round-off, which is of order ε‖x‖²), clipped at 0.
    Several times faster than materializing the (b, m, d) differences, but pairs closer
    than √ε‖x‖ lose relative accuracy: kernels that take a square root of the distance
    use :func:`sqdist_exact`. Elsewhere (KeOps, paired diagonals) both are the plain sum
    of squared differences.
    """
    if is_torch(x) and x.dim() == 3 and x.shape[1] == 1 and y.dim() == 3 and y.shape[0] == 1:
        c = y[0].mean(0, keepdim=True).detach()
        a, b = x[:, 0, :] - c, y[0] - c
        d2 = torch.addmm((a * a).sum(-1, keepdim=True), a, b.T, alpha=-2.0)
        d2.add_((b * b).sum(-1)[None, :])
        d2 = d2.clamp_min_(0.0) if inplace_ok(d2) else d2.clamp_min(0.0)
        return d2.unsqueeze(-1)
    return fsum((x - y) ** 2)


def sqdist_exact(x, y):
    """‖x − y‖² as the sum of squared differences (exact for near-identical points)."""
    return fsum((x - y) ** 2)


def safe_sqrt(t):
    """√t with a finite (zero) gradient at t = 0; t is clipped at 0 against round-off."""
    return (t.relu() + SQRT_EPS).sqrt()


def dot(x, y):
    """⟨x, y⟩ with the feature dimension kept (one matrix product on torch blocks)."""
    if is_torch(x) and x.dim() == 3 and x.shape[1] == 1 and y.dim() == 3 and y.shape[0] == 1:
        return (x[:, 0, :] @ y[0].T).unsqueeze(-1)
    return fsum(x * y)
