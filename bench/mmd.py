"""MMD permutation test: torchkern (lazy Gram, one batched product) vs dense torch.

Both run the same algorithm on the same data and the same permutations: every relabelling
is a column of one (N, P + 2) weight matrix S and the statistics come from one product
K_ZZ @ S. torchkern evaluates K_ZZ lazily in row blocks (``backend="blocked"``; KeOps on
GPU), the dense reference materializes the N × N Gram matrix with ``torch.cdist`` first
and reads the statistics off with indicator sums (an independent formula). The dense run
is skipped when its Gram matrix does not fit in the available memory.

    python bench/mmd.py                       # n = 2000, 10000 per sample (~2 min, 2 cores)
    python bench/mmd.py --sizes 2000 10000 50000 --threads 1
"""
from __future__ import annotations

import argparse
import os
import sys

import psutil
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import device_name, table, timed  # noqa: E402

import torchkern  # noqa: E402
from torchkern.stats import MMDTest  # noqa: E402
from torchkern.stats._common import generator, randperm  # noqa: E402


def dense_mmd_test(X, Y, lengthscale, n_permutations, seed):
    """Dense torch reference: materialized K_ZZ, the same permutations, indicator sums."""
    n, m = len(X), len(Y)
    Z = torch.cat([X, Y])
    N = n + m
    K = torch.cdist(Z, Z).pow_(2).mul_(-0.5 / lengthscale**2).exp_()
    gen = generator(seed)
    A = torch.zeros(N, n_permutations + 1, dtype=Z.dtype, device=Z.device)
    A[:n, 0] = 1
    for p in range(1, n_permutations + 1):
        A[randperm(N, gen, Z.device)[:n], p] = 1
    KA = (K @ A).double()
    r = K.sum(1, dtype=torch.float64)
    d = K.diagonal().double()
    del K
    A = A.double()
    sxx = (A * KA).sum(0)
    sxy = r @ A - sxx
    syy = r.sum() - 2 * (r @ A) + sxx
    tx = d @ A
    ty = d.sum() - tx
    stats = ((sxx - tx) / (n * (n - 1)) + (syy - ty) / (m * (m - 1)) - 2 * sxy / (n * m))
    stat, null = stats[0], stats[1:]
    return stat.item(), (1 + int((null >= stat).sum())) / (1 + n_permutations)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[2000, 10000],
                    help="samples per side (n = m)")
    ap.add_argument("--dim", type=int, default=10)
    ap.add_argument("--permutations", type=int, default=200)
    ap.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.dtype)
    backend = "blocked"
    if torch.device(args.device).type == "cuda":
        why = torchkern.gram.keops_unavailable_reason(args.device)
        backend = "keops" if why is None else "blocked"
        if why:
            print(f"# KeOps unusable on {args.device}: {why}")
    print(f"MMD permutation test, d = {args.dim}, P = {args.permutations}, {args.dtype}, "
          f"{device_name(args.device)}, torchkern backend = {backend!r}\n")

    rows = []
    for n in args.sizes:
        g = torch.Generator().manual_seed(n)
        X = torch.randn(n, args.dim, generator=g, dtype=dtype).to(args.device)
        Y = torch.randn(n, args.dim, generator=g, dtype=dtype).to(args.device)
        Y[:, 0] += 0.05  # a small shift: p-values are neither 1/(P+1) nor ~uniform noise
        ls = float(args.dim) ** 0.5
        kernel = torchkern.RBF(ls)
        N = 2 * n

        test = MMDTest(kernel, n_permutations=args.permutations, random_state=0, backend=backend)
        t_tk, res, mem_tk = timed(lambda: test.test(X, Y), args.device)
        rows.append(dict(n=n, N=N, method="torchkern", seconds=f"{t_tk:.2f}",
                         peak_MB=f"{mem_tk:.0f}", mmd2=f"{res.statistic.item():.3e}",
                         p_value=f"{res.p_value:.4f}", time_ratio="1.00"))

        need = N * N * X.element_size() * 1.1 / 2**30
        avail = psutil.virtual_memory().available / 2**30
        if torch.device(args.device).type == "cuda":
            avail = torch.cuda.mem_get_info()[0] / 2**30
        if need > 0.8 * avail:
            rows.append(dict(n=n, N=N, method="dense torch",
                             seconds=f"OOM/skipped (needs {need:.1f} GB)"))
            continue
        t_d, (stat, p), mem_d = timed(lambda: dense_mmd_test(X, Y, ls, args.permutations, 0),
                                      args.device)
        rows.append(dict(n=n, N=N, method="dense torch", seconds=f"{t_d:.2f}",
                         peak_MB=f"{mem_d:.0f}", mmd2=f"{stat:.3e}", p_value=f"{p:.4f}",
                         time_ratio=f"{t_d / t_tk:.2f}"))
    table(rows, ["n", "N", "method", "seconds", "peak_MB", "mmd2", "p_value", "time_ratio"])
    print("\nn: samples per side; N = 2n pooled; peak_MB: peak RSS growth during the test; "
          "time_ratio: dense time / torchkern time.")


if __name__ == "__main__":
    main()
