"""Pairwise dynamic programmes batched over pairs of sequences."""
from __future__ import annotations

import math

import torch

from ._encode import SequenceSet

__all__ = ["pairwise_gram", "pairwise_pairs", "decayed_cumsum",
           "log_decayed_cumsum"]


def pairwise_gram(X: SequenceSet, Y: SequenceSet | None, pair_fn, cells,
                  budget: int = 1 << 17) -> torch.Tensor:
    """The dense (n, m) matrix of ``pair_fn`` over all pairs of X and Y (of X when Y is
    None: the upper triangle only, mirrored).

    ``pair_fn(xc, xl, yc, yl)`` takes P pairs as codes (P, Lx), lengths (P,), codes
    (P, Ly), lengths (P,) and returns their (P,) values. Sequences are sorted by length
    and cut into tiles of similar lengths, each tile one batched call whose padding is
    trimmed to the tile's longest sequences; a tile holds at most
    ``budget / cells(Lx, Ly)`` pairs (``cells`` = elements a pair's DP keeps alive). The
    default 2^17 elements (1 MB in float64) keeps a tile's temporaries in cache; on the
    2-core CPU machines this project measures on, tiles of 2^20 and more were 1.5-7x
    slower (page faults of fresh large temporaries and two-thread overhead).
    """
    sym = Y is None
    Y = X if sym else Y
    n, m = len(X), len(Y)
    out = torch.zeros(n, m, dtype=X.dtype, device=X.device)
    ox, oy = torch.argsort(X.lengths), torch.argsort(Y.lengths)
    lx, ly = X.lengths[ox].tolist(), Y.lengths[oy].tolist()
    r0 = 0
    while r0 < n:
        # About square tiles: as many rows as columns fit for sequences this long.
        r1 = min(n, r0 + max(1, math.isqrt(budget // cells(max(lx[r0], 1), max(lx[r0], 1)))))
        Lx = max(lx[r1 - 1], 1)
        c0 = r0 if sym else 0
        while c0 < m:
            # The widest tile (columns sorted by length) that keeps within the budget.
            lo, hi = c0 + 1, m
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if (r1 - r0) * (mid - c0) * cells(Lx, max(ly[mid - 1], 1)) <= budget:
                    lo = mid
                else:
                    hi = mid - 1
            c1 = lo
            xi, yj = ox[r0:r1], oy[c0:c1]
            a = xi.repeat_interleave(c1 - c0)
            b = yj.repeat(r1 - r0)
            Ly = max(ly[c1 - 1], 1)
            vals = pair_fn(X.padded(a, Lx), X.lengths[a], Y.padded(b, Ly), Y.lengths[b])
            out[a, b] = vals
            if sym:
                out[b, a] = vals
            c0 = c1
        r0 = r1
    if sym:
        # A tile on the diagonal evaluates (a, b) and (b, a) both, whose rounding differs
        # (the DPs are not symmetric in x and y): keep one triangle.
        out = out.triu() + out.triu(1).T
    return out


def pairwise_pairs(X: SequenceSet, Y: SequenceSet | None, pair_fn, cells,
                   budget: int = 1 << 17) -> torch.Tensor:
    """``pair_fn`` of each pair (x_i, y_i), (n,) for X and Y of n sequences each (of each
    x_i with itself when Y is None): n evaluations, never the n × n ones.

    Pairs are sorted by their longer sequence and evaluated in batches whose padding is
    trimmed to the batch's longest x and longest y; a batch holds at most
    ``budget / cells(Lx, Ly)`` pairs (as in :func:`pairwise_gram`)."""
    n = len(X)
    lx = X.lengths
    ly = lx if Y is None else Y.lengths
    out = torch.zeros(n, dtype=X.dtype, device=X.device)
    order = torch.argsort(torch.maximum(lx, ly))
    a, b = lx[order].tolist(), ly[order].tolist()
    s = 0
    while s < n:
        Lx, Ly, e = max(a[s], 1), max(b[s], 1), s + 1
        while e < n and (e + 1 - s) * cells(max(Lx, a[e]), max(Ly, b[e])) <= budget:
            Lx, Ly, e = max(Lx, a[e]), max(Ly, b[e]), e + 1
        idx = order[s:e]
        xc = X.padded(idx, Lx)
        yc = xc if Y is None else Y.padded(idx, Ly)
        out[idx] = pair_fn(xc, lx[idx], yc, ly[idx])
        s = e
    return out


def decayed_cumsum(b: torch.Tensor, lam: float, dim: int, max_log_scale: float | None = None
                   ) -> torch.Tensor:
    """y_t = λ y_{t-1} + b_t along ``dim`` (y_0 = b_0), i.e. y_t = Σ_{s ≤ t} λ^{t-s} b_s.

    Computed as λ^t · cumsum(λ^{-s} b_s) over segments short enough that λ^{±s} stays
    within e^{±max_log_scale} (default: a quarter of the dtype's range), the value at a
    segment's end carried into the next."""
    if lam == 1.0:
        return b.cumsum(dim)
    L = b.shape[dim]
    if max_log_scale is None:
        max_log_scale = math.log(torch.finfo(b.dtype).max) / 4
    seg = max(1, int(max_log_scale / abs(math.log(lam))))
    shape = [1] * b.dim()
    out, carry = [], None
    for s in range(0, L, seg):
        part = b.narrow(dim, s, min(seg, L - s))
        shape[dim] = part.shape[dim]
        t = torch.arange(part.shape[dim], dtype=b.dtype, device=b.device).reshape(shape)
        up, down = lam ** -t, lam ** t
        y = (part * up).cumsum(dim) * down
        if carry is not None:
            y = y + carry * (down * lam)
        carry = y.narrow(dim, y.shape[dim] - 1, 1)
        out.append(y)
    return torch.cat(out, dim) if len(out) > 1 else out[0]


def log_decayed_cumsum(log_b: torch.Tensor, lam: float, dim: int) -> torch.Tensor:
    """log y_t of y_t = Σ_{s ≤ t} λ^{t-s} b_s along ``dim``, from log b (−inf for b = 0):
    t log λ + logcumsumexp(log b_s − s log λ). Any λ > 0 and length: nothing leaves the
    float64 range, where the products of :func:`decayed_cumsum` overflow once
    λ^{length} does."""
    shape = [1] * log_b.dim()
    shape[dim] = log_b.shape[dim]
    ramp = (torch.arange(log_b.shape[dim], dtype=log_b.dtype, device=log_b.device)
            * math.log(lam)).reshape(shape)
    return (log_b - ramp).logcumsumexp(dim) + ramp


def cosine_from_logs(L: torch.Tensor, lx: torch.Tensor, ly: torch.Tensor,
                     undefined: torch.Tensor | None = None) -> torch.Tensor:
    """K(x, y)/√(K(x, x) K(y, y)) as exp(L − (lx + ly)/2) from L = log K(x, y) and the
    logs lx, ly of the diagonals broadcast against L (``lx[:, None]``, ``ly[None, :]`` for
    a Gram matrix, (n,) each for pairs), with no overflow where K itself does; 0 where a
    log is −∞ (an empty pair: a string shorter than the kernel's substrings) — of L, or of
    ``undefined`` where the caller's L is a function of another log."""
    K = torch.exp(L - (lx + ly) / 2)
    zero = torch.isinf(L if undefined is None else undefined)
    return K.masked_fill(zero | torch.isinf(lx) | torch.isinf(ly), 0.0)
