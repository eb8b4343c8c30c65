"""Helpers shared by the linalg routines: operator checks, probes, random state.

The linalg layer accepts any square operator ``A`` that has ``shape``, ``dtype``,
``device`` and ``A @ V`` for ``V`` of shape (n, r): a dense tensor or a lazy matrix.

Row-sharded operators (:mod:`torchkern.distributed`) take and return only this process's
rows of the vectors. They say so by three members, and the solvers take every inner
product, norm and random draw through the helpers below, which use them:

- ``local_rows``: the rows of the vectors held here (n for an ordinary operator);
- ``reduce_sum(T)``: Σ over the processes of a partial sum T (an all-reduce);
- ``own_rows(T)``: this process's rows of an (n, ...) tensor every process holds (random
  probes are drawn whole from the same generator and cut, so every process count gives
  the single-process iterates).
"""

import warnings

import torch

from .._threads import one_thread  # noqa: F401 (re-exported)
from .._validation import caller_stacklevel, symmetry_gap

_FLOAT64 = torch.float64

# Largest symmetric eigenproblem solved with one thread on the CPU: below it, LAPACK's
# threaded tridiagonal reduction costs more in synchronization than it gains (2 threads,
# float64: m = 240 takes 25 ms against 3 ms with one, m = 1000 198 ms against 133 ms;
# m = 2000 is faster threaded).
_ONE_THREAD_EIGH_MAX = 1000

class ConvergenceWarning(UserWarning):
    """An iterative solver stopped before reaching its tolerance.

    The message states the tolerance asked for and the residual reached.
    """

def _check_operator(A, name="A"):
    """Return n for a square (n, n) operator with ``@``, else raise."""
    shape = getattr(A, "shape", None)
    if shape is None or not hasattr(A, "__matmul__"):
        raise TypeError(
            f"{name} must be a square matrix or operator with .shape and @, "
            f"got {type(A).__name__}"
        )
    if type(A).__module__.split(".")[0] == "numpy":
        # a NumPy array has shape, dtype and @, and was refused as "dtype float32 or
        # float64, got float64"
        raise TypeError(f"{name} must be a torch.Tensor or an operator, got a NumPy array: "
                        f"pass torch.from_numpy({name})")
    shape = tuple(shape)
    if len(shape) != 2 or shape[0] != shape[1]:
        raise ValueError(f"{name} must be square of shape (n, n), got shape {shape}")
    if shape[0] == 0:
        raise ValueError(f"{name} is empty (shape {shape})")
    if getattr(A, "dtype", None) not in (torch.float32, torch.float64):
        raise TypeError(f"{name} must have dtype float32 or float64, got {getattr(A, 'dtype', None)}")
    if isinstance(A, torch.Tensor) and not bool(torch.isfinite(A.detach()).all()):
        raise ValueError(f"{name} contains NaN or inf")  # a dense A: one pass, as one product
    return shape[0]

# Asymmetry past this fraction of max |A| is not rounding: a different matrix.
_ASYMMETRY_REFUSED = 1e-2


def _check_symmetric(A, name="A"):
    """For a dense tensor A, which CG, Lanczos and the Cholesky factor of ``logdet`` read
    as symmetric (an asymmetric A gave the solution of another system, or the
    log-determinant of its lower triangle, without a word): a ValueError naming ``name``
    where max |A − Aᵀ| > 1 % of max |A|, a UserWarning where it is above √ε·max |A| (the
    rule of ``_validation.check_symmetric``) but below that — a float32 product with
    cancellation, such as a centred Gram H K H of a wide kernel, is symmetric only to
    about n·ε of its *uncentred* entries, 1e-3 of its own. One tiled pass over A
    (``_validation.symmetry_gap``). Operators are trusted (checking one would cost
    products)."""
    if not isinstance(A, torch.Tensor):
        return
    gap, scale = symmetry_gap(A)
    if gap > _ASYMMETRY_REFUSED * scale:
        raise ValueError(f"{name} must be symmetric: max |{name} - {name}.T| = {gap:.3g} "
                         f"against max |{name}| = {scale:.3g}; symmetrize it, e.g. "
                         f"({name} + {name}.T) / 2")
    if gap > torch.finfo(A.dtype).eps ** 0.5 * scale:
        warnings.warn(f"{name} is symmetric only to {gap / scale:.2g} of its largest entry "
                      f"(max |{name} - {name}.T| = {gap:.3g}): it is read as symmetric, and "
                      f"the result carries an error of that order; symmetrize it, "
                      f"({name} + {name}.T) / 2, if that is rounding", UserWarning,
                      stacklevel=caller_stacklevel())   # the user's line (3 was hsic.py's)


def _check_preconditioner(preconditioner, rows, name="preconditioner"):
    """``preconditioner`` (None or a callable R ↦ M⁻¹R) checked against A's ``rows``:
    one that declares a ``shape`` (the library's preconditioners) must be (rows, rows);
    any other must return a tensor of R's shape (checked on each call) and finite (checked
    on the first call only: a host synchronization). A mismatch is a ValueError naming the
    argument instead of a shape error deep in a product (or, for NaN, CG's "A is not
    positive definite")."""
    if preconditioner is None:
        return None
    if not callable(preconditioner):
        raise TypeError(f"{name} must be callable, got {type(preconditioner).__name__}")
    shape = getattr(preconditioner, "shape", None)
    if shape is not None:
        if tuple(shape) != (rows, rows):
            raise ValueError(f"{name} has shape {tuple(shape)}, but A needs ({rows}, {rows})")
        return preconditioner

    def checked(R):
        out = preconditioner(R)
        if not isinstance(out, torch.Tensor) or out.shape != R.shape:
            got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            raise ValueError(f"{name} returned {got} for residuals of shape "
                             f"{tuple(R.shape)}: it must return a tensor of the shape it is "
                             f"given (A has {rows} rows)")
        if not seen and not bool(torch.isfinite(out).all()):  # first call: a sync, once
            raise ValueError(f"{name} returned NaN or inf")
        seen.append(True)
        return out

    seen = []
    return checked


def _check_rhs(B, n, A, name="B"):
    """Validate a right-hand side of shape (n,) or (n, r) against operator A."""
    if not isinstance(B, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(B).__name__}")
    if B.ndim not in (1, 2) or B.shape[0] != n:
        raise ValueError(
            f"{name} must have shape ({n},) or ({n}, r) to match A of shape ({n}, {n}), "
            f"got {tuple(B.shape)}"
        )
    if B.dtype != A.dtype:
        raise TypeError(f"{name} has dtype {B.dtype} but A has dtype {A.dtype}")
    if B.device != torch.device(A.device):
        raise ValueError(f"{name} is on {B.device} but A is on {A.device}")
    if not bool(torch.isfinite(B).all()):
        raise ValueError(f"{name} contains NaN or inf")

def _dense(A):
    """A as a dense tensor when it is one or offers ``to_dense()``; else None."""
    if isinstance(A, torch.Tensor):
        return A
    to_dense = getattr(A, "to_dense", None)
    return to_dense() if callable(to_dense) and not _sharded(A) else None

def _has_dense(A):
    return isinstance(A, torch.Tensor) or (
        callable(getattr(A, "to_dense", None)) and not _sharded(A))

def _maybe_requires_grad(A):
    """False when A's products certainly carry no gradient; None when unknown."""
    flag = getattr(A, "requires_grad", None)
    if isinstance(flag, bool):
        return flag
    return None

from .._validation import as_generator as _generator  # noqa: E402,F401 (re-exported)

def _randn(shape, dtype, device, generator):
    gen_device = generator.device if generator is not None else device
    return torch.randn(shape, generator=generator, device=gen_device, dtype=dtype).to(device)

def _rademacher(shape, dtype, device, generator):
    """Entries ±1 with probability 1/2 each."""
    gen_device = generator.device if generator is not None else device
    bits = torch.randint(0, 2, shape, generator=generator, device=gen_device)
    return (2 * bits - 1).to(device=device, dtype=dtype)

def _dot(U, V):
    """Column-wise inner products in float64: (U * V).sum(0)."""
    return (U.to(_FLOAT64) * V.to(_FLOAT64)).sum(0)


def _sharded(A) -> bool:
    """Whether A is row-sharded over processes (module docstring)."""
    return callable(getattr(A, "reduce_sum", None))


def _rows(A, n):
    """Rows of the vectors A acts on in this process: n, or a sharded A's local rows."""
    return getattr(A, "local_rows", n) if _sharded(A) else n


def _reduce(A, T):
    """T summed over the processes of a sharded A (T itself otherwise)."""
    return A.reduce_sum(T) if _sharded(A) else T


def _own(A, T):
    """This process's rows of a tensor held whole (T itself unless A is sharded)."""
    return A.own_rows(T) if _sharded(A) else T


def _inner(A, U, V):
    """Column-wise inner products ``(U * V).sum(0)`` in float64 over all rows of the
    vectors of A (all-reduced when A is sharded)."""
    return _reduce(A, _dot(U, V))


def _col_norms(A, U):
    """Column 2-norms of U in float64 over all rows of the vectors of A."""
    if not _sharded(A):
        return U.to(_FLOAT64).norm(dim=0)
    return A.reduce_sum(U.to(_FLOAT64).square().sum(0)).sqrt()


def _eigh(A):
    """``torch.linalg.eigh`` of a symmetric matrix (ascending), with one thread for CPU
    matrices of order ≤ ``_ONE_THREAD_EIGH_MAX``."""
    with one_thread(A.device.type == "cpu" and A.shape[-1] <= _ONE_THREAD_EIGH_MAX):
        return torch.linalg.eigh(A)


def uniform_centers(n: int, m: int, random_state=None, device=None) -> torch.Tensor:
    """m distinct indices of range(n) drawn uniformly (``random_state``: None, an int or a
    torch.Generator), sorted, on ``device``."""
    gen = _generator(random_state)
    gen_device = gen.device if gen is not None else device
    idx = torch.randperm(n, generator=gen, device=gen_device)[:m]
    return idx.sort().values.to(device)
