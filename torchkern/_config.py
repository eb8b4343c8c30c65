"""Global settings: which backend ``backend="auto"`` resolves to, and its size thresholds."""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

BACKENDS = ("auto", "dense", "blocked", "keops", "compiled", "triton")

# The largest round-off ε·S the fast form ‖x‖² + ‖y‖² − 2⟨x, y⟩ may carry, with
# S = max‖x‖² + max‖y‖² over the (centred, lengthscale-scaled) rows: about the largest
# absolute error it puts on a Gram entry (measured 0.4-1.3 ε·S on float32 RBF Grams in
# d = 1 to 50; the sum of squared differences has ~1e-7). float32 keeps the fast form
# for data within 8 lengthscales of their mean (S ≤ 128), float64 up to ~2·10^5.
# Read by kernels._ops.fast_form_dtype and the Triton engine's tl.dot path; it lives in
# this foundation module so that both import it downward.
FAST_FORM_MAX_ROUNDOFF = 2.0 ** -16

# The same bound for float64 Gram entries: 2^-36 ≈ 1.5e-11 (2^16 ε of float64), where the
# float32 bound let float64 Grams carry up to 1.5e-5 (two clusters 1e4 lengthscales apart
# were off by 5e-8). float64 keeps the fast form for S ≤ 2^16 (data within ~180
# lengthscales of their mean), beyond that the sum of squared differences — 35 times
# slower in row blocks at d = 50, one thread, which a bound of 2^-40 (S ≤ 4096) would
# already impose on data spread over 10 lengthscales per axis in 50 dimensions.
FAST_FORM_MAX_ROUNDOFF_FLOAT64 = 2.0 ** -36


def fast_form_max_roundoff(dtype: torch.dtype) -> float:
    """The fast form's round-off bound for Gram entries of ``dtype``."""
    return FAST_FORM_MAX_ROUNDOFF_FLOAT64 if dtype == torch.float64 else FAST_FORM_MAX_ROUNDOFF


@dataclass
class Config:
    """Mutable library settings (``torchkern.config``).

    Attributes
    ----------
    backend : str
        Default Gram-matrix backend, one of ``"auto"``, ``"dense"``, ``"blocked"``, ``"keops"``,
        ``"compiled"``, ``"triton"`` (CUDA; see :mod:`torchkern._compiled.triton`).
    dense_max_entries : int
        ``"auto"`` materializes a Gram matrix of at most this many entries (n·m).
    block_memory_mb : float
        Memory budget of one row block of the ``"blocked"`` backend on the CPU,
        intermediates included. 32 MB measured fastest on this project's 2-core machines
        (a blocked RBF product at n = 30,000: 2.8 s against 3.8 s with 128 MB blocks, whose
        temporaries glibc maps and faults in afresh at every block).
    cuda_block_memory_mb : float
        The same on CUDA, where each block costs a few kernel launches: larger blocks.
    keops_on_cpu : bool
        Whether ``"auto"`` uses KeOps for large CPU inputs. On the 2-core CPU machines this
        project measures on, the blocked torch matvec is as fast as warm KeOps and pays no
        compile time, so the default is ``False``; on CUDA ``"auto"`` always prefers KeOps.
    materialize_max_bytes : float
        Estimators that multiply their training Gram matrix many times (iterative
        solvers, eigensolvers, SMO, k-means) store it densely under ``backend="auto"``
        when it takes at most this many bytes (default 4 GiB: n = 32,768 in float32,
        23,170 in float64): one kernel evaluation instead of one per product. Above it
        they stay lazy (O(n) memory). 0 keeps them lazy whenever ``"auto"`` would.
    keops_cuda_probe : bool
        Before the first KeOps use on CUDA, compile and run one small reduction in a child
        process, and fall back to ``"blocked"`` if that crashes (a broken KeOps/CUDA
        pairing can segfault the calling process, where no exception can be caught). The
        verdict is kept on disk (see :func:`torchkern.gram.keops_available`).
    compiled_auto : bool
        Whether ``"auto"`` may pick the ``"compiled"`` backend (fused reductions, see
        :mod:`torchkern._compiled`) where it is faster than ``"blocked"``: radial kernels on
        the CPU, any formula on CUDA when KeOps is unusable.
    triton_auto : bool
        Whether ``"auto"`` on CUDA picks the generated Triton engine (``"triton"``, see
        :mod:`torchkern._compiled.triton`) first, for products of at least
        ``cuda_triton_min_entries`` entries. On by default: on an H100 its RBF product
        (d = 3, float32, n = 2·10⁵) ran 8.2× faster than what ``"auto"`` picked before it
        (5.2·10¹¹ against 6.4·10¹⁰ kernel entries/s; docs/benchmarks_gpu.md).
    cuda_triton_min_entries : int
        ... and only from this many entries (n·m): the first use of a formula compiles
        and autotunes its kernel (seconds, then cached on disk), which small products,
        fast enough blocked, would not repay.
    compiled_min_entries : int
        ... and only for products of at least this many entries (n·m): the first use
        compiles (seconds, once per machine), which small products would not repay.
    cuda_compiled_min_entries : int
        The same threshold on CUDA. On an H100 the Triton tiles were slower than the
        blocked products at 10⁸ entries (0.92×: both take ~3 ms, launch-bound) and faster
        at 10¹⁰ (1.4–1.8×); 10⁹ lies between the two measurements.
    """

    backend: str = "auto"
    dense_max_entries: int = 4_000_000
    block_memory_mb: float = 32.0
    cuda_block_memory_mb: float = 1024.0
    keops_on_cpu: bool = False
    materialize_max_bytes: float = 4 * 2**30
    keops_cuda_probe: bool = True
    compiled_auto: bool = True
    triton_auto: bool = True
    cuda_triton_min_entries: int = 16_000_000
    compiled_min_entries: int = 100_000_000
    cuda_compiled_min_entries: int = 1_000_000_000


    def block_bytes(self, device=None) -> int:
        """The row-block budget in bytes for tensors on ``device`` (default: the CPU)."""
        cuda = device is not None and torch.device(device).type == "cuda"
        return int((self.cuda_block_memory_mb if cuda else self.block_memory_mb) * 2**20)


config = Config()


def _check_backend(name: str, argname: str = "backend") -> str:
    if name not in BACKENDS:
        raise ValueError(f"{argname} must be one of {BACKENDS}, got {name!r}")
    return name


def set_backend(name: str) -> None:
    """Set the default Gram-matrix backend for every kernel call with ``backend=None``."""
    config.backend = _check_backend(name)


def get_backend() -> str:
    """The current default Gram-matrix backend."""
    return config.backend


@contextlib.contextmanager
def use_backend(name: str):
    """Context manager that sets the default backend inside a ``with`` block.

    Examples
    --------
    >>> import torchkern
    >>> with torchkern.use_backend("blocked"):
    ...     pass
    """
    previous = config.backend
    config.backend = _check_backend(name)
    try:
        yield
    finally:
        config.backend = previous
