"""Products of a stored matrix by a few columns, in tiles that the caller's threads share
by dynamic scheduling.

:func:`tiled_mm` computes T V; :func:`symmetric_tiled_mm` computes T V for a symmetric T
reading only its upper triangle (half the memory traffic of T V, one pass). Both cut the
product into a few hundred tiles of about a millisecond each. The calling thread and
``torch.get_num_threads() - 1`` workers of :func:`torchkern._threads.pool` each take the
next tile when they are free, every one on one torch thread: a thread that another
process deschedules delays the end by one tile, where one multithreaded GEMM (a static
split of the rows) waits for its slowest part, and nobody spins at a barrier.
"""
from __future__ import annotations

import threading

import torch

from .._threads import one_thread, pool

__all__ = ["tiled_mm", "symmetric_tiled_mm", "symmetric_tiles", "SYMMETRIC_MIN_COLS"]

# A tile is TILE_ROWS × TILE_COLS entries of T (1 MB in float64: it stays in the L2 cache
# while the symmetric product reads it twice). Measured on 2 AMD EPYC cores, n = 8,000,
# float64, 24 columns: 256 × 512 tiles took 0.109-0.115 CPU-s per symmetric product,
# 128 × 1024 and 512 × 512 0.112-0.131 s, one row-blocked GEMM over the whole matrix
# 0.140-0.147 s.
TILE_ROWS = 256
TILE_COLS = 512

# Narrower products are memory-bound matrix-vector-like products, where MKL's kernels for
# a few columns run as fast over whole row panels as the symmetric tiles (same setting:
# r = 1: 28-34 ms of CPU for both; r = 4 and 8: 100-140 ms, the symmetric tiles 30 %
# slower; r = 12: 91 ms symmetric against 102-121 ms in row panels and 163 ms for one
# GEMM). Callers use :func:`tiled_mm` below this width.
SYMMETRIC_MIN_COLS = 12


def _check(T, V, name):
    if not isinstance(T, torch.Tensor) or T.dim() != 2:
        raise TypeError(f"{name}: T must be a 2-D tensor, got {type(T).__name__}")
    if not isinstance(V, torch.Tensor) or V.dim() != 2 or V.shape[0] != T.shape[1]:
        raise ValueError(f"{name}: V must have shape ({T.shape[1]}, r), got "
                         f"{tuple(getattr(V, 'shape', ()))}")
    if V.dtype != T.dtype:
        raise TypeError(f"{name}: V has dtype {V.dtype} but T has dtype {T.dtype}")


def _shared(tiles, do, n_out, r, like, threads):
    """Σ over the tiles of ``do(tile, out)``, each into the accumulator ``out`` (n_out × r)
    of the thread that took the tile: the caller and ``threads - 1`` pool workers take
    tiles one at a time from a shared list. Every thread works on one torch thread; the
    workers set the caller's count back when they finish (torch keeps the last count set
    as the default of new threads)."""
    tiles = list(tiles)
    threads = max(1, min(threads, len(tiles)))
    lock, nxt = threading.Lock(), [0]

    def take():
        with lock:
            i = nxt[0]
            nxt[0] += 1
        return tiles[i] if i < len(tiles) else None

    def work():
        out = like.new_zeros(n_out, r)
        while (tile := take()) is not None:
            do(tile, out)
        return out

    def helper(caller_threads):
        torch.set_num_threads(1)
        try:
            return work()
        finally:
            torch.set_num_threads(caller_threads)

    caller = torch.get_num_threads()
    helpers = ([pool(threads - 1).submit(helper, caller) for _ in range(threads - 1)]
               if threads > 1 else [])
    try:
        with one_thread():
            out = work()
    except BaseException:  # (KeyboardInterrupt too) the workers take no further tile
        with lock:
            nxt[0] = len(tiles)
        raise
    finally:
        parts = [h.result() for h in helpers]
    for p in parts:
        out += p
    return out


def tiled_mm(T: torch.Tensor, V: torch.Tensor, *, tile_rows: int = TILE_ROWS,
             threads: int | None = None) -> torch.Tensor:
    r"""T V computed in row panels of ``tile_rows`` rows shared by dynamic scheduling.

    Parameters
    ----------
    T : Tensor (n, m)
        A stored matrix on the CPU (any strides).
    V : Tensor (m, r)
        Same dtype as T.
    tile_rows : int
        Rows per panel.
    threads : int, optional
        Threads sharing the panels; default ``torch.get_num_threads()``.

    Returns
    -------
    Tensor (n, r)

    Notes
    -----
    Cost: the O(n m r) flops of T V in one pass over T; each panel product is one GEMM
    on one thread (Goto and van de Geijn, "Anatomy of high-performance matrix
    multiplication", ACM TOMS 34(3), 2008, for why a panel of T times the narrow V runs at
    GEMM speed).
    """
    _check(T, V, "tiled_mm")
    n = T.shape[0]
    threads = torch.get_num_threads() if threads is None else threads
    tiles = [(s, min(n, s + tile_rows)) for s in range(0, n, max(1, int(tile_rows)))]

    def do(tile, out):
        s, e = tile
        out[s:e].addmm_(T[s:e], V)

    return _shared(tiles, do, n, V.shape[1], V, threads)


def symmetric_tiles(n: int, tile_rows: int = TILE_ROWS, tile_cols: int = TILE_COLS):
    """The tiles ``(s, e, c0, c1)`` of the upper triangle of an n × n matrix: for each
    row block [s, e) its diagonal block (c0 = s, c1 = e) and the blocks right of it, in
    ``tile_cols`` columns. Together they cover every entry (i, j) with j ≥ i once and
    every entry with j < i not at all, apart from the lower halves of the diagonal
    blocks."""
    out = []
    for s in range(0, n, tile_rows):
        e = min(n, s + tile_rows)
        out.append((s, e, s, e))
        out += [(s, e, c, min(n, c + tile_cols)) for c in range(e, n, tile_cols)]
    return out


def symmetric_tiled_mm(T: torch.Tensor, V: torch.Tensor, *, tile_rows: int = TILE_ROWS,
                       tile_cols: int = TILE_COLS, threads: int | None = None) -> torch.Tensor:
    r"""T V for a symmetric T, reading only T's upper triangle (and its diagonal blocks).

    Each off-diagonal tile :math:`T_{IJ}` (I < J) is read once and used twice while it
    sits in the cache: :math:`(TV)_I \mathrel{+}= T_{IJ} V_J` and
    :math:`(TV)_J \mathrel{+}= T_{IJ}^\top V_I`; a diagonal block contributes
    :math:`T_{II} V_I`. The entries below the diagonal blocks are never read, so T only
    needs its upper triangle to be right (an exactly symmetric T gives T V up to the
    order of the sums).

    Parameters
    ----------
    T : Tensor (n, n)
        Symmetric, stored, on the CPU (any strides).
    V : Tensor (n, r)
        Same dtype as T.
    tile_rows, tile_cols : int
        Tile shape (default 256 × 512: 1 MB of float64).
    threads : int, optional
        Threads sharing the tiles by dynamic scheduling (the caller and ``threads - 1``
        workers, each on one torch thread); default ``torch.get_num_threads()``.

    Returns
    -------
    Tensor (n, r)

    Notes
    -----
    Cost: the O(n² r) flops of T V, reading n²/2 entries of T instead of n² (the
    symmetric matrix product of the BLAS, ``symm``, reads the same half; Dongarra et al.,
    "A set of level 3 basic linear algebra subprograms", ACM TOMS 16(1), 1990); O(t n r)
    memory for the t threads' accumulators. 15-25 % less CPU time than one GEMM at
    n = 8,000, r = 24 (see ``TILE_ROWS``).
    """
    _check(T, V, "symmetric_tiled_mm")
    if T.shape[0] != T.shape[1]:
        raise ValueError(f"symmetric_tiled_mm: T must be square, got shape {tuple(T.shape)}")
    threads = torch.get_num_threads() if threads is None else threads

    def do(tile, out):
        s, e, c0, c1 = tile
        block = T[s:e, c0:c1]
        out[s:e].addmm_(block, V[c0:c1])
        if c0 != s:
            out[c0:c1].addmm_(block.T, V[s:e])

    return _shared(symmetric_tiles(T.shape[0], int(tile_rows), int(tile_cols)), do,
                   T.shape[0], V.shape[1], V, threads)
