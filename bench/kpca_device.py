"""KernelPCA top-10 on a GPU against scikit-learn's KernelPCA on the same machine's CPUs.

The data and kernel are bench/unsupervised.py's (a mixture of 20 Gaussians in 8
dimensions, RBF with ℓ = 2); that script compares the CPU solvers, this one adds the
CUDA rows. Eigenvalue agreement: largest relative difference of the top-10 eigenvalues
from scikit-learn's ARPACK solution (tol=0).

    python bench/kpca_device.py [--sizes 5000 20000] [--device cuda]
"""
import argparse
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
from _util import device_name, sync, table  # noqa: E402
from unsupervised import D, K_TOP, LENGTHSCALE  # noqa: E402

import torchkern  # noqa: E402


def data(n):
    rng = np.random.default_rng(0)
    centers = rng.normal(scale=2.0, size=(20, D))
    return centers[rng.integers(0, 20, size=n)] + rng.normal(size=(n, D))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[5000, 20000])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    from sklearn.decomposition import KernelPCA

    print(f"# torchkern on {device_name(args.device)}; scikit-learn on {os.cpu_count()} CPU cores")
    rows = []
    for n in args.sizes:
        X = data(n)
        t = time.perf_counter()
        ref = KernelPCA(K_TOP, kernel="rbf", gamma=1 / (2 * LENGTHSCALE**2), eigen_solver="arpack",
                        tol=0, random_state=0).fit(X).eigenvalues_
        t_sk = time.perf_counter() - t
        rows.append(dict(n=n, method="sklearn arpack (CPU)", seconds=f"{t_sk:.2f}", ratio="1.00",
                         max_rel_eig_err="0"))
        for dtype in (torch.float64, torch.float32):
            Xt = torch.tensor(X, dtype=dtype, device=args.device)
            torchkern.RBF(1.0)(Xt[:2])  # CUDA context outside the timing
            sync(args.device)
            t = time.perf_counter()
            m = torchkern.KernelPCA(torchkern.RBF(LENGTHSCALE), K_TOP, random_state=0,
                                    tol=1e-6 if dtype == torch.float64 else 1e-4,
                                    backend="dense").fit(Xt)
            sync(args.device)
            s = time.perf_counter() - t
            err = np.max(np.abs(m.eigenvalues_.double().cpu().numpy() - ref) / ref)
            rows.append(dict(n=n, method=f"torchkern dense {str(dtype)[6:]} ({args.device})",
                             seconds=f"{s:.2f}", ratio=f"{s / t_sk:.3f}", max_rel_eig_err=f"{err:.1e}"))
    table(rows, ["n", "method", "seconds", "ratio", "max_rel_eig_err"])


if __name__ == "__main__":
    main()
