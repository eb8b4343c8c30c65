"""Small helpers shared by the unsupervised estimators (random state, integer checks)."""
from __future__ import annotations

import torch

from .._validation import as_generator as generator  # noqa: E402,F401 (re-exported)

def randn(shape, dtype, device, gen):
    """Gaussian samples drawn on the generator's device, moved to ``device``."""
    gdev = gen.device if gen is not None else torch.device("cpu")
    return torch.randn(shape, generator=gen, device=gdev, dtype=dtype).to(device)

def check_int(value, name: str, low: int = 1, high: int | None = None) -> int:
    """``value`` as an int in [low, high], else a ValueError naming the argument."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (
            high is not None and value > high):
        bound = f"{low} <= {name}" + (f" <= {high}" if high is not None else "")
        raise ValueError(f"{name} must be an int with {bound}, got {value!r}")
    return value
