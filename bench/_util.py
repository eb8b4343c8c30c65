"""Shared benchmark helpers: timing, peak memory, a printed table, and a reproducible load.

Run as a script, it runs a command beside N single-core busy loops and prints the load
average before and after (the busy-machine runs of the test suite and benchmarks)::

    python bench/_util.py --busy 1 -- python -m pytest -q tests
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import os
import subprocess
import sys
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


# A busy loop that ends by itself: when its parent is gone or after `limit` seconds.
_SPIN = ("import os, time\n"
         "parent, end = os.getppid(), time.time() + {limit}\n"
         "while os.getppid() == parent and time.time() < end:\n"
         "    for _ in range(100000): pass\n")


@contextlib.contextmanager
def busy(n: int, limit: float = 3600.0):
    """Run ``n`` single-core busy-loop processes beside the block (another user's work on
    the same cores); each stops with the block, with this process, or after ``limit`` s."""
    procs = [subprocess.Popen([sys.executable, "-c", _SPIN.format(limit=limit)])
             for _ in range(n)]
    try:
        yield procs
    finally:
        for p in procs:
            p.kill()
            p.wait()


def conditions(busy_rows: bool):
    """``[(label, context factory)]``: the quiet condition, and with ``busy_rows`` also one
    busy loop beside the run (:func:`busy`) — the benchmarks' ``--busy-rows`` flag, so
    that one run prints a quiet row and a busy row for every method and its peer."""
    out = [("quiet", contextlib.nullcontext)]
    if busy_rows:
        out.append(("busy 1", lambda: busy(1)))
    return out


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, for printing beside a figure."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Run a command beside N busy loops.")
    ap.add_argument("--busy", type=int, default=1, help="single-core busy loops beside it")
    ap.add_argument("--limit", type=float, default=3600.0, help="seconds the loops run at most")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- command and arguments")
    args = ap.parse_args(argv)
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd:
        ap.error("no command given (put it after --)")
    print(f"load average before: {load_average()}", flush=True)
    with busy(args.busy, args.limit):
        t = time.perf_counter()
        rc = subprocess.call(cmd)
        dt = time.perf_counter() - t
        print(f"\n{args.busy} busy loop(s) beside it; {dt:.1f} s; load average at the end: "
              f"{load_average()}", flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
