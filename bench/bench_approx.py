"""Kernel approximation: torchkern.approx against scikit-learn's RBFSampler and Nystroem.

One run, same data (n points, d dims, RBF kernel with lengthscale √d), each method in its own
subprocess so its peak memory is its own. Prints one table: fit+transform time, ratio to
the scikit-learn peer, relative Frobenius error ‖K − ΨΨᵀ‖_F/‖K‖_F on the first 2000 points,
and peak RSS growth.

    python bench/bench_approx.py                    # n=20000, d=10, p=1000, m=500 (~1-2 min)
    python bench/bench_approx.py --n 200000 --p 4000 --m 2000
    python bench/bench_approx.py --busy-rows        # + every row beside one busy loop
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap

sys.path.insert(0, os.path.dirname(__file__))
from _util import conditions  # noqa: E402

METHODS = {
    "sklearn RBFSampler": ("rff", "sk"),
    "torchkern RFF": ("rff", "tk"),
    "torchkern RFF orthogonal": ("rff", "tk_orth"),
    "sklearn Nystroem": ("ny", "sk"),
    "torchkern Nystroem uniform": ("ny", "uniform"),
    "torchkern Nystroem kmeans": ("ny", "kmeans"),
    "torchkern Nystroem greedy": ("ny", "greedy"),
}

CHILD = textwrap.dedent("""
    import json, resource, sys, time
    import numpy as np, torch
    import torchkern as tk
    from torchkern.approx import Nystroem, RandomFourierFeatures
    from sklearn.kernel_approximation import Nystroem as SkNystroem, RBFSampler
    family, which, n, d, p, m, seed, threads = sys.argv[1:]
    n, d, p, m, seed = int(n), int(d), int(p), int(m), int(seed)
    torch.set_num_threads(int(threads))
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    ell = d ** 0.5
    gamma = 1 / (2 * ell ** 2)
    Xt = torch.from_numpy(X)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t = time.perf_counter()
    if family == "rff" and which == "sk":
        P = torch.from_numpy(RBFSampler(gamma=gamma, n_components=p, random_state=seed).fit_transform(X))
    elif family == "rff":
        rff = RandomFourierFeatures(tk.RBF(lengthscale=ell), p, orthogonal=which == "tk_orth",
                                    random_state=seed)
        with torch.no_grad():
            P = rff(Xt)
    elif which == "sk":
        P = torch.from_numpy(SkNystroem(gamma=gamma, n_components=m, random_state=seed).fit_transform(X))
    else:
        P = Nystroem(tk.RBF(lengthscale=ell), m, center_selection=which, random_state=seed).fit_transform(Xt)
    elapsed = time.perf_counter() - t
    peak = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024
    s = min(n, 2000)
    with torch.no_grad():
        K = tk.RBF(lengthscale=ell)(Xt[:s], backend="dense").to_dense()
        Ps = P[:s].to(torch.float64)
        err = float((K - Ps @ Ps.T).norm() / K.norm())
    print(json.dumps({"time": elapsed, "err": err, "peak_mb": peak, "width": P.shape[1]}))
""")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--d", type=int, default=10)
    ap.add_argument("--p", type=int, default=1000, help="random features")
    ap.add_argument("--m", type=int, default=500, help="Nystroem anchors")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1,
                    help="threads for torch and BLAS (1: fair and stable on a shared 2-core box)")
    ap.add_argument("--busy-rows", action="store_true",
                    help="also every method beside one busy loop (bench/_util.busy)")
    args = ap.parse_args()
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads),
               OPENBLAS_NUM_THREADS=str(args.threads))
    rows = {}
    for cond, context in conditions(args.busy_rows):
        with context():
            for name, (family, which) in METHODS.items():
                out = subprocess.run([sys.executable, "-c", CHILD, family, which, str(args.n),
                                      str(args.d), str(args.p), str(args.m), str(args.seed),
                                      str(args.threads)],
                                     capture_output=True, text=True, check=True, env=env)
                r = json.loads(out.stdout.strip().splitlines()[-1])
                rows[cond, name] = dict(r, load=os.getloadavg()[0])
    print(f"n={args.n} d={args.d} RBF(lengthscale=√d); RFF p={args.p}, Nystroem m={args.m}; "
          f"error on the first {min(args.n, 2000)} points; {args.threads} thread(s); load: "
          f"1-minute load average after the method")
    print(f"{'condition':9s} {'method':28s} {'features':>8s} {'time (s)':>9s} {'vs sklearn':>10s} "
          f"{'rel. error':>10s} {'peak MB':>8s} {'load':>6s}")
    for (cond, name), r in rows.items():
        peer = rows[cond, "sklearn RBFSampler" if METHODS[name][0] == "rff" else "sklearn Nystroem"]
        print(f"{cond:9s} {name:28s} {r['width']:8d} {r['time']:9.3f} "
              f"{r['time'] / peer['time']:9.2f}x {r['err']:10.4f} {r['peak_mb']:8.0f} "
              f"{r['load']:6.2f}")


if __name__ == "__main__":
    main()
