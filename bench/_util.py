"""Shared benchmark helpers: timing, peak memory, and a printed table."""
from __future__ import annotations

import gc
import os
import threading
import time

import torch


def sync(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


class PeakRSS:
    """Peak resident memory growth (MB) of this process while the block runs, sampled
    every 5 ms (CPU), or the CUDA allocator's peak (GPU)."""

    def __init__(self, device="cpu"):
        self.device = torch.device(device)

    def _rss(self):
        with open(f"/proc/{os.getpid()}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def __enter__(self):
        gc.collect()
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats()
            self.base = torch.cuda.memory_allocated()
            return self
        self.base = self.peak = self._rss()
        self._stop = False

        def watch():
            while not self._stop:
                self.peak = max(self.peak, self._rss())
                time.sleep(0.005)

        self._t = threading.Thread(target=watch, daemon=True)
        self._t.start()
        return self

    def __exit__(self, *exc):
        if self.device.type == "cuda":
            self.mb = (torch.cuda.max_memory_allocated() - self.base) / 2**20
        else:
            self._stop = True
            self._t.join()
            self.peak = max(self.peak, self._rss())
            self.mb = (self.peak - self.base) / 2**20
        return False


def timed(fn, device, repeat=1):
    """(seconds of the fastest run, result, peak MB of the first run)."""
    best, out, mem = float("inf"), None, None
    for i in range(repeat):
        sync(device)
        with PeakRSS(device) as pm:
            t = time.perf_counter()
            out = fn()
            sync(device)
            dt = time.perf_counter() - t
        best = min(best, dt)
        mem = pm.mb if mem is None else mem
    return best, out, mem


def table(rows, columns):
    """Print rows (dicts) as a fixed-width table."""
    widths = {c: max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in columns}
    line = "  ".join(c.ljust(widths[c]) for c in columns)
    print(line)
    print("-" * len(line))
    for r in rows:
        print("  ".join(str(r.get(c, "")).ljust(widths[c]) for c in columns))


def device_name(device):
    d = torch.device(device)
    if d.type == "cuda":
        return torch.cuda.get_device_name(d)
    return f"CPU ({os.cpu_count()} cores, {torch.get_num_threads()} torch threads)"
