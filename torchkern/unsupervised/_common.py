"""Small helpers shared by the unsupervised estimators (random state, integer checks)."""
from __future__ import annotations

import torch


def generator(random_state):
    """A CPU ``torch.Generator`` (or None for torch's global RNG) from ``random_state``."""
    if random_state is None or isinstance(random_state, torch.Generator):
        return random_state
    if isinstance(random_state, bool) or not isinstance(random_state, int):
        raise TypeError(f"random_state must be None, an int or a torch.Generator, "
                        f"got {type(random_state).__name__}")
    return torch.Generator().manual_seed(random_state)


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
