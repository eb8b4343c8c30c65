"""Input checks shared by every layer: clear errors that name the argument."""
from __future__ import annotations

import numpy as np
import torch


def as_tensor(X, name: str = "X", *, dtype=None, device=None, allow_1d: bool = True,
              finite: bool = True, min_rows: int = 1) -> torch.Tensor:
    """Convert ``X`` (tensor, array or nested list) to a floating 2-D tensor and check it.

    A 1-D input is read as n samples of dimension one. Integer and boolean data become the
    default floating dtype; NumPy float64 stays float64.
    """
    if isinstance(X, torch.Tensor):
        T = X
    elif isinstance(X, np.ndarray) or isinstance(X, (list, tuple)):
        T = torch.as_tensor(np.asarray(X))
    else:
        raise TypeError(f"{name} must be a torch.Tensor or a NumPy array, got {type(X).__name__}")
    if T.is_complex():
        raise TypeError(f"{name} must be real, got dtype {T.dtype}")
    if not T.is_floating_point():
        T = T.to(torch.get_default_dtype())
    if dtype is not None or device is not None:
        T = T.to(dtype=dtype or T.dtype, device=device or T.device)
    if T.dim() == 1 and allow_1d:
        T = T.unsqueeze(-1)
    if T.dim() != 2:
        raise ValueError(f"{name} must be a 2-D array of shape (n_samples, n_features), "
                         f"got shape {tuple(T.shape)}")
    if T.shape[0] < min_rows:
        raise ValueError(f"{name} must have at least {min_rows} sample(s), got shape {tuple(T.shape)}")
    if T.shape[1] == 0:
        raise ValueError(f"{name} must have at least one feature, got shape {tuple(T.shape)}")
    if finite and not bool(torch.isfinite(T).all()):
        raise ValueError(f"{name} contains NaN or infinity")
    return T


def as_vector(y, name: str = "y", *, n: int | None = None, dtype=None, device=None,
              finite: bool = True) -> torch.Tensor:
    """Convert ``y`` to a tensor of shape (n,) or (n, r), checking its length against ``n``."""
    if isinstance(y, torch.Tensor):
        T = y
    else:
        T = torch.as_tensor(np.asarray(y))
    if dtype is not None or device is not None:
        T = T.to(dtype=dtype or T.dtype, device=device or T.device)
    if T.dim() not in (1, 2):
        raise ValueError(f"{name} must have shape (n,) or (n, r), got {tuple(T.shape)}")
    if n is not None and T.shape[0] != n:
        raise ValueError(f"{name} has {T.shape[0]} rows but {n} were expected")
    if finite and T.is_floating_point() and not bool(torch.isfinite(T).all()):
        raise ValueError(f"{name} contains NaN or infinity")
    return T


def check_positive(value, name: str, *, allow_zero: bool = False) -> None:
    """Raise ValueError unless every entry of ``value`` is > 0 (or >= 0)."""
    t = torch.as_tensor(value, dtype=torch.float64)
    ok = (t >= 0) if allow_zero else (t > 0)
    if not bool(torch.isfinite(t).all()) or not bool(ok.all()):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be finite and {bound}, got {value!r}")


def as_generator(random_state) -> torch.Generator | None:
    """A ``torch.Generator`` from ``random_state``: None (torch's global generator), an
    int seed, or a Generator passed through."""
    if random_state is None or isinstance(random_state, torch.Generator):
        return random_state
    if isinstance(random_state, bool) or not isinstance(random_state, (int, np.integer)):
        raise TypeError(f"random_state must be None, an int or a torch.Generator, "
                        f"got {type(random_state).__name__}")
    return torch.Generator().manual_seed(int(random_state))
