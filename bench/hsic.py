"""HSIC independence test: the exact (dense Gram) permutation test vs the Nyström one.

Both run torchkern's ``HSICTest`` on the same data with the same permutations
(``random_state=0``): ``method="exact"`` materializes the two n × n Gram matrices and
gathers permuted copies of them (O(n²) memory, O(P·n²) time); ``method="nystrom"`` uses m
Nyström features per kernel and permutes the rows of the centered Y features
(O(n·m) memory, O(P·n·m²) time; Zhang et al. 2018). The exact run is skipped when its
n × n matrices (≈ 7 float64 n × n at its peak, 5.4 GB at n = 10,000) do not fit in the
available memory, or above ``--max-exact`` (its time grows as n²: ≈ 3.7 s per
permutation at n = 10,000 on one core).

    python bench/hsic.py                          # n = 2000, 10000, 50000 (~7 min, 1 core;
                                                  # 6 of them the exact n = 10,000 row)
    python bench/hsic.py --max-exact 5000         # ~30 s
    python bench/hsic.py --sizes 100000 --features 50 --permutations 500
"""
from __future__ import annotations

import argparse
import os
import sys

import psutil
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import device_name, table, timed  # noqa: E402

from torchkern.stats import HSICTest  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[2000, 10000, 50000])
    ap.add_argument("--permutations", type=int, default=100)
    ap.add_argument("--features", type=int, default=100, help="Nyström centers per kernel")
    ap.add_argument("--max-exact", type=int, default=10000,
                    help="largest n for the exact test")
    ap.add_argument("--dtype", choices=["float32", "float64"], default="float64")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.dtype)
    print(f"HSIC permutation test, X ∈ R², Y = 0.1·x₁x₂ + N(0, 1), P = {args.permutations}, "
          f"m = {args.features}, {args.dtype}, median-heuristic RBF kernels, "
          f"{device_name(args.device)}\n")

    rows = []
    for n in args.sizes:
        g = torch.Generator().manual_seed(n)
        X = torch.randn(n, 2, generator=g, dtype=dtype)
        Y = 0.1 * X[:, :1] * X[:, 1:] + torch.randn(n, 1, generator=g, dtype=dtype)
        X, Y = X.to(args.device), Y.to(args.device)
        for method in ("exact", "nystrom"):
            row = dict(n=n, method=method, m="" if method == "exact" else args.features)
            if method == "exact":
                need = 7 * n * n * 8 / 2**30
                avail = psutil.virtual_memory().available / 2**30
                if torch.device(args.device).type == "cuda":
                    avail = torch.cuda.mem_get_info()[0] / 2**30
                if need > 0.8 * avail:
                    rows.append(dict(row, seconds=f"OOM/skipped (needs {need:.0f} GB)"))
                    continue
                if n > args.max_exact:
                    rows.append(dict(row, seconds=f"skipped (--max-exact {args.max_exact}; "
                                                  f"needs {need:.0f} GB)"))
                    continue
            test = HSICTest(n_permutations=args.permutations, random_state=0, method=method,
                            n_features=args.features)
            t, res, mem = timed(lambda: test.test(X, Y), args.device)
            rows.append(dict(row, seconds=f"{t:.2f}", peak_MB=f"{mem:.0f}",
                             hsic=f"{res.statistic.item():.4e}", p_value=f"{res.p_value:.4f}"))
            print("  ".join(f"{k}={v}" for k, v in rows[-1].items()), flush=True)
    print()
    table(rows, ["n", "method", "m", "seconds", "peak_MB", "hsic", "p_value"])
    print("\npeak_MB: peak RSS growth during the test (CUDA: allocator peak); "
          "hsic: the biased estimate tr(KHLH)/n² (Nyström: ‖Φ̃ᵀΨ̃‖²_F/n²).")


if __name__ == "__main__":
    main()
