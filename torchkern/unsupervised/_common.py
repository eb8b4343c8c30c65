"""Small helpers shared by the unsupervised estimators (random state)."""
from __future__ import annotations

import torch

from .._validation import as_generator as generator  # noqa: F401 (re-exported)
from .._validation import check_int  # noqa: F401 (re-exported)

def randn(shape, dtype, device, gen):
    """Gaussian samples drawn on the generator's device, moved to ``device``."""
    gdev = gen.device if gen is not None else torch.device("cpu")
    return torch.randn(shape, generator=gen, device=gdev, dtype=dtype).to(device)


def warn_if_centering_cancels(diag, mean, n, dtype, who):
    r"""Warn where centering in feature space cancels most digits of the Gram matrix.

    Kernel PCA and kernel k-means see the data only through the centered Gram matrix
    K̃ = HKH (feature-space distances and covariances do not move with the mean
    embedding), whose trace tr K̃ = Σ_i K_ii − 1ᵀK1/n is the total feature-space variance.
    Each entry of K carries a rounding error of up to ε·max K_ii, so the entries of K̃ —
    of the size tr K̃ / n — keep a relative precision of about ε·tr K / tr K̃. Where
    that is above 10⁻³ (a dot-product kernel on float32 data far from the origin:
    offset 10³ gives 5·10⁻²; an RBF so wide that K ≈ 11ᵀ) a ``RuntimeWarning`` says so:
    the results hold fewer than three digits. Cost: O(n) given the diagonal and the mean.
    """
    import os
    import sys
    import warnings
    tr = float(diag.detach().sum(dtype=torch.float64))
    centered = tr - n * float(mean)
    if not centered > 0 or not tr > 0:
        return
    lost = torch.finfo(dtype).eps * tr / centered
    if lost > 1e-3:
        # point at the caller's line: the first frame outside torchkern (and torch's
        # no_grad decorators)
        roots = (os.path.dirname(os.path.dirname(__file__)), os.path.dirname(torch.__file__))
        level, frame = 2, sys._getframe(1)
        while frame is not None and frame.f_code.co_filename.startswith(roots):
            level, frame = level + 1, frame.f_back
        warnings.warn(f"{who}: the {str(dtype).replace('torch.', '')} Gram matrix varies "
                      f"around its mean by {centered / tr:.1e} of its diagonal, so the "
                      f"entries of the centered Gram keep a relative precision of only "
                      f"~{lost:.0e} (small components and distances lose digits first): "
                      f"center the data (a dot-product kernel), or use float64",
                      RuntimeWarning, stacklevel=level)
