"""Thread helpers shared by every layer: a process-wide worker pool (the native radial
loop splits its rows over it: each worker runs single-threaded C++ that releases the GIL)
and a one-thread scope (small eigenproblems and factorizations, where LAPACK's threads
cost more than they gain)."""
from __future__ import annotations

import contextlib
import os
from concurrent.futures import ThreadPoolExecutor

import torch

_POOL: dict = {}


def pool(threads: int) -> ThreadPoolExecutor:
    """A pool of ``threads`` workers for this process (a forked child makes its own)."""
    key = (os.getpid(), threads)
    if _POOL.get("key") != key:
        _POOL.update(key=key, pool=ThreadPoolExecutor(threads, "torchkern"))
    return _POOL["pool"]


@contextlib.contextmanager
def num_threads(n: int):
    """Run the block with ``n`` torch threads (the caller's count restored afterwards);
    a no-op when torch already uses ``n``. Used to give a block inside a
    :func:`one_thread` scope (a large product) the caller's threads back."""
    prev = torch.get_num_threads()
    if n != prev:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if torch.get_num_threads() != prev:
            torch.set_num_threads(prev)


def one_thread(on: bool = True):
    """Run the block with one torch thread (restored afterwards); a no-op when ``on`` is
    False or torch already uses one.

    Where torchkern uses it: steps made of many short operations (small eigenproblems
    and factorizations, Krylov bookkeeping on n × b blocks, the graph kernels' counting
    passes). Each such operation is one OpenMP parallel region of microseconds; with a
    busy process beside us, each region waits for a descheduled thread, and between
    regions the idle threads spin (OpenMP's default wait policy), taking CPU from the
    thread doing the work. The user's setting is restored on exit: it is never changed
    behind their back, only not used for these steps."""
    return num_threads(1) if on else contextlib.nullcontext()
