"""Run a function on gloo CPU processes from inside pytest."""
from __future__ import annotations

import os
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _worker(rank, world, init_file, timeout, fn, args):
    torch.set_num_threads(1)
    from torchkern.distributed import init_process_group
    init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                       world_size=world, timeout=timeout)
    try:
        fn(rank, world, *args)
    finally:
        dist.destroy_process_group()


def spawn(fn, world: int, *args, timeout: float = 60.0):
    """Run ``fn(rank, world, *args)`` on ``world`` gloo processes; an assertion or error
    in any of them fails the caller (torch.multiprocessing re-raises it)."""
    with tempfile.TemporaryDirectory() as tmp:
        init_file = os.path.join(tmp, "rendezvous")
        # fork: the children inherit the imported modules (spawn re-imports torch and
        # torchkern in each, seconds per process on a busy machine).
        mp.start_processes(_worker, args=(world, init_file, timeout, fn, args), nprocs=world,
                           join=True, start_method="fork")
