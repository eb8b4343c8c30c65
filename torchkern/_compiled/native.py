"""The hand-vectorized CPU reduction for radial kernels (``radial.cpp``), built on first use.

The C++ source ships with torchkern; the first call compiles it with the system's C++
compiler (``$CXX``, default ``g++`` — the compiler KeOps needs too) for the host CPU
(``-march=native``) into a cache directory, like KeOps' binaries, so a machine pays the
compile (a few seconds) once. It is loaded with :mod:`ctypes` (no Python headers, no torch
headers: the compile is fast), and ``torch.get_num_threads()`` threads share the rows by
dynamic scheduling (ctypes releases the GIL while the C++ code runs; see :func:`_run`).

Loading a shared library runs its code, so only a library this user built is loaded: the
cache directory must be the user's own and writable by no one else (nor replaceable
through a parent directory), else a private per-user subdirectory or a temporary
directory is used (:func:`cache_dir`); the library file must be the user's and not
writable by others. A library that does not load (truncated, corrupt) is rebuilt; a build
writes a temporary file and renames it into place, and temporary files that a killed
build left behind are removed.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import stat
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import torch

from .._threads import pool

__all__ = ["PROFILES", "cache_dir", "is_private_dir", "load", "radial_gram",
           "radial_matmul"]

#: Radial profiles φ(t) of the squared scaled distance t = ‖x − y‖² the C++ code knows,
#: and their codes there.
PROFILES = {"gauss": 0, "laplace": 1, "matern32": 2, "matern52": 3}

_SOURCE = Path(__file__).with_name("radial.cpp")
_FLAGS = [["-O3", "-march=native", "-mprefer-vector-width=512", "-fno-math-errno",
           "-fno-trapping-math", "-fopenmp-simd"],
          ["-O3", "-fno-math-errno", "-fno-trapping-math"]]  # compilers without -march=native
_STATE: dict = {"lib": None, "error": None, "seconds": None}
_LOCK = threading.Lock()


def _configured_dir() -> Path:
    root = os.environ.get("TORCHKERN_CACHE_DIR")
    if root:
        return Path(root)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "torchkern"


def _uid() -> int:
    return os.getuid() if hasattr(os, "getuid") else -1


def is_private_dir(path) -> bool:
    """Whether ``path`` is a directory (not a link) owned by this user that neither group
    nor others can write, below parents (as written, links included, and as resolved)
    that are owned by this user or root and that no one else can write either (or that
    are sticky, like ``/tmp``), so that no one else can put, replace or rename a file in
    it. Always True where there are no POSIX owners."""
    if _uid() < 0:
        return True
    try:
        st = os.lstat(path)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != _uid() or st.st_mode & 0o022:
            return False
        # the parents as written (a symbolic link among them, e.g. /tmp/link/cache, must
        # be ours or root's: someone else could point it elsewhere later) and as resolved
        for parent in (*Path(os.path.abspath(path)).parents,
                       *Path(os.path.realpath(path)).parents):
            pst = os.lstat(parent)
            if pst.st_uid not in (0, _uid()):
                return False
            if stat.S_ISLNK(pst.st_mode):
                continue  # its target is among the resolved parents
            if pst.st_mode & 0o022 and not pst.st_mode & stat.S_ISVTX:
                return False
    except OSError:
        return False
    return True


_PRIVATE: dict = {}  # configured directory -> the private directory used for it


def cache_dir() -> Path:
    """Where compiled binaries are kept: ``$TORCHKERN_CACHE_DIR`` or
    ``$XDG_CACHE_HOME/torchkern`` (default ``~/.cache/torchkern``) when that directory is
    private (:func:`is_private_dir`; created with mode 0700 if missing); else its
    subdirectory ``torchkern-<uid>`` made private; else (a shared directory where that
    name is taken, or one that cannot be written) a private temporary directory for this
    process, removed at exit."""
    root = _configured_dir()
    if root in _PRIVATE and is_private_dir(_PRIVATE[root]):
        return _PRIVATE[root]
    for path in (root, root / f"torchkern-{_uid()}"):
        try:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError:
            continue
        if is_private_dir(path):
            _PRIVATE[root] = path
            return path
    path = Path(tempfile.mkdtemp(prefix="torchkern-"))
    import atexit
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    _PRIVATE[root] = path
    return path


def _owned_file(path: Path) -> bool:
    """Whether ``path`` is a regular file (not a link) of this user that others cannot
    write."""
    st = os.lstat(path)
    return stat.S_ISREG(st.st_mode) and (_uid() < 0 or (st.st_uid == _uid()
                                                        and not st.st_mode & 0o022))


def _cpu_flags() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            return next((ln for ln in fh if ln.startswith(("flags", "Features"))), "")
    except OSError:
        return platform.processor()


_TEMP_PREFIX = ".radial-build-"
_STALE_SECONDS = 3600  # older than any build (the compiler's timeout is 300 s per try)


def _target(cxx: str) -> Path:
    """The library's path in :func:`cache_dir`, named by a hash of what it depends on."""
    src = _SOURCE.read_bytes()
    key = hashlib.sha256(src + cxx.encode() + repr(_FLAGS).encode() + _cpu_flags().encode()
                         + platform.machine().encode()).hexdigest()[:16]
    return cache_dir() / f"radial-{key}.so"


def _remove_stale_temps(folder: Path) -> None:
    """Delete temporary files of builds that were killed (older than any build)."""
    for tmp in folder.glob(_TEMP_PREFIX + "*"):
        try:
            if time.time() - os.lstat(tmp).st_mtime > _STALE_SECONDS:
                tmp.unlink()
        except OSError:
            pass


def _build(target: Path, cxx: str) -> Path:
    """Compile the library to ``target``: into a temporary file of the same directory,
    renamed into place when complete (atomic: concurrent builders agree on the result,
    and a killed build leaves no partial library)."""
    _remove_stale_temps(target.parent)
    errors = []
    for flags in _FLAGS:
        fd, tmp = tempfile.mkstemp(prefix=_TEMP_PREFIX, suffix=".so", dir=target.parent)
        os.close(fd)
        cmd = [cxx, *flags, "-std=c++17", "-shared", "-fPIC", "-o", tmp, str(_SOURCE)]
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.TimeoutExpired) as exc:
            res, errors = None, errors + [f"{type(exc).__name__}: {exc}"]
        if res is not None and res.returncode == 0:
            os.chmod(tmp, 0o700)
            os.replace(tmp, target)
            return target
        os.unlink(tmp)
        if res is not None:
            errors.append((res.stderr.strip().splitlines() or ["no output"])[-1][:300])
    raise RuntimeError(f"compiling {_SOURCE.name} with {cxx} failed: {errors[-1]}")


_ENTRY_POINTS = ("tk_radial_forward_f32", "tk_radial_forward_f64", "tk_radial_gradient_f32",
                 "tk_radial_gradient_f64", "tk_radial_gram_f32", "tk_radial_gram_f64",
                 "tk_radial_run")


def _open(path: Path):
    """``path`` loaded with ctypes, its entry points declared (AttributeError if one is
    missing)."""
    lib = ctypes.CDLL(str(path))
    for name in _ENTRY_POINTS:
        getattr(lib, name).restype = None
    return lib


def _load_or_build(cxx: str):
    """The library from the cache when it is this user's and loads; otherwise (missing,
    not trusted, corrupt) built afresh and loaded."""
    target = _target(cxx)
    if os.path.lexists(target):
        try:
            if _owned_file(target):
                return _open(target)
        except (OSError, AttributeError):
            pass  # truncated or corrupt: build it again
        target.unlink()
    return _open(_build(target, cxx))


def load():
    """The loaded library (compiled on first use); raises RuntimeError with the reason
    when no compiler works (the reason is remembered: no second attempt)."""
    with _LOCK:
        if _STATE["lib"] is None and _STATE["error"] is None:
            t = time.perf_counter()
            try:
                _STATE["lib"] = _load_or_build(os.environ.get("CXX", "g++"))
            except Exception as exc:  # noqa: BLE001 (any failure means: not usable here)
                _STATE["error"] = f"{type(exc).__name__}: {exc}"
            _STATE["seconds"] = time.perf_counter() - t
        if _STATE["error"] is not None:
            raise RuntimeError(_STATE["error"])
        return _STATE["lib"]


_I64 = ctypes.c_int64
_PTR = ctypes.c_void_p


_WHICH = {"tk_radial_forward": 0, "tk_radial_gradient": 2, "tk_radial_gram": 4}
_CHUNK_EVALS = 2**20  # kernel evaluations per chunk of rows: about a millisecond


def _run(name: str, profile: int, rows: torch.Tensor, args, out: torch.Tensor, m: int,
         r: int) -> torch.Tensor:
    """Call entry point ``name`` on every row of ``rows``.

    With ``torch.get_num_threads()`` = t > 1 threads and enough work, the calling thread
    and t − 1 workers of :func:`~torchkern._threads.pool` share the rows through one
    atomic counter in the C++ code (``tk_radial_run``): each takes the next chunk of
    about ``_CHUNK_EVALS`` kernel evaluations when it is free (dynamic scheduling). A
    thread that other processes deschedule then delays the end by at most one chunk,
    where a static split into t parts waits for the slowest part; and no thread spins:
    the workers sleep on the pool's queue between calls, the caller joins them."""
    lib = load()
    f64 = rows.dtype == torch.float64
    n, d = rows.shape
    tensors = (rows, *args, out)
    threads = max(1, torch.get_num_threads())
    if threads == 1 or n * m < 2**16:
        fn = getattr(lib, f"{name}_{'f64' if f64 else 'f32'}")
        fn(ctypes.c_int(profile), *(_PTR(t.data_ptr()) for t in tensors), _I64(0), _I64(n),
           _I64(m), _I64(d), _I64(r))
        return out
    ins = [_PTR(t.data_ptr()) for t in (rows, *args)]
    ins += [_PTR(None)] * (4 - len(ins))
    chunk = max(1, min(-(-n // (8 * threads)), _CHUNK_EVALS // max(m, 1)))
    counter = _I64(0)
    call = (ctypes.c_int(_WHICH[name] + f64), ctypes.c_int(profile), *ins,
            _PTR(out.data_ptr()), _I64(n), _I64(m), _I64(d), _I64(r), _I64(chunk),
            ctypes.byref(counter))

    def work():
        lib.tk_radial_run(*call)
        # the closure holds the tensors until every helper has returned: a
        # KeyboardInterrupt reaches the caller right after its own share (the C++ call
        # cannot be interrupted), while helpers may still write their last chunk
        return tensors

    helpers = [pool(threads - 1).submit(work) for _ in range(threads - 1)]
    work()
    for h in helpers:
        h.result()
    return out


def _forward(profile, x, y, V):
    x, yt, vt = x.contiguous(), y.T.contiguous(), V.T.contiguous()
    out = x.new_empty(x.shape[0], V.shape[1])
    return _run("tk_radial_forward", profile, x, (yt, vt), out, y.shape[0], V.shape[1])


def _gradient(profile, x, y, G, V):
    """∂/∂x of Σ_ic G_ic (K V)_ic: Σ_j (G_i·V_j) 2φ'(‖x_i − y_j‖²)(x_i − y_j)."""
    x, yt, g, vt = x.contiguous(), y.T.contiguous(), G.contiguous(), V.T.contiguous()
    out = torch.empty_like(x)
    return _run("tk_radial_gradient", profile, x, (yt, g, vt), out, y.shape[0], V.shape[1])


class _RadialMatmul(torch.autograd.Function):
    """K V with K_ij = φ(‖x_i − y_j‖²); backward by the same fused reductions."""

    @staticmethod
    def forward(ctx, profile, V, x, y):
        ctx.profile = profile
        ctx.save_for_backward(V, x, y)
        return _forward(profile, x, y, V)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, G):
        V, x, y = ctx.saved_tensors
        p = ctx.profile
        need_V, need_x, need_y = ctx.needs_input_grad[1:4]
        gV = _forward(p, y, x, G) if need_V else None  # Kᵀ G
        gx = _gradient(p, x, y, G, V) if need_x else None
        gy = _gradient(p, y, x, V, G) if need_y else None  # the same sum, roles swapped
        return None, gV, gx, gy


def radial_matmul(profile: str, x: torch.Tensor, y: torch.Tensor, V: torch.Tensor):
    """K V for K_ij = φ(‖x_i − y_j‖²) with φ the named profile (see :data:`PROFILES`),
    differentiable in V, x and y. x (n, d), y (m, d), V (m, r), on the CPU, float32 or
    float64. Cost O(n·m·(d + r)) time, O((n + m)(d + r)) memory."""
    return _RadialMatmul.apply(PROFILES[profile], V, x, y)


def radial_gram(profile: str, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The (n, m) matrix K_ij = φ(‖x_i − y_j‖²) itself, written row by row in one pass (no
    temporaries beyond K). Not differentiable: for stored Gram matrices outside autograd.
    x (n, d), y (m, d) on the CPU, float32 or float64."""
    x, yt = x.contiguous(), y.T.contiguous()
    out = x.new_empty(x.shape[0], y.shape[0])
    return _run("tk_radial_gram", PROFILES[profile], x, (yt,), out, y.shape[0], 0)
