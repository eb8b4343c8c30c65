r"""The median heuristic for the bandwidth of the Gaussian kernel."""
from __future__ import annotations

import math

import torch

from .._validation import as_tensor, is_int
from ._common import check_samples, generator, randperm

__all__ = ["median_heuristic"]


def median_heuristic(X, Y=None, *, max_samples: int = 1000, random_state=None) -> float:
    r"""Median pairwise distance of the (pooled) sample, as an RBF lengthscale.

    Returns ℓ = median_{i<j} ‖z_i − z_j‖ over the rows z of X (or of [X; Y]), for use
    as ``RBF(lengthscale=ℓ)``. torchkern's RBF is exp(−‖x − y‖²/(2ℓ²)), so this is the
    convention of Gretton et al. (2012), where the Gaussian width σ equals the median
    distance; in scikit-learn terms γ = 1/(2ℓ²). (Papers that write exp(−‖x − y‖²/σ²)
    with σ the median correspond to ℓ = σ/√2.)

    The median is numpy's (the mean of the two middle values for an even count). Zero
    distances (duplicate rows) are kept unless the median itself is zero, in which case the
    median of the positive distances is returned.

    Cost: O(s²·d) time and O(s²) memory for s = min(n, max_samples) rows.

    Parameters
    ----------
    X : Tensor or ndarray of shape (n, d)
    Y : Tensor or ndarray of shape (m, d), optional
        Pooled with X (for two-sample tests, where the bandwidth must not depend on which
        sample a point came from).
    max_samples : int, default 1000
        Above this many rows, a uniform random subsample of this size is used.
    random_state : None, int or torch.Generator
        Chooses the subsample.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If all points coincide (every distance is zero) or fewer than two rows are given.
    """
    if Y is None:
        Z = as_tensor(X, "X")
    else:
        X, Y = check_samples(X, Y)
        Z = torch.cat([X, Y])
    if not is_int(max_samples) or max_samples < 2:
        raise ValueError(f"max_samples must be an int >= 2, got {max_samples!r}")
    if Z.shape[0] < 2:
        raise ValueError(f"the median heuristic needs at least 2 points, got {Z.shape[0]}")
    Z = Z.detach()
    if Z.shape[0] > max_samples:
        Z = Z[randperm(Z.shape[0], generator(random_state), Z.device)[:max_samples]]
    # distances of Z/s, times s, for s the power of 2 nearest max |z| (exact: the same
    # bits as unscaled wherever that neither overflows nor underflows): ‖z_i − z_j‖²
    # overflowed to inf beyond ~1e154 (the median came out inf) and underflowed to 0
    # below ~1e-162 ("all points coincide")
    Z = Z.to(torch.float64)
    top = float(Z.abs().max())
    scale = math.ldexp(1.0, math.frexp(top)[1]) if top > 0 else 1.0
    d = torch.pdist(Z / scale) * scale
    med = _median(d)
    if med == 0.0:
        positive = d[d > 0]
        if positive.numel() == 0:
            raise ValueError("the median heuristic is undefined: all points coincide")
        med = _median(positive)
    return med


def _median(v: torch.Tensor) -> float:
    """numpy's median (mean of the two middle values for an even count), in O(len(v))."""
    k = v.numel() // 2
    upper = v.kthvalue(k + 1).values
    if v.numel() % 2:
        return float(upper)
    return float((v.kthvalue(k).values + upper) / 2)
