"""Fused block reductions of any kernel formula, compiled by ``torch.compile`` (Inductor:
C++/OpenMP on the CPU, Triton on CUDA).

The product K V is cut into tiles of B rows × C columns; one compiled function evaluates
a tile's kernel values and reduces them against V's rows in the same loop, so no tile of K
is written to memory on the forward pass, and one compiled vector-Jacobian product gives
the tile's gradients on the backward pass. Tiles have fixed shapes — inputs are padded to
whole tiles — so a formula compiles once per dtype and *shape bucket*: B and C are the
device's tile sizes, or the next power of two of n and m when those are smaller; the
number of right-hand sides r is rounded up to a power of two. Compiled code is cached by
``torch.compile`` per formula (by its code and the kernel's static attributes) and on disk
by Inductor, which loads the compiled libraries it finds there: before compiling, an
Inductor (or Triton) cache directory that another user could write to (a shared
``$TORCHINDUCTOR_CACHE_DIR``, or a ``/tmp/torchinductor_<user>`` made by someone else) is
replaced for this process by a private one, with a warning.
"""
from __future__ import annotations

import os
import warnings

import torch

__all__ = ["tiled_matmul", "tile_shape"]

_TILES = {"cpu": (256, 4096), "cuda": (2048, 8192)}
_COMPILED: dict = {}


def _pow2_at_least(k: int, floor: int) -> int:
    return max(floor, 1 << max(0, int(k - 1).bit_length()))


def tile_shape(n: int, m: int, r: int, device) -> tuple:
    """The (rows, columns, right-hand sides) bucket of an (n, m) product with r columns."""
    B, C = _TILES.get(torch.device(device).type, _TILES["cuda"])
    return min(B, _pow2_at_least(n, 16)), min(C, _pow2_at_least(m, 64)), _pow2_at_least(r, 1)


def _tile_forward(block, xs, ys, ps, V):
    K = block(xs, ys, ps)  # (b, c): fused into the reduction by Inductor
    return (K[:, :, None] * V[None, :, :]).sum(1)


def _tile_backward(block, xs, ys, ps, V, G):
    K, pull = torch.func.vjp(lambda a, b, c: block(a, b, c), xs, ys, ps)
    gxs, gys, gps = pull(G @ V.T)
    return gxs, gys, gps, K.T @ G


def _compiled(name):
    if name not in _COMPILED:
        fn = {"forward": _tile_forward, "backward": _tile_backward}[name]
        _COMPILED[name] = torch.compile(fn, dynamic=False)
    return _COMPILED[name]


_CHECKED: set = set()


def _private_cache_dirs() -> None:
    """Point ``$TORCHINDUCTOR_CACHE_DIR`` (and ``$TRITON_CACHE_DIR`` when set) to a private
    directory (:func:`.native.cache_dir`) when the one Inductor would use is not private
    (:func:`.native.is_private_dir`): a library planted there would be loaded."""
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir
    from .native import cache_dir, is_private_dir
    for var, default in (("TORCHINDUCTOR_CACHE_DIR", default_cache_dir),
                         ("TRITON_CACHE_DIR", None)):
        path = os.environ.get(var) or (default() if default else None)
        if path is None or path in _CHECKED:
            continue
        try:
            os.makedirs(path, mode=0o700, exist_ok=True)
        except OSError:
            pass
        if not is_private_dir(path):
            private = cache_dir() / var.split("_")[0].lower()
            private.mkdir(mode=0o700, exist_ok=True)
            os.environ[var] = path = str(private)
            warnings.warn(f"{var} was a directory that other users can write to; torchkern "
                          f"set it to {private} for this process", RuntimeWarning,
                          stacklevel=4)
        _CHECKED.add(path)


def _call(name, *args):
    import torch._dynamo.config as dc
    _private_cache_dirs()
    # Every (formula, dtype, bucket) is one cache entry of the same code object: raise
    # dynamo's per-code limit (8) while our calls run, instead of process-wide.
    limit = "recompile_limit" if hasattr(dc, "recompile_limit") else "cache_size_limit"
    with dc.patch(**{limit: 512}):
        return _compiled(name)(*args)


def _pad_rows(t: torch.Tensor, total: int, zero: bool = False) -> torch.Tensor:
    """t with rows appended up to ``total``: copies of its last row (finite kernel values
    for any formula), or zeros (``zero=True``, for V and G)."""
    extra = total - t.shape[0]
    if extra == 0:
        return t
    pad = t.new_zeros(extra, t.shape[1]) if zero else t[-1:].expand(extra, t.shape[1])
    return torch.cat([t, pad])


def _padded(xs, ys, V):
    """Sizes (n, m, r), the tile shape (B, C, R), and xs, ys, V padded to whole tiles
    (rows to multiples of B and C, V's columns to R), detached."""
    n, m, r = xs[0].shape[0], ys[0].shape[0], V.shape[1]
    B, C, R = tile_shape(n, m, r, V.device)
    nb, mb = -(-n // B) * B, -(-m // C) * C
    xs_p = [_pad_rows(x.detach(), nb) for x in xs]
    ys_p = [_pad_rows(y.detach(), mb) for y in ys]
    Vp = torch.nn.functional.pad(_pad_rows(V.detach(), mb, zero=True), (0, R - r))
    return (n, m, r), (B, C, R), xs_p, ys_p, Vp


class _TiledMatmul(torch.autograd.Function):
    """out = K V tile by tile with compiled tiles; backward by compiled tile VJPs."""

    @staticmethod
    def forward(ctx, block, nx, ny, V, *tensors):
        xs, ys, ps = tensors[:nx], tensors[nx:nx + ny], tensors[nx + ny:]
        (n, m, r), (B, C, R), xs_p, ys_p, Vp = _padded(xs, ys, V)
        nb, mb = xs_p[0].shape[0], ys_p[0].shape[0]
        out = V.new_zeros(nb, R)
        for s in range(0, nb, B):
            xb = [x[s:s + B] for x in xs_p]
            for c in range(0, mb, C):
                out[s:s + B] += _call("forward", block, xb, [y[c:c + C] for y in ys_p],
                                      list(ps), Vp[c:c + C])
        ctx.block, ctx.nx, ctx.ny = block, nx, ny
        ctx.save_for_backward(V, *tensors)
        return out[:n, :r]

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, G):
        V, *tensors = ctx.saved_tensors
        nx, ny, block = ctx.nx, ctx.ny, ctx.block
        xs, ys, ps = tensors[:nx], tensors[nx:nx + ny], [p.detach() for p in tensors[nx + ny:]]
        (n, m, r), (B, C, R), xs_p, ys_p, Vp = _padded(xs, ys, V)
        nb, mb = xs_p[0].shape[0], ys_p[0].shape[0]
        Gp = torch.nn.functional.pad(_pad_rows(G.contiguous(), nb, zero=True), (0, R - r))
        gxs = [torch.zeros_like(x) for x in xs_p]
        gys = [torch.zeros_like(y) for y in ys_p]
        gps = [torch.zeros_like(p) for p in ps]
        gV = torch.zeros_like(Vp)
        for s in range(0, nb, B):
            xb = [x[s:s + B] for x in xs_p]
            for c in range(0, mb, C):
                tx, ty, tp, tv = _call("backward", block, xb, [y[c:c + C] for y in ys_p],
                                       ps, Vp[c:c + C], Gp[s:s + B])
                for a, g in enumerate(tx):
                    gxs[a][s:s + B] += g
                for a, g in enumerate(ty):
                    gys[a][c:c + C] += g
                for a, g in enumerate(tp):
                    gps[a] += g
                gV[c:c + C] += tv
        need = ctx.needs_input_grad[4:]
        grads = [g[:n] for g in gxs] + [g[:m] for g in gys] + gps
        grads = [g if q else None for g, q in zip(grads, need)]
        return (None, None, None, gV[:m, :r] if ctx.needs_input_grad[3] else None, *grads)


def tiled_matmul(block, xs, ys, ps, V):
    """K V for K = ``block(xs, ys, ps)`` (a function returning the dense (b, c) kernel
    block of row variables ``xs`` against column variables ``ys``), tile by compiled tile;
    differentiable in V and in every tensor of xs, ys and ps. Cost O(n·m·(w + r)) time
    for inputs of total width w, O((n + m)(w + r) + B·C) memory."""
    return _TiledMatmul.apply(block, len(xs), len(ys), V, *xs, *ys, *ps)
