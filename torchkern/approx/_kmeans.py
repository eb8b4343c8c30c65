"""A small k-means in torch (runs where the data is: CPU or CUDA) for Nyström anchors."""
from __future__ import annotations

import torch


def _sqdist(X, C):
    """‖x_i − c_j‖², (n, m), clipped at 0 (the expansion can round below zero)."""
    return ((X * X).sum(1, keepdim=True) - 2 * X @ C.T + (C * C).sum(1)).clamp_min(0)


def _rand(n, generator, device, dtype):
    dev = generator.device if generator is not None else device
    return torch.rand(n, generator=generator, device=dev, dtype=dtype).to(device)


def kmeans(X: torch.Tensor, k: int, generator=None, max_iter: int = 100, tol: float = 1e-6):
    """Lloyd's algorithm from a k-means++ start; returns the (k, d) centroids.

    Seeding (Arthur and Vassilvitskii, 2007) draws each new center with probability
    proportional to the squared distance to the nearest chosen one. An empty cluster is
    re-seeded with the point farthest from its centroid. Iterations stop when no centroid
    moves by more than ``tol`` times the data's scale. Cost O(n·k·d) per iteration.
    """
    n = X.shape[0]
    Xw = X.to(torch.float64)
    scale = float(Xw.var(0).sum().sqrt()) or 1.0
    first = int(_rand(1, generator, X.device, torch.float64).mul(n).floor().clamp(max=n - 1))
    C = Xw[first:first + 1].clone()
    dmin = _sqdist(Xw, C).squeeze(1)
    for _ in range(1, k):
        total = dmin.sum()
        if float(total) <= 0:  # fewer distinct points than k: take any unused point
            i = int(torch.argmax((dmin >= 0).double() * _rand(n, generator, X.device, torch.float64)))
        else:
            u = _rand(1, generator, X.device, torch.float64) * total
            i = int(torch.searchsorted(torch.cumsum(dmin, 0), u).clamp(max=n - 1))
        C = torch.cat([C, Xw[i:i + 1]])
        dmin = torch.minimum(dmin, _sqdist(Xw, Xw[i:i + 1]).squeeze(1))
    for _ in range(max_iter):
        D = _sqdist(Xw, C)
        labels = D.argmin(1)
        counts = torch.bincount(labels, minlength=k).to(Xw.dtype)
        sums = torch.zeros_like(C).index_add_(0, labels, Xw)
        newC = sums / counts.clamp_min(1)[:, None]
        empty = counts == 0
        if bool(empty.any()):
            far = D.gather(1, labels[:, None]).squeeze(1).argsort(descending=True)
            newC[empty] = Xw[far[: int(empty.sum())]]
        shift = float((newC - C).norm(dim=1).max())
        C = newC
        if shift <= tol * scale:
            break
    return C.to(X.dtype)
