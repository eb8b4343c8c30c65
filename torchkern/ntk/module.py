r"""Infinite-width NNGP and NTK kernels of a torch ``nn.Sequential``, convolutions included.

A network read layer by layer becomes a recursion on covariances (Neal 1996; Lee et al.
2018; Jacot et al. 2018). For convolutional networks the state is the covariance between
every pixel of x and every pixel of y, the "pixel-pair" covariance (Novak et al. 2019,
"Bayesian deep convolutional networks with many channels are Gaussian processes", ICLR;
Arora et al. 2019, "On exact computation with an infinitely wide neural net", NeurIPS),
propagated through each layer by the rules of neural-tangents' ``stax`` (Novak et al.
2020, "Neural Tangents: fast and easy infinite neural networks in Python", ICLR).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from .._config import _check_backend, config
from .._validation import as_generator, as_tensor, check_positive, is_int
from ..gram import DenseKernelMatrix, KernelMatrix, _finite_gram
from ..inputs import KernelInput, as_index
from ..kernels._ops import safe_sqrt
from ..kernels.base import Kernel, upcast_half
from .analytic import _arccos, _check_stds

__all__ = ["infinite_width", "InfiniteWidthKernel", "Residual", "Erf", "parameterize"]

_KINDS = ("ntk", "nngp")
_PARAMETERIZATIONS = ("ntk", "standard")


# --------------------------------------------------------------------------------------
# Modules a user writes the network with
# --------------------------------------------------------------------------------------

class Erf(nn.Module):
    """φ(x) = erf(x) as a module (torch has none), the activation whose infinite-width
    kernel has Williams' (1997) closed form."""

    def forward(self, x):
        return torch.erf(x)


class Residual(nn.Module):
    """x ↦ x + body(x), a residual block :func:`infinite_width` reads.

    At infinite width the two branches are independent Gaussian processes when ``body``
    ends with a ``Linear``/``Conv`` layer (its zero-mean weights decorrelate it from x), so
    the block adds their kernels, K = K_x + K_body (neural-tangents'
    ``serial(FanOut(2), parallel(Identity(), body), FanInSum())``). ``body`` must keep the
    shape of its input; an activation after the block needs x Gaussian (the output of a
    Linear/Conv, as in pre-activation ResNets, He et al. 2016), so that x + body(x) is.
    """

    def __init__(self, body: nn.Module):
        super().__init__()
        if not isinstance(body, nn.Module):
            raise TypeError(f"body must be an nn.Module, got {type(body).__name__}")
        self.body = body

    def forward(self, x):
        return x + self.body(x)


# --------------------------------------------------------------------------------------
# Activations: E φ(u)φ(v) and E φ'(u)φ'(v) for (u, v) centred Gaussian
# --------------------------------------------------------------------------------------

class _Leaky:
    """ReLU (slope 0) and LeakyReLU kernels; a class so that kernels pickle."""

    def __init__(self, slope):
        self.slope = slope

    def __call__(self, qx, qy, c):
        # φ(u) = a u + (1 − a) relu(u): E φφ = a c + (1 − a)² J₁, E φ'φ' = a + (1 − a)² J₀
        # with the arc-cosine kernels J₁, J₀ (analytic._arccos: its floors, and θ = π/2
        # with a zero gradient at a unit of variance 0). S = 1 there, any S > 0 would do.
        S = _positive(qx + qy)
        j1, j0, _, _ = _arccos(qx, qy, c, (qx / S) * (qy / S) - (c / S) ** 2, S)
        a, b = self.slope, (1.0 - self.slope) ** 2
        if a == 0.0:
            return j1, j0
        return a * c + b * j1, a + b * j0


def _positive(t):
    """t where t > 0, else 1: a divisor (and √ argument) with finite gradients."""
    return torch.where(t > 0, t, torch.ones_like(t))


def _erf(qx, qy, c):
    # Williams (1997): E erf(u)erf(v) = (2/π) arcsin(2c / √((1 + 2qx)(1 + 2qy))).
    prod = (1.0 + 2.0 * qx) * (1.0 + 2.0 * qy)
    root = (prod - 4.0 * c * c).clamp_min(0.0).sqrt()
    return (2.0 / math.pi) * torch.atan2(2.0 * c, root), (4.0 / math.pi) / root


def _gelu(x):
    return x * 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))


def _gelu_grad(x):
    return 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0))) + x * torch.exp(-0.5 * x * x) / math.sqrt(
        2.0 * math.pi)


def _gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def _gelu_tanh_grad(x):
    k = math.sqrt(2.0 / math.pi)
    t = torch.tanh(k * (x + 0.044715 * x ** 3))
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3 * 0.044715 * x * x)


def _tanh(x):
    return torch.tanh(x)


def _sigmoid(x):
    return torch.sigmoid(x)


def _sigmoid_grad(x):
    s = torch.sigmoid(x)
    return s * (1.0 - s)


def _tanh_grad(x):
    t = torch.tanh(x)
    return 1.0 - t * t


_QUAD_HALF_WIDTH = 8.5  # the standard normal density is below 1e-15 of its peak beyond
_QUAD_CHUNK = 2 ** 22    # quadrature evaluations held at once


class _Quadrature:
    r"""E f(u)f(v) and E f'(u)f'(v) for (u, v) centred Gaussian by a tensor-product
    trapezoidal rule: u = √q_x z₁, v = (c/√q_x) z₁ + √(q_y − c²/q_x) z₂ with z₁, z₂
    independent standard normals, each integral Σ_k w_k g(z_k) over ``order`` equispaced
    nodes on [−8.5, 8.5] with weights ∝ the normal density. For g analytic in the strip
    |Im z| < d the rule's error falls as exp(−2πd/h) with the node spacing h (Trefethen and
    Weideman 2014, "The exponentially convergent trapezoidal rule", SIAM Review): faster
    than Gauss–Hermite for activations with poles near the real axis (tanh and sigmoid at
    ±iπ/(2√q) and ±iπ/√q)."""

    def __init__(self, fn, grad, order):
        self.fn, self.grad, self.order = fn, grad, order

    def __call__(self, qx, qy, c):
        fn, grad, order = self.fn, self.grad, self.order
        z = np.linspace(-_QUAD_HALF_WIDTH, _QUAD_HALF_WIDTH, order)
        w = np.exp(-0.5 * z * z)
        w = w / w.sum()
        shape = torch.broadcast_shapes(qx.shape, qy.shape, c.shape)
        qx, qy, c = (t.expand(shape).reshape(-1) for t in (qx, qy, c))
        Z = torch.as_tensor(z, dtype=c.dtype, device=c.device)
        W = torch.as_tensor(w, dtype=c.dtype, device=c.device)
        step = max(1, _QUAD_CHUNK // (order * order))
        # one host sync per call, not per chunk: whether Price's term is needed anywhere
        price = c.requires_grad and bool((qx == 0).any())
        kk, kd = [], []
        for s in range(0, c.numel(), step):
            x_q, y_q, xy = qx[s:s + step], qy[s:s + step], c[s:s + step]
            pos = x_q > 0
            # √ with a zero slope at 0: its infinite one times dq = 0 made every gradient
            # of a Gram matrix with a zero-variance unit NaN
            sx = torch.where(pos, torch.where(pos, x_q, torch.ones_like(x_q)).sqrt(),
                             torch.zeros_like(x_q))
            a = torch.where(pos, xy / torch.where(pos, sx, torch.ones_like(sx)),
                            torch.zeros_like(xy))
            # 0 on the diagonal of k(X): finite gradients; in units of y_q (floor relative)
            yq = _positive(y_q)
            b = safe_sqrt(1.0 - a * a / yq) * yq.sqrt() * (y_q > 0)
            u = sx[:, None] * Z                                          # (m, order)
            v = a[:, None, None] * Z[:, None] + b[:, None, None] * Z     # (m, order, order)
            k1, k0 = ((fn(v) @ W) * fn(u)) @ W, ((grad(v) @ W) * grad(u)) @ W
            if price:
                k1, k0 = self._price(k1, k0, y_q, xy, x_q == 0, Z, W)
            kk.append(k1)
            kd.append(k0)
        return torch.cat(kk).reshape(shape), torch.cat(kd).reshape(shape)

    def _price(self, k1, k0, y_q, xy, zero, Z, W):
        """The c-derivatives where u has variance 0. There u ≡ 0 and the quadrature does
        not depend on c (v = b·z₂), but the kernel does: by Price's theorem (Price 1958,
        "A useful theorem for nonlinear devices having Gaussian inputs", IRE Trans.
        Inf. Theory) ∂E[f(u)f(v)]/∂c = E[f'(u)f'(v)] and ∂E[f'(u)f'(v)]/∂c =
        E[f''(u)f''(v)] = f''(0)·E f''(v); added as (c − c.detach())·(…), 0 in value.
        (Where only v has variance 0, v = (c/√q_x)·z₁ carries that derivative already.)"""
        def second(t):  # f'' by autograd of the elementwise f'
            with torch.enable_grad():
                t = t.detach().requires_grad_()
                return torch.autograd.grad(self.grad(t).sum(), t)[0]

        f2 = second(Z.new_zeros(())) * (second(y_q.detach().sqrt()[:, None] * Z) @ W)
        dc = (xy - xy.detach()) * zero
        return k1 + dc * k0.detach(), k0 + dc * f2


# --------------------------------------------------------------------------------------
# The program: a module read into a list of kernel operations
# --------------------------------------------------------------------------------------

@dataclass
class _Op:
    kind: str                      # affine, act, pad, pool, gap, flatten, residual, identity
    name: str = ""                 # the layer, for error messages
    conv: int = 0                  # spatial dims of a conv (0: Linear)
    n_in: int | None = None        # in_features / in_channels
    n_out: int | None = None
    kernel: tuple = ()
    stride: tuple = ()
    dilation: tuple = ()
    padding: object = None         # "same", "valid" or a tuple of (lo, hi) per axis
    bias: bool = False
    act: object = None
    body: list = field(default_factory=list)


def _pairs(value, n, name, what):
    if is_int(value):
        return (int(value),) * n
    value = tuple(value)
    if len(value) != n or not all(is_int(v) for v in value):
        raise ValueError(f"{name}: {what} must be an int or {n} ints, got {value!r}")
    return tuple(int(v) for v in value)


def _activation(layer, name, order):
    if isinstance(layer, nn.ReLU):
        return _Leaky(0.0)
    if isinstance(layer, nn.LeakyReLU):
        return _Leaky(float(layer.negative_slope))
    if isinstance(layer, Erf):
        return _erf
    if isinstance(layer, nn.GELU):
        if layer.approximate == "tanh":
            return _Quadrature(_gelu_tanh, _gelu_tanh_grad, order)
        return _Quadrature(_gelu, _gelu_grad, order)
    if isinstance(layer, nn.Tanh):
        return _Quadrature(_tanh, _tanh_grad, order)
    if isinstance(layer, nn.Sigmoid):
        return _Quadrature(_sigmoid, _sigmoid_grad, order)
    return None


# the layer classes _read maps; a subclass that overrides forward is refused
_MAPPED = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.ReLU, nn.LeakyReLU, nn.GELU, nn.Tanh,
           nn.Sigmoid, nn.Identity, nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.ZeroPad1d,
           nn.ZeroPad2d, nn.ConstantPad1d, nn.ConstantPad2d, nn.AvgPool1d, nn.AvgPool2d,
           nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool2d, nn.Flatten, Erf, Residual)


def _read(module: nn.Module, order: int, prefix: str = "") -> list:
    """The operations of ``module`` (an nn.Sequential, nested ones flattened)."""
    if isinstance(module, nn.Sequential):
        if type(module).forward is not nn.Sequential.forward:
            raise ValueError(f"infinite_width cannot map layer {prefix[:-1] or 'module'} "
                             f"({type(module).__name__}): an nn.Sequential subclass with its "
                             f"own forward (write a residual block as torchkern.ntk.Residual)")
        ops = []
        # as Sequential.forward: every entry, a module placed twice included
        # (named_children() yields it once, and the network lost a layer)
        for key, layer in module._modules.items():
            ops += _read(layer, order, f"{prefix}{key}.")
        return ops
    name = f"{prefix[:-1] or 'module'} ({type(module).__name__})"
    for base in _MAPPED:  # a subclass is read as its base: only if it computes the same
        if isinstance(module, base) and type(module).forward is not base.forward:
            raise ValueError(f"infinite_width cannot map layer {name}: a subclass of "
                             f"{base.__name__} with its own forward")
    if isinstance(module, (nn.Identity, nn.Dropout, nn.Dropout1d, nn.Dropout2d)):
        return []
    act = _activation(module, name, order)
    if act is not None:
        return [_Op("act", name, act=act)]
    if isinstance(module, nn.Linear):
        return [_Op("affine", name, 0, module.in_features, module.out_features,
                    bias=module.bias is not None)]
    if isinstance(module, (nn.Conv1d, nn.Conv2d)):
        nd = 1 if isinstance(module, nn.Conv1d) else 2
        if module.groups != 1:
            raise ValueError(f"infinite_width cannot map layer {name}: groups={module.groups} "
                             f"(only groups=1)")
        if module.padding_mode != "zeros":
            raise ValueError(f"infinite_width cannot map layer {name}: padding_mode="
                             f"{module.padding_mode!r} (only 'zeros')")
        pad = module.padding
        if isinstance(pad, str):
            pad = pad.lower()
        else:
            pad = tuple((p, p) for p in _pairs(pad, nd, name, "padding"))
        return [_Op("affine", name, nd, module.in_channels, module.out_channels,
                    tuple(module.kernel_size), tuple(module.stride), tuple(module.dilation),
                    pad, module.bias is not None)]
    if isinstance(module, (nn.ZeroPad1d, nn.ZeroPad2d)) or (
            isinstance(module, (nn.ConstantPad1d, nn.ConstantPad2d)) and module.value == 0):
        p = tuple(module.padding)  # torch order: (left, right[, top, bottom])
        nd = len(p) // 2
        return [_Op("pad", name, nd, padding=tuple((p[2 * i], p[2 * i + 1])
                                                  for i in reversed(range(nd))))]
    if isinstance(module, (nn.AvgPool1d, nn.AvgPool2d)):
        nd = 1 if isinstance(module, nn.AvgPool1d) else 2
        k = _pairs(module.kernel_size, nd, name, "kernel_size")
        s = _pairs(module.stride if module.stride else module.kernel_size, nd, name, "stride")
        if (any(_pairs(module.padding, nd, name, "padding")) or module.ceil_mode
                or getattr(module, "divisor_override", None) is not None):
            raise ValueError(f"infinite_width cannot map layer {name}: only padding=0, "
                             f"ceil_mode=False and divisor_override=None")
        return [_Op("pool", name, nd, kernel=k, stride=s)]
    if isinstance(module, (nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool2d)):
        size = module.output_size
        sizes = (size,) if not isinstance(size, tuple) else size
        if any(v != 1 for v in sizes):
            raise ValueError(f"infinite_width cannot map layer {name}: adaptive average "
                             f"pooling only to size 1 (global average pooling), got {size!r}")
        return [_Op("gap", name, 1 if isinstance(module, nn.AdaptiveAvgPool1d) else 2)]
    if isinstance(module, nn.Flatten):
        if module.start_dim != 1 or module.end_dim != -1:
            raise ValueError(f"infinite_width cannot map layer {name}: only "
                             f"Flatten(start_dim=1, end_dim=-1)")
        return [_Op("flatten", name)]
    if isinstance(module, Residual):
        body = _read(module.body, order, f"{prefix}body.")
        return [_Op("residual", name, body=body)]
    raise ValueError(f"infinite_width cannot map layer {name}: supported are Linear, "
                     f"Conv1d/Conv2d, ReLU, LeakyReLU, GELU, Tanh, Sigmoid, torchkern.ntk.Erf, "
                     f"AvgPool1d/2d, AdaptiveAvgPool to 1, ZeroPad, Flatten, Identity, Dropout, "
                     f"torchkern.ntk.Residual and nested nn.Sequential")


def _needs_full(ops) -> bool:
    """Whether some layer mixes pixel positions (pooling): then the state keeps every pixel
    pair; otherwise only the pairs at equal positions (the spatial diagonal)."""
    return any(op.kind in ("pool", "gap") or (op.kind == "residual" and _needs_full(op.body))
               for op in ops)


def _last_affine(ops) -> bool:
    for op in reversed(ops):
        if op.kind == "affine":
            return True
        if op.kind == "residual":
            return _last_affine(op.body)
        if op.kind != "pad":
            return False
    return False


def _shapes(ops, shape, gaussian=False):
    """Check the layers against the input sample shape; resolve paddings. Returns the
    output shape, ``(d,)`` vectors or ``(C, *spatial)``, and whether the output is a
    Gaussian process (an affine layer's output, through linear layers since)."""
    for op in ops:
        if op.kind == "act":
            if not gaussian:
                raise ValueError(f"layer {op.name} acts on inputs that are not Gaussian at "
                                 f"infinite width (the data, another activation, or a residual "
                                 f"block around them): put a Linear or Conv layer before it")
            gaussian = False
        if op.kind == "affine":
            gaussian = True
            if op.conv == 0:
                if len(shape) != 1:
                    raise ValueError(f"layer {op.name} receives inputs of shape {shape}; "
                                     f"a Flatten must come before it")
                if shape[0] != op.n_in:
                    raise ValueError(f"layer {op.name} expects {op.n_in} features, gets "
                                     f"{shape[0]}")
                shape = (op.n_out,)
                continue
            if len(shape) != op.conv + 1 or shape[0] != op.n_in:
                raise ValueError(f"layer {op.name} expects inputs of shape ({op.n_in}, "
                                 f"{'L' if op.conv == 1 else 'H, W'}), gets {shape}")
            spatial = shape[1:]
            if op.padding == "valid":
                pads = ((0, 0),) * op.conv
            elif op.padding == "same":  # torch: stride 1, the odd extra padding at the end
                tot = [d * (k - 1) for k, d in zip(op.kernel, op.dilation)]
                pads = tuple((t // 2, t - t // 2) for t in tot)
            else:
                pads = op.padding
            op.resolved = pads
            out = []
            for n, k, s, d, (lo, hi) in zip(spatial, op.kernel, op.stride, op.dilation, pads):
                size = (n + lo + hi - d * (k - 1) - 1) // s + 1
                if size < 1:
                    raise ValueError(f"layer {op.name}: input of size {n} too small")
                out.append(size)
            shape = (op.n_out, *out)
        elif op.kind in ("pad", "pool", "gap"):
            if len(shape) != op.conv + 1:
                raise ValueError(f"layer {op.name} expects inputs with {op.conv} spatial "
                                 f"dimensions, gets shape {shape}")
            if op.kind == "pad":
                shape = (shape[0], *[n + lo + hi for n, (lo, hi) in zip(shape[1:], op.padding)])
            elif op.kind == "pool":
                shape = (shape[0], *[(n - k) // s + 1
                                     for n, k, s in zip(shape[1:], op.kernel, op.stride)])
                if min(shape[1:]) < 1:
                    raise ValueError(f"layer {op.name}: input too small for the window")
            else:
                shape = (shape[0],) + (1,) * op.conv
        elif op.kind == "flatten":
            shape = (int(np.prod(shape)),)
        elif op.kind == "residual":
            out, _ = _shapes(op.body, shape, gaussian)
            if out != shape:
                raise ValueError(f"layer {op.name}: the body maps shape {shape} to {out}; a "
                                 f"residual block must keep it")
            if not _last_affine(op.body):
                raise ValueError(f"layer {op.name}: the body must end with a Linear or Conv "
                                 f"layer (its branches are then independent)")
    return shape, gaussian


# --------------------------------------------------------------------------------------
# Kernel operations on pixel-pair covariances
# --------------------------------------------------------------------------------------
# A state tensor has leading batch dimensions (a block of image pairs (bx, by), or the
# images themselves (b,) for the per-image pass) and trailing spatial dimensions: in the
# "full" layout the pixel pairs (h, h', w, w') (neural-tangents' order), in the "diag"
# layout the equal-position pairs (h, w), and none once the network is flattened.

def _window(c, axis, k, s, d, lo, hi, pair):
    """Mean over the k taps of a 1-D filter (stride s, dilation d, zero padding lo/hi)
    applied at ``axis`` — at both axes ``axis, axis + 1`` with the same tap when ``pair``
    (a shared-weight convolution on pixel pairs), else at ``axis`` alone. The padding is
    never materialized: each tap adds the input slice it reaches to the outputs it
    reaches."""
    axes = (axis, axis + 1) if pair else (axis,)
    n = c.shape[axis]
    out = (n + lo + hi - d * (k - 1) - 1) // s + 1
    shape = list(c.shape)
    for ax in axes:
        shape[ax] = out
    total = None
    for t in range(k):
        off = t * d - lo                      # input index of output 0 at this tap
        i0 = max(0, -(off // s))             # first output whose input index is >= 0
        i1 = min(out - 1, (n - 1 - off) // s)
        if i1 < i0:
            continue
        src = [slice(None)] * c.dim()
        dst = [slice(None)] * c.dim()
        for ax in axes:
            src[ax] = slice(s * i0 + off, s * i1 + off + 1, s)
            dst[ax] = slice(i0, i1 + 1)
        piece = c[tuple(src)]
        if total is None:
            total = c.new_zeros(shape)
        if i0 == 0 and i1 == out - 1:
            total += piece                    # in place: total is a fresh tensor
        else:
            total[tuple(dst)] += piece        # total is a fresh tensor of this function
    if total is None:
        total = c.new_zeros(shape)
    return total * (1.0 / k)


def _conv(c, op, full):
    nd = op.conv
    for i in range(nd):
        k, s, d, (lo, hi) = op.kernel[i], op.stride[i], op.dilation[i], op.resolved[i]
        axis = (-2 * nd + 2 * i) if full else (-nd + i)
        c = _window(c, axis, k, s, d, lo, hi, full)
    return c


def _pad(c, op, full):
    nd = op.conv
    for i, (lo, hi) in enumerate(op.padding):
        if full:
            c = _window(c, -2 * nd + 2 * i, 1, 1, 1, lo, hi, True)
        else:
            c = _window(c, -nd + i, 1, 1, 1, lo, hi, False)
    return c


def _pool(c, op):
    nd = op.conv
    for i in range(nd):
        for j in (0, 1):
            c = _window(c, -2 * nd + 2 * i + j, op.kernel[i], op.stride[i], 1, 0, 0, False)
    return c


def _spatial_diag(c, nd):
    """The pixel pairs at equal positions of a full-layout tensor: (..., h, w)."""
    if nd == 1:
        return torch.diagonal(c, dim1=-2, dim2=-1)
    return torch.diagonal(torch.diagonal(c, dim1=-4, dim2=-3), dim1=-3, dim2=-2)


def _run(ops, c, theta, ctx, full, nd):
    """Propagate (NNGP, NTK) through ``ops``. ``ctx`` holds the per-image variances:
    in the per-image pass it records them (``ctx.record``), in the pair pass it reads
    them in the same order."""
    ntk, standard = ctx.ntk, ctx.standard
    w2, b2 = ctx.w2, ctx.b2
    for op in ops:
        if op.kind == "affine":
            if op.conv:
                conv_c = _conv(c, op, full and nd > 0)
                conv_t = None if theta is None or not ntk else _conv(theta, op, full and nd > 0)
                fan_in = op.n_in * int(np.prod(op.kernel))
            else:
                conv_c, conv_t, fan_in = c, theta if ntk else None, op.n_in
            new_c = conv_c * w2 + (b2 if op.bias else 0.0)
            if ntk:
                if standard:
                    grad = conv_c * float(fan_in) + (1.0 if op.bias else 0.0)
                else:
                    grad = new_c
                theta = grad if conv_t is None else grad + conv_t * w2
            c = new_c
        elif op.kind == "act":
            qx, qy = ctx.variances(c, full, nd)
            c, dot = op.act(qx, qy, c)
            if ntk and theta is not None:
                theta = theta * dot
            if ctx.cast is not None:    # float32 input promoted up to its first erf
                c, theta = c.to(ctx.cast), None if theta is None else theta.to(ctx.cast)
                ctx.cast = None
        elif op.kind == "pad":
            c = _pad(c, op, full)
            theta = None if theta is None else _pad(theta, op, full)
        elif op.kind == "pool":
            c = _pool(c, op)
            theta = None if theta is None else _pool(theta, op)
        elif op.kind == "gap":
            dims = tuple(range(-2 * nd, 0))
            c = c.mean(dims, keepdim=True)
            theta = None if theta is None else theta.mean(dims, keepdim=True)
        elif op.kind == "flatten":
            if nd:
                if full:
                    c = _spatial_diag(c, nd)
                    theta = None if theta is None else _spatial_diag(theta, nd)
                dims = tuple(range(-nd, 0))
                c = c.mean(dims)
                theta = None if theta is None else theta.mean(dims)
                nd = 0
        elif op.kind == "residual":
            bc, bt, nd2 = _run(op.body, c, theta, ctx, full, nd)
            c = c + bc
            if ntk:
                theta = bt if theta is None else theta + bt
    return c, theta, nd


class _Images:
    """The per-image pass: variances recorded at each activation."""

    def __init__(self, ntk, standard, w2, b2, cast=None):
        self.ntk, self.standard, self.w2, self.b2 = ntk, standard, w2, b2
        self.record, self.cast = [], cast

    def variances(self, c, full, nd):
        q = _spatial_diag(c, nd) if (full and nd) else c
        self.record.append(q)
        if full and nd:
            return _expand(q, nd, 0), _expand(q, nd, 1)
        return c, c


def _expand(q, nd, which):
    """(..., h, w) → (..., h, 1, w, 1) (which=0) or (..., 1, h, 1, w) (which=1)."""
    shape = list(q.shape[: q.dim() - nd])
    for n in q.shape[q.dim() - nd:]:
        shape += [n, 1] if which == 0 else [1, n]
    return q.reshape(shape)


class _Pairs:
    """The pair pass: variances read from the two images' records."""

    def __init__(self, ntk, standard, w2, b2, rec_x, rec_y, cast=None):
        self.ntk, self.standard, self.w2, self.b2 = ntk, standard, w2, b2
        self.rec_x, self.rec_y, self.i, self.cast = rec_x, rec_y, 0, cast

    def variances(self, c, full, nd):
        qx, qy = self.rec_x[self.i], self.rec_y[self.i]
        self.i += 1
        qx, qy = qx[:, None], qy[None, :]
        if full and nd:
            return _expand(qx, nd, 0), _expand(qy, nd, 1)
        return qx, qy


def _input_cov(X, Y, full, nd, pairs):
    """x·y/C at every pixel pair (full), equal positions (diag) or for vectors."""
    C = X.shape[1]
    if nd == 0:
        return (X @ Y.T if pairs else (X * X).sum(1)) / C
    letters = "hw"[:nd] if nd == 2 else "h"
    up = letters.upper()
    if full:
        pair = "".join(a + b for a, b in zip(letters, up))
        eq = (f"ac{letters},bc{up}->ab{pair}" if pairs else f"ac{letters},ac{up}->a{pair}")
    else:
        eq = (f"ac{letters},bc{letters}->ab{letters}" if pairs
              else f"ac{letters},ac{letters}->a{letters}")
    return torch.einsum(eq, X, X if not pairs else Y) / C


# --------------------------------------------------------------------------------------
# The kernel
# --------------------------------------------------------------------------------------

def _check_kernel_args(kind, parameterization, quadrature_order, block_pairs):
    """The arguments of :class:`InfiniteWidthKernel` that are not hyperparameters."""
    if kind not in _KINDS:
        raise ValueError(f"kind must be one of {_KINDS}, got {kind!r}")
    if parameterization not in _PARAMETERIZATIONS:
        raise ValueError(f"parameterization must be one of {_PARAMETERIZATIONS}, got "
                         f"{parameterization!r}")
    if not is_int(quadrature_order) or quadrature_order < 2:
        raise ValueError(f"quadrature_order must be an int >= 2, got {quadrature_order!r}")
    if block_pairs is not None and (not is_int(block_pairs) or block_pairs < 1):
        raise ValueError(f"block_pairs must be a positive int or None, got {block_pairs!r}")


class InfiniteWidthKernel(Kernel):
    r"""The NTK or NNGP kernel of a torch network at infinite width (channels / hidden
    units → ∞), read from the module by :func:`infinite_width`; see there for the layers,
    conventions and cost.

    Inputs are tensors of the network's sample shape, (n, d) or (n, C, L) or (n, C, H, W).
    ``k(X, Y)`` is a :class:`~torchkern.gram.DenseKernelMatrix` with ``backend="dense"``
    (or ``"auto"`` and n·m ≤ ``config.dense_max_entries``), computed in blocks of image
    pairs; otherwise a lazy matrix whose rows and products are evaluated in blocks of
    image pairs, never holding more than one block's pixel-pair covariances.
    """

    vector_input = False

    def __init__(self, module: nn.Module, kind: str = "ntk", parameterization: str = "ntk",
                 weight_std=1.0, bias_std=0.0, quadrature_order: int = 64,
                 block_pairs: int | None = None):
        super().__init__()
        if not isinstance(module, nn.Module):
            raise TypeError(f"module must be a torch.nn.Module, got {type(module).__name__}")
        _check_kernel_args(kind, parameterization, quadrature_order, block_pairs)
        ops = _read(module, int(quadrature_order))
        if not any(op.kind == "affine" for op in ops):
            raise ValueError("module has no Linear or Conv layer: nothing is infinitely wide")
        object.__setattr__(self, "_module", module)
        self._ops, self._ops_order = ops, int(quadrature_order)
        self._full = _needs_full(ops)
        first = next((op for op in ops if op.kind in ("act", "residual")), None)
        self._erf_first = first is not None and first.kind == "act" and first.act is _erf
        self.kind, self.parameterization = kind, parameterization
        self.quadrature_order, self.block_pairs = int(quadrature_order), block_pairs
        _check_stds(weight_std, bias_std)
        self.register_hyperparameter("weight_std", weight_std)
        self.register_hyperparameter("bias_std", bias_std, allow_zero=True)

    @property
    def module(self):
        return self._module

    def extra_repr(self):
        return (f"kind={self.kind!r}, parameterization={self.parameterization!r}, "
                + super().extra_repr())

    def get_params(self, deep: bool = True) -> dict:
        return {"module": self._module, "kind": self.kind,
                "parameterization": self.parameterization,
                "weight_std": float(self.weight_std.detach()),
                "bias_std": float(self.bias_std.detach()),
                "quadrature_order": self.quadrature_order, "block_pairs": self.block_pairs}

    def _sub_kernel(self, name):
        return None

    def _structural_args(self) -> dict:
        # the module is kept as _module (not a sub-module): set_params(kind=...) rebuilt
        # the kernel without it (TypeError: missing 1 required positional argument)
        return {**super()._structural_args(), "module": self._module}

    def formula(self, X, Y=None):
        raise TypeError("InfiniteWidthKernel has no closed-form formula: it cannot be combined "
                        "with vector kernels in one formula; use its Gram matrices")

    def check_input(self, X, name: str = "X", **kw):
        """``X`` as a floating tensor of shape (n,) + sample shape; the sample shape is checked
        against the layers."""
        # the arguments again, as attributes set after construction: kind="NTK" silently
        # gave the NNGP, parameterization="Standard" the NTK parameterization, and a new
        # quadrature_order was ignored (the rule was built once, with the layers)
        _check_kernel_args(self.kind, self.parameterization, self.quadrature_order,
                           self.block_pairs)
        if self.quadrature_order != self._ops_order:
            self._ops, self._ops_order = _read(self._module, self.quadrature_order), \
                self.quadrature_order
        if isinstance(X, KernelInput):
            raise TypeError(f"{name} must be a tensor of network inputs, got {type(X).__name__}")
        if not isinstance(X, torch.Tensor):
            X = as_tensor(X, name, allow_1d=False)
        if X.dim() < 2 or X.shape[0] == 0:
            raise ValueError(f"{name} must have shape (n_samples, ...) with n_samples >= 1, "
                             f"got shape {tuple(X.shape)}")
        if X.is_complex():
            raise ValueError(f"{name} must be real: Complex data not supported, got dtype "
                             f"{X.dtype}")
        if not X.is_floating_point():
            X = X.to(torch.float64)   # as as_tensor reads integers (float32 before)
        # float16 / bfloat16 computed in float32, as the vector kernels do: the recursion
        # ran in half precision (NTK 1e-3 off in float16, 4e-3 in bfloat16, and variances
        # past 65504 overflowed)
        X = upcast_half(X)
        if not bool(torch.isfinite(X).all()):
            raise ValueError(f"{name} contains NaN or infinity")
        if X.dim() > 4:
            raise ValueError(f"{name} must be (n, d), (n, C, L) or (n, C, H, W), got shape "
                             f"{tuple(X.shape)}")
        out, _ = _shapes(self._ops, tuple(X.shape[1:]))
        if len(out) != 1:
            raise ValueError(f"the module's output has shape {out} per sample: end it with a "
                             f"Flatten/pooling and a Linear readout")
        return X

    # -- evaluation ----------------------------------------------------------------------
    def _ctx_args(self, like):
        w = self.weight_std.to(dtype=like.dtype, device=like.device).reshape(())
        b = self.bias_std.to(dtype=like.dtype, device=like.device).reshape(())
        return self.kind == "ntk", self.parameterization == "standard", w * w, b * b

    def _images(self, X):
        """Per-image pass: (record of variances, k(x, x)), in blocks of as many images as
        a block holds image pairs (one image's state is the size of one pair's)."""
        nd = X.dim() - 2
        step = self._block_size(X)
        records, diags = [], []
        X, cast = self._promoted(X)
        for s in range(0, X.shape[0], step):
            ctx = _Images(*self._ctx_args(X), cast=cast)
            c = _input_cov(X[s:s + step], None, self._full, nd, False)
            c, theta, _ = _run(self._ops, c, None, ctx, self._full, nd)
            records.append(ctx.record)
            diags.append(theta if self.kind == "ntk" else c)
        if len(diags) == 1:
            return records[0], diags[0]
        return [torch.cat(r) for r in zip(*records)], torch.cat(diags)

    def _pairs(self, X, Y, rx, ry):
        """k(x_i, y_i) from the images' records: one image pair at a time."""
        return _finite_gram(torch.stack([
            self._block(X[i:i + 1], Y[i:i + 1], [r[i:i + 1] for r in rx],
                        [r[i:i + 1] for r in ry])[0, 0] for i in range(X.shape[0])]))

    def _block(self, X, Y, rx, ry):
        nd = X.dim() - 2
        (X, cast), (Y, _) = self._promoted(X), self._promoted(Y)
        ctx = _Pairs(*self._ctx_args(X), rx, ry, cast=cast)
        c = _input_cov(X, Y, self._full, nd, True)
        c, theta, _ = _run(self._ops, c, None, ctx, self._full, nd)
        return theta if self.kind == "ntk" else c

    def _promoted(self, X):
        """(X, None), or (X in float64, float32) for a float32 X when the network's first
        activation is erf: its (1 + 2qx)(1 + 2qy) − 4c² cancels to ε·q² near the diagonal,
        10% off in float32 for inputs of norm ~1e3; the layers up to it run in float64 and
        the result is cast back after it (erf is bounded: later layers lose nothing)."""
        if X.dtype != torch.float32 or not self._erf_first:
            return X, None
        return X.to(torch.float64), torch.float32

    def _pair_bytes(self, X):
        P = int(np.prod(X.shape[2:])) if X.dim() > 2 else 1
        per = P * P if self._full else P
        per = max(per, 1)
        return per * X.element_size() * 12

    def _block_size(self, X):
        if self.block_pairs is not None:
            return self.block_pairs
        budget = config.block_bytes(X.device)
        return max(1, int(budget // self._pair_bytes(X)))

    def _gram(self, X, Y, rx, ry, rows=None):
        """The dense block k(X[rows], Y) computed by blocks of image pairs."""
        n, m = X.shape[0], Y.shape[0]
        rows = torch.arange(n, device=X.device) if rows is None else rows
        pairs = self._block_size(X)
        bx = max(1, min(len(rows), int(math.sqrt(pairs))))
        by = max(1, min(m, pairs // bx))
        out = torch.empty(len(rows), m, dtype=X.dtype, device=X.device)
        for s in range(0, len(rows), bx):
            ri = rows[s:s + bx]
            Xi = X[ri]
            rxi = [r[ri] for r in rx]
            for t in range(0, m, by):
                out[s:s + len(ri), t:t + by] = self._block(
                    Xi, Y[t:t + by], rxi, [r[t:t + by] for r in ry])
        return _finite_gram(out)  # inputs past the dtype's range: NaN, as other kernels refuse

    def forward(self, X, Y=None, *, backend: str | None = None) -> KernelMatrix:
        """k(X, Y): dense or lazy (class docstring)."""
        X = self.check_input(X, "X")
        if Y is not None:
            Y = self.check_input(Y, "Y")
            if Y.shape[1:] != X.shape[1:]:
                raise ValueError(f"X and Y must have the same sample shape, got "
                                 f"{tuple(X.shape[1:])} and {tuple(Y.shape[1:])}")
            Y = Y.to(dtype=X.dtype, device=X.device)
        name = _check_backend(config.backend if backend is None else backend)
        n, m = X.shape[0], (X if Y is None else Y).shape[0]
        matrix = _IWMatrix(self, X, X if Y is None else Y)
        if name == "dense" or (name == "auto" and n * m <= config.dense_max_entries):
            return DenseKernelMatrix(matrix.to_dense())
        return matrix

    def diag(self, X) -> torch.Tensor:
        """k(x_i, x_i) from the per-image pass (cost O(n·P²) for P pixels)."""
        X = self.check_input(X, "X")
        return _finite_gram(self._images(X)[1])

    def pairs(self, X, Y) -> torch.Tensor:
        """k(x_i, y_i) for paired samples."""
        X, Y = self.check_input(X, "X"), self.check_input(Y, "Y").to(X.dtype)
        if X.shape[0] != Y.shape[0]:
            raise ValueError(f"X and Y must have the same number of samples, got "
                             f"{X.shape[0]} and {Y.shape[0]}")
        rx, _ = self._images(X)
        ry, _ = self._images(Y)
        return self._pairs(X, Y, rx, ry)


class _IWMatrix(KernelMatrix):
    """k(X, Y) of an :class:`InfiniteWidthKernel`, evaluated in blocks of image pairs."""

    backend = "blocked"

    def __init__(self, kernel, X, Y, rec=None):
        self.kernel, self.X, self.Y = kernel, X, Y
        self.shape = (X.shape[0], Y.shape[0])
        self.dtype, self.device = X.dtype, X.device
        if rec is None:
            rx, dx = kernel._images(X)
            ry, dy = (rx, dx) if Y is X else kernel._images(Y)
            rec = (rx, ry, dx, dy)
        self.rec = rec

    def _transpose(self):
        rx, ry, dx, dy = self.rec
        return _IWMatrix(self.kernel, self.Y, self.X, (ry, rx, dy, dx))

    def rows(self, idx):
        idx = as_index(idx, self.shape[0], "idx", self.device)
        rx, ry = self.rec[0], self.rec[1]
        return self.kernel._gram(self.X, self.Y, rx, ry, idx)

    def _matmul(self, V):
        out = torch.empty(self.shape[0], V.shape[1], dtype=V.dtype, device=V.device)
        step = max(1, int(math.sqrt(self.kernel._block_size(self.X))))
        for s in range(0, self.shape[0], step):
            idx = torch.arange(s, min(self.shape[0], s + step), device=self.device)
            out[s:s + len(idx)] = self.rows(idx) @ V
        return out

    def to_dense(self):
        return self.rows(torch.arange(self.shape[0], device=self.device))

    def diag(self):
        k = min(self.shape)
        if self.Y is self.X:
            return _finite_gram(self.rec[2][:k])
        rx, ry = self.rec[0], self.rec[1]
        return self.kernel._pairs(self.X[:k], self.Y[:k], [r[:k] for r in rx],
                                  [r[:k] for r in ry])


def infinite_width(module: nn.Module, parameterization: str = "ntk", *, kind: str = "ntk",
                   weight_std=1.0, bias_std=0.0, quadrature_order: int = 64,
                   block_pairs: int | None = None) -> InfiniteWidthKernel:
    r"""The infinite-width NTK (``kind="ntk"``) or NNGP (``kind="nngp"``) kernel of a torch
    network, as a torchkern kernel.

    ``module`` is an ``nn.Sequential`` (nested ones included) of

    - ``nn.Linear``, ``nn.Conv1d`` / ``nn.Conv2d`` (stride, dilation, padding ``"same"``,
      ``"valid"`` or ints, zeros mode, groups=1), ``nn.ZeroPad1d/2d`` (asymmetric padding,
      e.g. JAX's "SAME" with stride 2 is ``ZeroPad2d((0, 1, 0, 1))`` + a VALID conv);
    - activations ``nn.ReLU``, ``nn.LeakyReLU`` (arc-cosine kernels, Cho and Saul 2009),
      :class:`Erf` (Williams 1997), all in closed form; ``nn.GELU``, ``nn.Tanh``,
      ``nn.Sigmoid`` by a trapezoidal quadrature rule (below);
    - ``nn.AvgPool1d/2d`` (padding 0), ``nn.AdaptiveAvgPool1d/2d`` to size 1 (global average
      pooling), ``nn.Flatten``, ``nn.Identity``, ``nn.Dropout`` (identity: the kernel is that
      of the network at inference), :class:`Residual` blocks;

    ending with a ``Linear`` readout on vectors. Any other layer raises a ``ValueError``
    naming it. The kernel is that of one output unit (all are independent and identical).

    Parameters
    ----------
    module : nn.Module
        The architecture; its weights are not read. Bias presence is (a layer built with
        ``bias=False`` has none); widths are read for the standard parameterization.
    parameterization : {"ntk", "standard"}
        Each Linear/Conv computes z = (σ_w/√N) W x + σ_b b with W, b ~ N(0, 1) ("ntk",
        Jacot et al. 2018) or z = W x + b with W ~ N(0, σ_w²/N), b ~ N(0, σ_b²)
        ("standard", Sohl-Dickstein et al. 2020), N = in_features or in_channels × kernel
        size. These are neural-tangents' ``stax.Dense/Conv(W_std=σ_w, b_std=σ_b)``. The
        NNGP is the same for both; the standard NTK depends on the layers' fan-ins, read
        from the module.
    kind : {"ntk", "nngp"}
    weight_std, bias_std : float
        σ_w > 0 and σ_b ≥ 0, the same for every layer (learnable hyperparameters).
        torch's default initialization (``kaiming_uniform_(a=√5)``: W ~ U(±1/√N), variance
        1/(3N)) is the standard parameterization with σ_w = 1/√3 and, for its
        U(±1/√N) biases, σ_b = 1/√(3N) → 0 at infinite width; He initialization for ReLU
        is σ_w = √2.
    quadrature_order : int
        Nodes per dimension of the tensor-product trapezoidal rule for GELU, Tanh and
        Sigmoid: E f(u)f(v) as Σ_ij w_i w_j f(√q_x z_i) f(a z_i + b z_j) over ``order``
        equispaced nodes z on [−8.5, 8.5], weights ∝ the normal density (Trefethen and
        Weideman 2014, "The exponentially convergent trapezoidal rule", SIAM Review);
        order² evaluations per pixel pair. Its error falls exponentially with the order,
        the faster the smaller the pre-activation variances q: with order 32 and q ≲ 2 we
        measured it ≤ 1e-9 relative against neural-tangents' closed-form GELU and a
        200-node rule for Tanh/Sigmoid.
    block_pairs : int, optional
        Image pairs evaluated at once (default: as many as fit in
        ``torchkern.config.block_bytes(device)``).

    Returns
    -------
    InfiniteWidthKernel

    Notes
    -----
    Inputs x of shape (C, H, W) start from the covariance K⁰(x, y)_{p p'} = Σ_c x_{cp}
    y_{cp'}/C between pixels p of x and p' of y. A convolution maps it to
    σ_w² (1/#F) Σ_{δ∈F} K_{p+δ, p'+δ} + σ_b² (zero outside the padded image), an
    activation to E[φ(u)φ(v)] with (u, v) of covariance [[K_{xx,pp}, K_{xy,pp'}],
    [·, K_{yy,p'p'}]], average pooling averages K over the windows of p and of p',
    global average pooling over all pixel pairs, and Flatten (followed by a Linear) over
    the equal-position pairs (Novak et al. 2019; Arora et al. 2019). The NTK follows along,
    Θ ← K_affine + σ_w² conv(Θ) at affine layers and Θ ← Θ · E[φ'(u)φ'(v)] at
    activations. When no layer pools, only the equal-position pairs are ever needed and
    are the only ones kept (Xiao et al. 2020, "Disentangling trainability and
    generalization in deep neural networks", ICML): per pair of images O(P) values instead
    of O(P²) for P pixels.

    Cost: O(n·m·P²·L) time (O(n·m·P·L) without pooling) for L layers, O(n·m) for the
    result and one block of image pairs' pixel-pair covariances of memory; on the device
    of the inputs (CUDA when they are there).

    Examples
    --------
    >>> import torch
    >>> from torch import nn
    >>> from torchkern.ntk import infinite_width
    >>> net = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(),
    ...                     nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 1))
    >>> k = infinite_width(net)
    >>> K = k(torch.randn(5, 1, 8, 8, dtype=torch.float64))
    """
    return InfiniteWidthKernel(module, kind=kind, parameterization=parameterization,
                               weight_std=weight_std, bias_std=bias_std,
                               quadrature_order=quadrature_order, block_pairs=block_pairs)


def parameterize(module: nn.Module, parameterization: str = "ntk", weight_std=1.0,
                 bias_std=0.0, random_state=None) -> nn.Module:
    r"""Initialize the Linear and Conv layers of ``module`` (in place) as
    :func:`infinite_width` assumes, so that its empirical NTK and its outputs at
    initialization tend to the analytic kernels as the widths grow.

    ``"ntk"``: each weight becomes (σ_w/√N)·W with W ~ N(0, 1) a trainable parameter
    (a ``torch.nn.utils.parametrize`` parametrization, so the gradients — hence the
    empirical NTK and SGD — are those of the NTK parameterization, Jacot et al. 2018) and
    each bias σ_b·b with b ~ N(0, 1). ``"standard"``: W ~ N(0, σ_w²/N), b ~ N(0, σ_b²)
    plainly. N is the layer's fan-in (in_features or in_channels × kernel size).

    Parameters
    ----------
    module : nn.Module
    parameterization : {"ntk", "standard"}
    weight_std, bias_std : float
    random_state : None, int or torch.Generator
        Draws the weights; None draws from torch's global generator (``torch.manual_seed``).

    Returns
    -------
    The module. Called again, it re-initializes the module (the earlier scales are
    removed, not stacked); a layer with another parametrization of its weight or bias
    raises a ValueError.
    """
    from torch.nn.utils import parametrize as _p

    if parameterization not in _PARAMETERIZATIONS:
        raise ValueError(f"parameterization must be one of {_PARAMETERIZATIONS}, got "
                         f"{parameterization!r}")
    # None draws from torch's global generator, as everywhere in torchkern: it was a fixed
    # seed 0, so every network of an ensemble initialized without a seed came out the same
    g = as_generator(random_state)
    check_positive(weight_std, "weight_std")
    check_positive(bias_std, "bias_std", allow_zero=True)
    w_std, b_std = float(weight_std), float(bias_std)
    for layer in module.modules():
        if not isinstance(layer, (nn.Linear, nn.Conv1d, nn.Conv2d)):
            continue
        _unscale(layer, _p)
        w = layer.weight
        fan_in = w[0].numel()
        with torch.no_grad():
            raw = torch.randn(w.shape, generator=g, dtype=torch.float64)
            if parameterization == "standard":
                w.copy_(raw * (w_std / math.sqrt(fan_in)))
            else:
                w.copy_(raw)
                _p.register_parametrization(layer, "weight", _Scale(w_std / math.sqrt(fan_in)))
            if layer.bias is not None:
                rb = torch.randn(layer.bias.shape, generator=g, dtype=torch.float64)
                if parameterization == "standard":
                    layer.bias.copy_(rb * b_std)
                else:
                    layer.bias.copy_(rb)
                    _p.register_parametrization(layer, "bias", _Scale(b_std))
    return module


def _unscale(layer, _p):
    """Remove a previous :func:`parameterize`'s scales from ``layer``: through them the
    new values were written into a computed copy (lost) and a second scale stacked on the
    first, so a module parameterized twice had σ_w²/N and σ_b² applied twice."""
    for name in ("weight", "bias"):
        if not _p.is_parametrized(layer, name):
            continue
        if not all(isinstance(f, _Scale) for f in layer.parametrizations[name]):
            raise ValueError(f"layer {type(layer).__name__} has a parametrization of its "
                             f"{name} (not parameterize's): parameterize needs plain weights")
        _p.remove_parametrizations(layer, name, leave_parametrized=False)


class _Scale(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return x * self.scale
