"""Small helpers shared by the unsupervised estimators (random state)."""
from __future__ import annotations

import torch

from .._validation import as_generator as generator  # noqa: F401 (re-exported)
from .._validation import check_int  # noqa: F401 (re-exported)
# the centering-cancellation check that torchkern.stats uses too
from ..stats._common import (cheap_trace, total,  # noqa: F401 (re-exported)
                             warn_if_centering_cancels)


def randn(shape, dtype, device, gen):
    """Gaussian samples drawn on the generator's device, moved to ``device``."""
    gdev = gen.device if gen is not None else torch.device("cpu")
    return torch.randn(shape, generator=gen, device=gdev, dtype=dtype).to(device)
