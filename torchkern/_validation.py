"""Input checks shared by every layer: clear errors that name the argument."""
from __future__ import annotations

import numbers
import os
import sys

import numpy as np
import torch


def as_tensor(X, name: str = "X", *, dtype=None, device=None, allow_1d: bool = True,
              finite: bool = True, min_rows: int = 1) -> torch.Tensor:
    """Convert ``X`` (tensor, array, nested list or array-like such as a pandas DataFrame) to
    a floating 2-D tensor and check it.

    A 1-D input is read as n samples of dimension one when ``allow_1d`` (kernels do);
    estimators pass ``allow_1d=False`` and get scikit-learn's "Reshape your data" error.
    Integer and boolean data become float64 (scikit-learn's convention: 2**40 + 1 stays
    exact); float32 stays float32. Sparse and complex inputs are refused with a clear error.
    """
    if isinstance(X, torch.Tensor):
        check_not_meta(X, name)
        if X.layout != torch.strided:
            raise TypeError(f"{name}: sparse input is not supported; pass a dense tensor "
                            f"(X.to_dense())")
        T = X
    elif isinstance(X, (str, bytes)) or X is None:
        raise TypeError(f"{name} must be a torch.Tensor or a NumPy array, got {type(X).__name__}")
    elif _is_scipy_sparse(X):
        raise TypeError(f"{name}: sparse input is not supported; pass a dense array "
                        f"(X.toarray())")
    elif isinstance(X, (np.ndarray, list, tuple)) or hasattr(X, "__array__"):
        try:
            A = np.asarray(X)
        except ValueError as exc:  # ragged nested lists
            raise ValueError(f"{name} must be a rectangular array of numbers: {exc}") from None
        if A.dtype == object:
            A = A.astype(np.float64)  # TypeError naming the offending element if not numeric
        elif A.dtype.kind in "US":
            raise TypeError(f"{name} must hold numbers, got an array of strings")
        T = torch.as_tensor(_writable(A))
    else:
        raise TypeError(f"{name} must be a torch.Tensor or a NumPy array, got {type(X).__name__}")
    if T.is_complex():
        raise ValueError(f"{name} must be real: Complex data not supported, got dtype {T.dtype}")
    if not T.is_floating_point():
        T = T.to(torch.float64)
    if dtype is not None or device is not None:
        T = T.to(dtype=dtype or T.dtype, device=device or T.device)
    if T.dim() == 1 and allow_1d:
        T = T.unsqueeze(-1)
    if T.dim() == 1 or T.dim() == 0:
        raise ValueError(f"{name} must be a 2-D array of shape (n_samples, n_features), got "
                         f"shape {tuple(T.shape)}. Reshape your data either using "
                         f"X.reshape(-1, 1) if your data has a single feature or "
                         f"X.reshape(1, -1) if it contains a single sample.")
    if T.dim() != 2:
        raise ValueError(f"{name} must be a 2-D array of shape (n_samples, n_features), "
                         f"got shape {tuple(T.shape)}")
    if T.shape[0] < min_rows:
        raise ValueError(f"{name} must have at least {min_rows} sample(s): found "
                         f"{T.shape[0]} sample(s) (shape={tuple(T.shape)}) while a minimum "
                         f"of {min_rows} is required.")
    if T.shape[1] == 0:
        raise ValueError(f"{name} must have at least one feature: found 0 feature(s) "
                         f"(shape={tuple(T.shape)}) while a minimum of 1 is required.")
    if finite and not bool(torch.isfinite(T).all()):
        raise ValueError(f"{name} contains NaN or infinity")
    return T


def symmetry_gap(K: torch.Tensor) -> tuple[float, float]:
    """(max |K − Kᵀ|, max |K|) of a square tensor, read in square tiles: K[I, J] against
    K[J, I]ᵀ for the tiles on and above the diagonal, so one pass over K with no n × n
    temporary and one host synchronization. max |K| is taken over those tiles (the rest
    is within the gap of them)."""
    n = K.shape[0]
    if n == 0:
        return 0.0, 0.0
    K = K.detach()
    t = 1024
    gaps, scales = [], []
    for i in range(0, n, t):
        for j in range(i, n, t):
            a = K[i:i + t, j:j + t]
            gaps.append((a - K[j:j + t, i:i + t].T).abs().max())
            scales.append(a.abs().max())
    gap, scale = torch.stack([torch.stack(gaps).max(), torch.stack(scales).max()]).tolist()
    return gap, scale


def check_symmetric(K: torch.Tensor, name: str = "X",
                    context: str = "kernel='precomputed'") -> None:
    """Raise a ValueError naming ``name`` unless the square tensor ``K`` is symmetric up to
    rounding: max |K − Kᵀ| ≤ √ε · max |K| with ε the machine epsilon of K's dtype (a Gram
    matrix computed in blocks or in float32 is symmetric only to rounding). Estimators
    given a precomputed Gram matrix read one triangle or the other, so an asymmetric one
    would give results that depend on which, silently. ``context`` says in the message
    why a symmetric matrix is expected."""
    gap, scale = symmetry_gap(K)
    if gap > torch.finfo(K.dtype).eps ** 0.5 * scale:
        raise ValueError(f"{name} must be a symmetric Gram matrix ({context}): "
                         f"max |{name} - {name}.T| = {gap:.3g} against max |{name}| = "
                         f"{scale:.3g}; symmetrize it, e.g. ({name} + {name}.T) / 2")


def caller_stacklevel() -> int:
    """The ``stacklevel`` that makes a warning raised by the calling function point at the
    first frame outside torchkern, torch and scikit-learn (the user's line, also through
    ``fit_transform``, a Pipeline or a ``no_grad`` decorator)."""
    here = os.path.dirname(os.path.abspath(__file__)) + os.sep
    roots = (here,) + tuple(os.path.dirname(m.__file__) + os.sep
                            for m in map(sys.modules.get, ("torch", "sklearn"))
                            if m is not None and getattr(m, "__file__", None))
    level, frame = 1, sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(roots):
        level, frame = level + 1, frame.f_back
    return level


def check_not_meta(X, name: str = "X") -> None:
    """Raise a ValueError naming ``name`` when ``X`` is a tensor on the meta device (a shape
    and dtype without data: nothing can be computed from it)."""
    if isinstance(X, torch.Tensor) and X.is_meta:
        raise ValueError(f"{name} is a tensor on the 'meta' device, which has a shape "
                         f"{tuple(X.shape)} but no data; pass a tensor with data (on the CPU "
                         f"or a GPU), e.g. materialize it with .to_empty(device=...) and fill "
                         f"it")


def _writable(A: np.ndarray) -> np.ndarray:
    """A itself, or a copy where it is read-only (pandas' copy-on-write frames, memory
    maps): torch shares the memory of the arrays it wraps and warns on read-only ones."""
    return A if A.flags.writeable else A.copy()


def _is_scipy_sparse(X) -> bool:
    try:
        import scipy.sparse as sp
    except ImportError:  # pragma: no cover - scipy is a dependency
        return False
    return sp.issparse(X)


def as_vector(y, name: str = "y", *, n: int | None = None, dtype=None, device=None,
              finite: bool = True) -> torch.Tensor:
    """Convert ``y`` to a tensor of shape (n,) or (n, r), checking its length against ``n``."""
    if y is None:
        raise ValueError(f"this estimator requires {name} to be passed, but the target {name} "
                         f"is None")
    if isinstance(y, torch.Tensor):
        check_not_meta(y, name)
        T = y
    else:
        A = np.asarray(y)
        if A.dtype == object or A.dtype.kind in "USV":
            try:
                A = A.astype(np.float64)
            except (TypeError, ValueError):
                raise ValueError(f"Unknown label type: {name} must hold numbers, got "
                                 f"dtype {A.dtype}") from None
        T = torch.as_tensor(_writable(A))
    if T.is_complex():
        raise ValueError(f"{name} must be real: Complex data not supported, got dtype {T.dtype}")
    if dtype is not None or device is not None:
        T = T.to(dtype=dtype or T.dtype, device=device or T.device)
    if T.dim() not in (1, 2):
        raise ValueError(f"{name} must have shape (n,) or (n, r), got {tuple(T.shape)}")
    if n is not None and T.shape[0] != n:
        raise ValueError(f"{name} has {T.shape[0]} rows but {n} were expected")
    if finite and T.is_floating_point() and not bool(torch.isfinite(T).all()):
        raise ValueError(f"{name} contains NaN or infinity")
    return T


def real_tensor(value, name: str) -> torch.Tensor:
    """``value`` (a real number, or an array or tensor of them) as a float64 tensor, else a
    TypeError naming the argument: ``None``, strings, bools (``True`` would be read as 1)
    and complex numbers are refused, where ``torch.as_tensor`` would fail without saying
    which argument was wrong or convert them silently."""
    check_not_meta(value, name)
    if (isinstance(value, (bool, np.bool_, complex, np.complexfloating, str, bytes))
            or value is None
            or (isinstance(value, torch.Tensor) and (value.dtype == torch.bool
                                                     or value.is_complex()))
            or (isinstance(value, np.ndarray) and value.dtype.kind in "bcUSO")):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    try:
        t = torch.as_tensor(value, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError):
        raise TypeError(f"{name} must be a real number, got {value!r}") from None
    return t


def check_positive(value, name: str, *, allow_zero: bool = False,
                   scalar: bool = True) -> None:
    """Raise ValueError unless every entry of ``value`` is > 0 (or >= 0) and, with
    ``scalar``, it is a single number; TypeError (from :func:`real_tensor`) unless it is a
    real number or an array of them."""
    t = real_tensor(value, name)
    if scalar and t.numel() != 1:
        raise ValueError(f"{name} must be a single number, got shape {tuple(t.shape)}")
    ok = (t >= 0) if allow_zero else (t > 0)
    if not bool(torch.isfinite(t).all()) or not bool(ok.all()):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be finite and {bound}, got {value!r}")


def check_sample_weight(sample_weight, n: int, *, dtype=torch.float64, device=None,
                        allow_negative: bool = False, min_positive: int = 1,
                        name: str = "sample_weight") -> torch.Tensor:
    """Per-sample weights as a (n,) tensor: a scalar is the same weight for every sample;
    finite, ≥ 0 (or, with ``allow_negative``, any finite value: LIBSVM leaves samples of
    weight ≤ 0 out), with at least ``min_positive`` positive entries — else a ValueError
    naming the argument (``name``, e.g. a GP's per-sample ``noise``) and the first bad
    entry."""
    check_not_meta(sample_weight, name)
    if isinstance(sample_weight, (bool, np.bool_)):
        raise TypeError(f"{name} must be None, a float or an array of shape ({n},), "
                        f"got {sample_weight!r}")
    if isinstance(sample_weight, numbers.Real) or (isinstance(sample_weight, torch.Tensor)
                                                   and sample_weight.dim() == 0):
        # one weight for every sample
        w = torch.full((n,), float(sample_weight), dtype=dtype, device=device)
    else:
        w = as_vector(sample_weight, name, dtype=dtype, device=device, finite=False)
    if w.dim() != 1 or w.shape[0] != n:
        raise ValueError(f"{name} must be a float or have shape ({n},), got "
                         f"{tuple(w.shape)}")
    bad = ~torch.isfinite(w) if allow_negative else ~(torch.isfinite(w) & (w >= 0))
    if bool(bad.any()):  # the offending entry, not the whole array
        i = int(bad.nonzero()[0, 0])
        raise ValueError(f"{name} must be finite" + ("" if allow_negative else " and >= 0")
                         + f", got {name}[{i}] = {float(w[i])!r}")
    if int((w > 0).sum()) < min_positive:
        raise ValueError(f"{name} needs at least {min_positive} positive weight(s): "
                         f"the weights are zero (or negative) elsewhere")
    return w


def is_int(value) -> bool:
    """Whether ``value`` is an integer — a Python int or a NumPy integer (hyperparameter
    grids built with ``np.arange`` hold those), not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def is_real(value) -> bool:
    """Whether ``value`` is a real number (int, float, or a NumPy scalar of either), not a
    bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def check_bool(value, name: str) -> bool:
    """``value`` (a bool or a NumPy bool) as a bool, else a TypeError naming the argument:
    ``bool("False")`` would be True."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {value!r}")
    return bool(value)


def check_int(value, name: str, low: int = 1, high: int | None = None) -> int:
    """``value`` as an int in [low, high], else a ValueError naming the argument."""
    if not is_int(value) or value < low or (high is not None and value > high):
        bound = f"{low} <= {name}" + (f" <= {high}" if high is not None else "")
        raise ValueError(f"{name} must be an int with {bound}, got {value!r}")
    return int(value)


def check_random_state(random_state, name: str = "random_state"):
    """``random_state`` checked without drawing from it: None, an int seed, a
    ``torch.Generator``, or a NumPy ``RandomState`` / ``Generator`` (as scikit-learn's
    estimators take one); returned unchanged."""
    if random_state is None or isinstance(random_state, (torch.Generator, np.random.RandomState,
                                                         np.random.Generator)):
        return random_state
    if isinstance(random_state, bool) or not isinstance(random_state, (int, np.integer)):
        raise TypeError(f"{name} must be None, an int, a torch.Generator or a NumPy "
                        f"RandomState/Generator, got {type(random_state).__name__}")
    return random_state


def as_generator(random_state) -> torch.Generator | None:
    """A ``torch.Generator`` from ``random_state``: None (torch's global generator), an
    int seed, a Generator passed through, or a NumPy ``RandomState`` / ``Generator``, from
    which one seed is drawn (advancing it, so that each use of the same NumPy state draws
    anew, as scikit-learn's ``check_random_state``)."""
    check_random_state(random_state)
    if random_state is None or isinstance(random_state, torch.Generator):
        return random_state
    if isinstance(random_state, np.random.RandomState):
        random_state = random_state.randint(2 ** 63 - 1, dtype=np.int64)
    elif isinstance(random_state, np.random.Generator):
        random_state = random_state.integers(2 ** 63 - 1)
    return torch.Generator().manual_seed(int(random_state))


def slice_indices(idx: slice, n: int, device=None) -> torch.Tensor:
    """The int64 positions a slice selects from range(n), negative steps too (slicing
    ``torch.arange(n)`` refuses them)."""
    r = range(n)[idx]
    if not len(r):  # arange refuses a start past the stop
        return torch.zeros(0, dtype=torch.long, device=device)
    return torch.arange(r.start, r.stop, r.step, device=device)


def index_tensor(idx, n: int, name: str = "idx", device=None) -> torch.Tensor:
    """A 1-D int64 index tensor from an int, a slice, a boolean mask, a list, an array or a
    tensor, checked against the length ``n`` (IndexError naming ``name``: a mask of
    another length, float indices, indices outside [−n, n)); negative indices count from
    the end."""
    if isinstance(idx, slice):
        return slice_indices(idx, n, device)
    if isinstance(idx, (int, np.integer)):
        idx = [int(idx)]
    try:
        t = torch.as_tensor(np.asarray(idx) if not isinstance(idx, torch.Tensor) else idx)
    except (TypeError, ValueError, RuntimeError):
        raise IndexError(f"{name} must be an int, a slice, a boolean mask or integer "
                         f"indices, got {idx!r}") from None
    if t.dtype == torch.bool:
        if t.numel() != n:
            raise IndexError(f"{name}: a boolean mask must have length {n}, got {t.numel()}")
        t = t.nonzero().reshape(-1)
    elif t.numel() == 0:
        t = t.long()
    elif t.is_floating_point() or t.is_complex():
        raise IndexError(f"{name} must hold integers, got dtype {t.dtype}")
    t = t.long().reshape(-1)
    if t.numel() and (int(t.min()) < -n or int(t.max()) >= n):
        raise IndexError(f"{name} holds indices outside [0, {n})")
    t = torch.where(t < 0, t + n, t)
    return t if device is None else t.to(device)
