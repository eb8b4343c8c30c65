"""Benchmark: solve (K + λI) x = b for an RBF Gram matrix, d = 3.

Methods, all on the same data and right-hand side:

* ``pcg-nystrom``  torchkern.linalg.cg with a NystromPreconditioner, on the lazy
                   KernelMatrix ``RBF()(X, backend=...)`` (no n × n storage);
* ``cg``           torchkern.linalg.cg without preconditioner, same operator;
* ``keops-solve``  KeOps' own ``LazyTensor.solve(b, alpha=λ)`` (plain CG; it has no
                   iteration cap, so it only runs in float64, where it converges);
* ``dense-chol``   materialized K, ``torch.linalg.cholesky`` + ``cholesky_solve``, when
                   n² entries fit in a quarter of the available memory.

Reported: wall time, iterations, true relative residual ‖b − (K+λI)x‖/‖b‖ (with the
KeOps/blocked product in the benchmark dtype), and the peak increase of the process RSS
over the call (psutil, sampled every 5 ms; on CUDA the allocator's peak growth instead).
Ratios are against ``pcg-nystrom``.

    python bench/solvers.py                       # n = 2000, 5000 (a few minutes on 2 cores)
    python bench/solvers.py --sizes 10000 50000 200000 --skip-plain-above 20000
    python bench/solvers.py --device cuda --sizes 10000 50000 200000 --skip-plain-above 200000
    python bench/solvers.py --busy-rows           # + every size again beside one busy loop

λ = lam_rel · n (kernel ridge regression with regularization lam_rel).
"""

import argparse
import math
import os
import sys
import threading
import time

import psutil
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from torchkern.kernels import RBF  # noqa: E402
from torchkern.linalg import NystromPreconditioner, cg  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import conditions  # noqa: E402


class PeakRSS:
    """Peak increase of the resident set size during a ``with`` block, in MB (on CUDA:
    of the allocator's memory)."""

    def __init__(self, device="cpu", interval=0.005):
        self.proc = psutil.Process()
        self.interval = interval
        self.cuda = torch.device(device).type == "cuda"

    def __enter__(self):
        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self.base = torch.cuda.memory_allocated()
            return self
        self.base = self.peak = self.proc.memory_info().rss
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self.proc.memory_info().rss)
            time.sleep(self.interval)

    def __exit__(self, *exc):
        if self.cuda:
            torch.cuda.synchronize()
            self.mb = (torch.cuda.max_memory_allocated() - self.base) / 2**20
            return
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.proc.memory_info().rss)
        self.mb = (self.peak - self.base) / 2**20


def run(name, fn, device="cpu"):
    with PeakRSS(device) as mem:
        t0 = time.perf_counter()
        x, iters, note = fn()
        seconds = time.perf_counter() - t0
    return {"method": name, "x": x, "time": seconds, "iters": iters, "mem": mem.mb, "note": note}


def bench_size(n, args, dtype):
    g = torch.Generator().manual_seed(n)
    X = torch.randn(n, 3, generator=g, dtype=dtype)
    b = (torch.sin(2 * X[:, 0]) * torch.cos(X[:, 1]) + 0.1 * torch.randn(n, generator=g, dtype=dtype))
    X, b = X.to(args.device), b.to(args.device)
    lam = args.lam_rel * n
    ell = 1.0
    kernel = RBF(lengthscale=ell).to(dtype=dtype, device=args.device)
    K = kernel(X, backend=args.backend)
    A = K.add_diag(lam)
    results = []

    def pcg():
        m = min(args.centers, n)
        P = NystromPreconditioner(K, m, lam, random_state=0)
        x, info = cg(A, b, preconditioner=P, tol=args.tol, max_iter=args.max_iter, return_info=True)
        return x, info.iterations, f"m={m}" + ("" if info.converged else " (cap)")

    def plain():
        x, info = cg(A, b, tol=args.tol, max_iter=args.max_iter, return_info=True)
        return x, info.iterations, "" if info.converged else "(cap)"

    def keops_solve():
        from pykeops.torch import LazyTensor

        x_i, x_j = LazyTensor(X[:, None, :]), LazyTensor(X[None, :, :])
        K_ij = (-((x_i - x_j) ** 2).sum(-1) / (2 * ell**2)).exp()
        # KeOps stops when ‖r‖² < n·eps²: the same relative criterion as ours
        eps = args.tol * float(b.norm()) / math.sqrt(n)
        x = K_ij.solve(LazyTensor(b[:, None, None]), alpha=lam, eps=eps)
        return x.reshape(n), None, ""

    def dense():
        D = kernel(X, backend="dense").to_dense()
        D.diagonal().add_(lam)
        L = torch.linalg.cholesky(D)
        x = torch.cholesky_solve(b[:, None], L)[:, 0]
        return x, None, ""

    with torch.no_grad():
        results.append(run("pcg-nystrom", pcg, args.device))
        if n <= args.skip_plain_above:
            results.append(run("cg", plain, args.device))
        else:
            results.append({"method": "cg", "skipped": f"n > --skip-plain-above={args.skip_plain_above}"})
        if args.keops_error:
            results.append({"method": "keops-solve", "skipped": "KeOps unusable on this device"})
        elif dtype != torch.float64:
            results.append({"method": "keops-solve", "skipped": "float32: KeOps CG has no iteration cap"})
        elif n > args.skip_plain_above:
            results.append({"method": "keops-solve", "skipped": f"n > --skip-plain-above={args.skip_plain_above}"})
        else:
            results.append(run("keops-solve", keops_solve, args.device))
        need = n * n * torch.finfo(dtype).bits // 8 * 2  # K and its factor
        if torch.device(args.device).type == "cuda":
            avail = torch.cuda.mem_get_info()[0]
        else:
            avail = psutil.virtual_memory().available
        if need < avail / 4 and n <= args.dense_max_n:
            results.append(run("dense-chol", dense, args.device))
        else:
            results.append({"method": "dense-chol", "skipped": f"needs {need / 2**30:.1f} GiB (or n > --dense-max-n)"})

        bnorm = float(b.norm())
        for r in results:
            if "x" in r:
                r["residual"] = float((b - A @ r.pop("x")).norm()) / bnorm
    return lam, results


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=int, nargs="+", default=[2000, 5000])
    p.add_argument("--backend", default="keops", choices=["keops", "blocked"])
    p.add_argument("--dtype", default="float64", choices=["float32", "float64"])
    p.add_argument("--lam-rel", type=float, default=1e-4, help="λ = lam_rel · n")
    p.add_argument("--tol", type=float, default=1e-6, help="relative residual for the CG solvers")
    p.add_argument("--max-iter", type=int, default=1000)
    p.add_argument("--centers", type=int, default=500, help="Nyström centers m")
    p.add_argument("--skip-plain-above", type=int, default=50000,
                   help="skip unpreconditioned CG and KeOps solve above this n")
    p.add_argument("--dense-max-n", type=int, default=20000)
    p.add_argument("--device", default="cpu")
    p.add_argument("--busy-rows", action="store_true",
                   help="also every size beside one busy loop (bench/_util.busy)")
    args = p.parse_args()
    dtype = getattr(torch, args.dtype)
    from torchkern.gram import keops_unavailable_reason

    args.keops_error = keops_unavailable_reason(args.device)
    if args.keops_error:
        print(f"# KeOps unusable on {args.device} ({args.keops_error}): blocked backend, no keops-solve")
        args.backend = "blocked"

    print(f"# RBF (ℓ=1) Gram, d=3, backend={args.backend}, {args.dtype}, tol={args.tol:g}, "
          f"λ={args.lam_rel:g}·n, torch threads={torch.get_num_threads()}, "
          f"cpus={os.cpu_count()}, load={os.getloadavg()[0]:.1f}, device={args.device}"
          + (f" ({torch.cuda.get_device_name()})" if torch.device(args.device).type == "cuda" else ""))
    header = f"{'n':>7} {'method':<12} {'time s':>9} {'×pcg':>7} {'iters':>6} {'rel.res':>9} {'Δmem MB':>9}  note"
    print(header)
    print("-" * len(header))
    # warm-up: compile the KeOps formulas (product, solve) outside the timings
    bench_size(200, args, dtype)
    for cond, context in conditions(args.busy_rows):
        with context():
            for n in args.sizes:
                _print_size(n, args, dtype, cond)


def _print_size(n, args, dtype, cond):
    lam, results = bench_size(n, args, dtype)
    t_ref = results[0]["time"]
    load = f"{cond}, load {os.getloadavg()[0]:.2f}"
    for r in results:
        if "skipped" in r:
            print(f"{n:>7} {r['method']:<12} {'—':>9} {'—':>7} {'—':>6} {'—':>9} {'—':>9}  skipped: {r['skipped']}")
            continue
        iters = "—" if r["iters"] is None else str(r["iters"])
        print(f"{n:>7} {r['method']:<12} {r['time']:>9.2f} {r['time'] / t_ref:>7.1f} {iters:>6} "
              f"{r['residual']:>9.1e} {r['mem']:>9.1f}  {r['note']} λ={lam:g}; {load}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
