"""Kernel PCA benchmark: torchkern.KernelPCA against scikit-learn's KernelPCA.

Top-10 components of an RBF kernel on n points in 8 dimensions (a mixture of Gaussians),
every method on the same data, each run in its own subprocess so that its peak memory
(ru_maxrss) is its own. Eigenvalue agreement is the largest relative difference of the
top-10 eigenvalues from scikit-learn's ARPACK solution (tol=0: machine precision).

    python bench/unsupervised.py                      # n = 5000, 20000
    python bench/unsupervised.py --sizes 2000 5000 40000 --threads 2
    python bench/unsupervised.py --methods tk-dense sk-randomized

Methods:
    sk-arpack       sklearn KernelPCA(eigen_solver="arpack")
    sk-randomized   sklearn KernelPCA(eigen_solver="randomized")
    tk-dense        torchkern KernelPCA(backend="dense"), eigen_solver="auto" (= randomized
                    block Krylov): the Gram matrix materialized once, lazy centering
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
    t = time.perf_counter()
    m = KernelPCA({k}, kernel="rbf", gamma=gamma, eigen_solver=solver, random_state=0, **kw).fit(X)
    elapsed = time.perf_counter() - t
    evals = m.eigenvalues_.tolist()
else:
    import torchkern
    backend = "blocked" if method == "tk-blocked" else "dense"
    solver = "lanczos" if method.endswith("-lanczos") else "auto"
    dtype = torch.float32 if method.startswith("tk-dense32") else torch.float64
    Xt = torch.tensor(X, dtype=dtype)
    t = time.perf_counter()
    m = torchkern.KernelPCA(torchkern.RBF({ls}), {k}, eigen_solver=solver, backend=backend,
                            tol=1e-6 if dtype == torch.float64 else 1e-4, random_state=0).fit(Xt)
    elapsed = time.perf_counter() - t
    evals = m.eigenvalues_.double().tolist()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps(dict(time=elapsed, evals=evals, mem_mb=(peak - base) / 1024)))
"""

METHODS = ["sk-arpack", "sk-randomized", "tk-dense", "tk-dense32", "tk-dense-lanczos",
           "tk-dense32-lanczos", "tk-blocked"]


def run(method, n, threads, timeout):
    code = _CHILD.format(method=method, n=n, threads=threads, d=D, ls=LENGTHSCALE, k=K_TOP)
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
               MKL_NUM_THREADS=str(threads))
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
    p.add_argument("--sizes", type=int, nargs="+", default=[5000, 20000])
    p.add_argument("--methods", nargs="+", default=None, choices=METHODS)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--blocked-max-n", type=int, default=5000,
                   help="skip tk-blocked above this n unless listed in --methods")
    args = p.parse_args()
    rows = []
    for n in args.sizes:
        methods = args.methods or [m for m in METHODS
                                   if not (m == "tk-blocked" and n > args.blocked_max_n)]
        results = {}
        for m in methods:
            t0 = time.time()
            results[m] = run(m, n, args.threads, args.timeout)
            print(f"  n={n:>6} {m:<14} done in {time.time() - t0:6.1f}s", file=sys.stderr)
        ref = results.get("sk-arpack", {}).get("evals")
        sk_times = {m: results[m]["time"] for m in ("sk-arpack", "sk-randomized")
                    if "time" in results.get(m, {})}
        for m in methods:
            r = results[m]
            if "error" in r:
                rows.append((n, m, r["error"], "", "", "", ""))
                continue
            err = (max(abs(a - b) / abs(b) for a, b in zip(r["evals"], ref)) if ref
                   else float("nan"))
            ra = sk_times.get("sk-arpack", float("nan")) / r["time"]
            rr = sk_times.get("sk-randomized", float("nan")) / r["time"]
            rows.append((n, m, f"{r['time']:.2f}", f"{ra:.1f}x", f"{rr:.1f}x", f"{err:.1e}",
                         f"{r['mem_mb']:.0f}"))
    head = ("n", "method", "time [s]", "arpack/this", "sk-rand/this", "max rel err λ1..10",
            "peak +MB")
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    fmt = " | ".join(f"{{:>{w}}}" for w in widths)
    print(fmt.format(*head))
    print("-+-".join("-" * w for w in widths))
    for row in rows:
        print(fmt.format(*row))


if __name__ == "__main__":
    main()
