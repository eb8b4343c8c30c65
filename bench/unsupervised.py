"""Kernel PCA benchmark: torchkern.KernelPCA against scikit-learn's KernelPCA.

Top-10 components of an RBF kernel on n points in 8 dimensions (a mixture of Gaussians),
every method on the same data, each run in its own subprocess so that its peak memory
(ru_maxrss) is its own. Eigenvalue agreement is the largest relative difference of the
top-10 eigenvalues from scikit-learn's ARPACK solution (tol=0: machine precision).

    python bench/unsupervised.py                      # n = 8000, 20000; the issue's rows
    python bench/unsupervised.py --sizes 2000 5000 40000 --threads 2 --repeat 3
    python bench/unsupervised.py --methods tk-dense sk-randomized
    python bench/unsupervised.py --sizes 8000 --busy-rows --threads 1 2 --omp-wait-policy ''
                                  # quiet and beside one busy loop, 1 and 2 threads
    python bench/unsupervised.py --sizes 8000 --busy-rows --repeat 3 --cpus 0,1
                                  # the same 2-core setting on a larger machine

Default methods: sk-arpack, tk-dense (float64) and tk-dense32. ``--repeat r`` runs every
method r times (each in a fresh process, so each pays its own first touch of memory) and
reports the fastest, with its CPU time (all threads: a fit that waits for descheduled
threads shows its wall time growing, not its CPU time). The load average of the machine
is printed before and after (the development CPUs are shared: compare rows of one run
only). The runs get
OMP_WAIT_POLICY=PASSIVE (``--omp-wait-policy ''`` leaves the environment's): on the
oversubscribed shared CPUs, torch's OpenMP threads spinning at barriers made the dense
float64 Gram of n = 8000 take 20-46 s with 2 threads instead of 1.1 s (measured at load
average 11); scikit-learn's NumPy/OpenBLAS work does not use OpenMP. The GPU rows are
bench/kpca_device.py's.

Methods:
    sk-arpack       sklearn KernelPCA(eigen_solver="arpack")
    sk-randomized   sklearn KernelPCA(eigen_solver="randomized")
    tk-dense        torchkern KernelPCA(backend="dense"), eigen_solver="auto" (= randomized
                    block Krylov): the Gram matrix materialized once, lazy centering, block
                    products over its upper triangle in tiles shared by the threads
                    (torchkern.linalg.tiled)
    tk-dense32      the same in float32
    tk-dense-lanczos  backend="dense", eigen_solver="lanczos" (thick-restart Lanczos)
    tk-dense32-lanczos  the same in float32
    tk-blocked      torchkern KernelPCA(backend="blocked"), eigen_solver="auto" (= randomized
                    block Krylov): never stores the Gram matrix (O(n) memory), recomputes
                    it once per block step
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from _util import conditions  # noqa: E402

K_TOP = 10
D = 8
LENGTHSCALE = 2.0

_CHILD = r"""
import json, resource, sys, time
import numpy as np, torch
torch.set_num_threads({threads})
method, n = {method!r}, {n}
rng = np.random.default_rng(0)
centers = rng.normal(scale=2.0, size=(20, {d}))
X = centers[rng.integers(0, 20, size=n)] + rng.normal(size=(n, {d}))
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
gamma = 1.0 / (2 * {ls} ** 2)
if method.startswith("sk-"):
    from sklearn.decomposition import KernelPCA
    solver = method[3:]
    kw = dict(tol=0) if solver == "arpack" else {{}}
    t, c = time.perf_counter(), time.process_time()
    m = KernelPCA({k}, kernel="rbf", gamma=gamma, eigen_solver=solver, random_state=0, **kw).fit(X)
    elapsed, cpu = time.perf_counter() - t, time.process_time() - c
    evals = m.eigenvalues_.tolist()
else:
    import torchkern
    backend = "blocked" if method == "tk-blocked" else "dense"
    solver = "lanczos" if method.endswith("-lanczos") else "auto"
    dtype = torch.float32 if method.startswith("tk-dense32") else torch.float64
    Xt = torch.tensor(X, dtype=dtype)
    t, c = time.perf_counter(), time.process_time()
    m = torchkern.KernelPCA(torchkern.RBF({ls}), {k}, eigen_solver=solver, backend=backend,
                            tol=1e-6 if dtype == torch.float64 else 1e-4, random_state=0).fit(Xt)
    elapsed, cpu = time.perf_counter() - t, time.process_time() - c
    evals = m.eigenvalues_.double().tolist()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps(dict(time=elapsed, cpu=cpu, evals=evals, mem_mb=(peak - base) / 1024)))
"""

METHODS = ["sk-arpack", "sk-randomized", "tk-dense", "tk-dense32", "tk-dense-lanczos",
           "tk-dense32-lanczos", "tk-blocked"]
DEFAULT_METHODS = ["sk-arpack", "tk-dense", "tk-dense32"]


def run(method, n, threads, timeout, wait_policy="PASSIVE"):
    code = _CHILD.format(method=method, n=n, threads=threads, d=D, ls=LENGTHSCALE, k=K_TOP)
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
               MKL_NUM_THREADS=str(threads))
    if wait_policy:
        env["OMP_WAIT_POLICY"] = wait_policy
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout > {timeout}s"}
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1][:80]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=int, nargs="+", default=[8000, 20000])
    p.add_argument("--methods", nargs="+", default=None, choices=METHODS)
    p.add_argument("--threads", type=int, nargs="+", default=[2],
                   help="thread counts (several: one set of rows each, same run)")
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--repeat", type=int, default=1, help="runs per method; the fastest counts")
    p.add_argument("--omp-wait-policy", default="PASSIVE",
                   help="OMP_WAIT_POLICY of the runs ('' leaves the environment's)")
    p.add_argument("--blocked-max-n", type=int, default=5000,
                   help="skip tk-blocked above this n unless listed in --methods")
    p.add_argument("--busy-rows", action="store_true",
                   help="also run every method beside one busy loop (bench/_util.busy)")
    p.add_argument("--cpus", default=None,
                   help="pin the runs and the busy loop to these CPUs, e.g. '0,1' (the "
                        "2-core setting on a larger machine)")
    args = p.parse_args()
    if args.cpus:
        os.sched_setaffinity(0, {int(c) for c in args.cpus.split(",")})
    load_before = os.getloadavg()[0]
    rows = []
    for cond, context in conditions(args.busy_rows):
        for threads in args.threads:
            with context():
                for n in args.sizes:
                    rows += _rows(args, n, threads, cond)
    head = ("condition", "threads", "n", "method", "time [s]", "CPU [s]", "arpack/this",
            "sk-rand/this", "max rel err λ1..10", "peak +MB", "load 1 min")
    print(f"# OMP_WAIT_POLICY={args.omp_wait_policy or 'unset'}, best of {args.repeat} (CPU: "
          f"of the fastest run), CPUs {sorted(os.sched_getaffinity(0))}; load "
          f"average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after (the load column: "
          f"at the end of each method's runs)")
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    fmt = " | ".join(f"{{:>{w}}}" for w in widths)
    print(fmt.format(*head))
    print("-+-".join("-" * w for w in widths))
    for row in rows:
        print(fmt.format(*row))


def _rows(args, n, threads, cond):
    methods = args.methods or [m for m in DEFAULT_METHODS
                               if not (m == "tk-blocked" and n > args.blocked_max_n)]
    results, loads = {}, {}
    for m in methods:
        for _ in range(args.repeat):
            t0 = time.time()
            r = run(m, n, threads, args.timeout, args.omp_wait_policy)
            if m not in results or r.get("time", 1e300) < results[m].get("time", 1e300):
                results[m] = r
            print(f"  {cond} {threads}t n={n:>6} {m:<14} done in {time.time() - t0:6.1f}s",
                  file=sys.stderr)
        loads[m] = f"{os.getloadavg()[0]:.2f}"
    ref = results.get("sk-arpack", {}).get("evals")
    sk_times = {m: results[m]["time"] for m in ("sk-arpack", "sk-randomized")
                if "time" in results.get(m, {})}
    rows = []
    for m in methods:
        r = results[m]
        if "error" in r:
            rows.append((cond, threads, n, m, r["error"], "", "", "", "", "", loads[m]))
            continue
        err = (max(abs(a - b) / abs(b) for a, b in zip(r["evals"], ref)) if ref
               else float("nan"))
        ratios = [f"{sk_times[s] / r['time']:.1f}x" if s in sk_times else "-"
                  for s in ("sk-arpack", "sk-randomized")]
        rows.append((cond, threads, n, m, f"{r['time']:.2f}", f"{r['cpu']:.2f}", *ratios,
                     f"{err:.1e}", f"{r['mem_mb']:.0f}", loads[m]))
    return rows


if __name__ == "__main__":
    main()
