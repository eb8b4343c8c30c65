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
def one_thread(on: bool = True):
    """Run the block with one torch thread (restored afterwards); a no-op when ``on`` is
    False or torch already uses one."""
    prev = torch.get_num_threads()
    if on and prev > 1:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if torch.get_num_threads() != prev:
            torch.set_num_threads(prev)
