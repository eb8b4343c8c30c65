"""A small k-means in torch (runs where the data is: CPU or CUDA) for Nyström anchors."""
from __future__ import annotations

import math

import torch


def _sqdist(X, C):
    """‖x_i − c_j‖², (n, m), clipped at 0 (the expansion can round below zero)."""
    D = torch.addmm((X * X).sum(1, keepdim=True), X, C.T, alpha=-2.0)
    return D.add_((C * C).sum(1)).clamp_min_(0)


def _rand(n, generator, device, dtype):
    dev = generator.device if generator is not None else device
    return torch.rand(n, generator=generator, device=dev, dtype=dtype).to(device)


def _seed(Xw, k, generator):
    """Greedy k-means++: each new center is the best (lowest potential) of
    2 + ⌊log k⌋ candidates drawn with probability ∝ squared distance to the chosen ones."""
    n = Xw.shape[0]
    trials = 2 + int(math.log(k))
    first = int(_rand(1, generator, Xw.device, torch.float64).mul(n).floor().clamp(max=n - 1))
    C = [Xw[first]]
    dmin = _sqdist(Xw, Xw[first:first + 1]).squeeze(1)
    for _ in range(1, k):
        total = dmin.sum()
        if float(total) <= 0:  # fewer distinct points than k: any point will do
            cand = (_rand(trials, generator, Xw.device, torch.float64) * n).long().clamp(max=n - 1)
        else:
            u = _rand(trials, generator, Xw.device, torch.float64) * total
            cand = torch.searchsorted(torch.cumsum(dmin, 0), u).clamp(max=n - 1)
        pot = torch.minimum(dmin[:, None], _sqdist(Xw, Xw[cand]))  # (n, trials)
        best = int(pot.sum(0).argmin())
        C.append(Xw[cand[best]])
        dmin = pot[:, best]
    return torch.stack(C)


def _lloyd(Xw, C, max_iter, tol):
    """Lloyd iterations; stop when the inertia decreases by less than ``tol`` (relative)."""
    k = C.shape[0]
    prev = math.inf
    for _ in range(max_iter):
        D = _sqdist(Xw, C)
        dist, labels = D.min(1)
        inertia = float(dist.sum())
        if inertia >= prev * (1 - tol):
            break
        prev = inertia
        counts = torch.bincount(labels, minlength=k).to(Xw.dtype)
        sums = torch.zeros_like(C).index_add_(0, labels, Xw)
        newC = sums / counts.clamp_min(1)[:, None]
        empty = counts == 0
        if bool(empty.any()):  # re-seed with the points farthest from their centroid
            newC[empty] = Xw[dist.argsort(descending=True)[: int(empty.sum())]]
        C = newC
    return C, float(_sqdist(Xw, C).min(1).values.sum())


def kmeans(X: torch.Tensor, k: int, generator=None, *, n_init: int = 1, max_iter: int = 30,
           tol: float = 1e-4) -> torch.Tensor:
    """Lloyd's algorithm from ``n_init`` greedy k-means++ starts; the (k, d) centroids of
    the run with the lowest inertia Σ_i min_j ‖x_i − c_j‖².

    Seeding: Arthur and Vassilvitskii (2007), with the greedy candidate trials scikit-learn
    also uses. An empty cluster is re-seeded with the point farthest from its centroid.
    Iterations stop when the inertia decreases by less than ``tol`` (relative); the default
    single start is scikit-learn's ``n_init="auto"`` for k-means++ seeding.
    Cost O(n·k·d) per iteration, in float64 on the data's device.
    """
    Xw = X.to(torch.float64)
    best, best_inertia = None, math.inf
    for _ in range(n_init):
        C, inertia = _lloyd(Xw, _seed(Xw, k, generator), max_iter, tol)
        if inertia < best_inertia:
            best, best_inertia = C, inertia
    return best.to(X.dtype)
