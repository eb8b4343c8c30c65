"""Node diffusion kernel matvec e^{−βL}v on sparse random graphs: torchkern's Lanczos
operator against dense ``torch.linalg.matrix_exp`` (where n² fits) and SciPy's sparse
``expm_multiply`` (Al-Mohy & Higham 2011).

    python bench/graph_nodes.py [--sizes 1000 4000 10000 100000 1000000] [--degree 10]
                                [--beta 1.0] [--rhs 1] [--dense-max 4000] [--device cpu]
                                [--threads 0]

Graphs: n nodes, n·degree/2 uniformly random edges (average degree ≈ ``degree``), unit
weights, combinatorial Laplacian. "build" is parsing the edge list and assembling the sparse
Laplacian (once per graph, cached); "matvec" is one product K @ V with V of width ``rhs``.
Dense matrix_exp runs up to ``--dense-max`` nodes (O(n³) time, 3 n × n float64 buffers);
SciPy's expm_multiply (single-threaded) is the reference for the error at larger n.
"""
import argparse
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
from _util import device_name, table, timed  # noqa: E402

from torchkern.graphs import DiffusionKernel  # noqa: E402
from torchkern.graphs._laplacian import as_graph  # noqa: E402


def random_graph(n, degree, seed=0):
    rng = np.random.default_rng(seed)
    return torch.as_tensor(rng.integers(0, n, (2, n * degree // 2)))


def scipy_expm_multiply(g, beta, V):
    import scipy.sparse as sp
    from scipy.sparse.linalg import expm_multiply
    src, dst, w = g.src.cpu().numpy(), g.dst.cpu().numpy(), g.weight.cpu().numpy()
    W = sp.csr_matrix((w, (src, dst)), shape=(g.n, g.n))
    L = sp.diags(np.asarray(W.sum(1)).ravel()) - W
    return torch.as_tensor(expm_multiply(-beta * L.tocsc(), V.cpu().numpy()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+",
                    default=[1000, 4000, 10_000, 100_000, 1_000_000])
    ap.add_argument("--degree", type=int, default=10)
    ap.add_argument("--beta", type=float, default=1.0)
    ap.add_argument("--rhs", type=int, default=1)
    ap.add_argument("--dense-max", type=int, default=4000)
    ap.add_argument("--scipy-max", type=int, default=1_000_000)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=0,
                    help="torch CPU threads (0: torch's default). On a CPU shared with other "
                         "jobs, 1 thread avoids OpenMP waits that slowed sparse products 70x here")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    dev = args.device
    print(f"# device: {device_name(dev)}; beta={args.beta}, average degree ~{args.degree}, "
          f"rhs={args.rhs}, float64")
    rows = []
    for n in args.sizes:
        ei = random_graph(n, args.degree).to(dev)
        gen = torch.Generator().manual_seed(1)
        V = torch.randn(n, args.rhs, dtype=torch.float64, generator=gen).to(dev)
        build_s, g, build_mb = timed(lambda: _build(ei, n), dev)
        k = DiffusionKernel(args.beta, method="krylov").requires_grad_(False)
        K = k(g)
        kry_s, out, kry_mb = timed(lambda: K @ V, dev, repeat=2 if n <= 100_000 else 1)
        row = {"n": n, "edges": g.num_edges, "build_s": f"{build_s:.2f}",
               "krylov_s": f"{kry_s:.3f}", "krylov_MB": f"{kry_mb:.0f}"}
        if n <= args.dense_max:
            def dense():
                L = g.laplacian("combinatorial").to_dense()
                return torch.linalg.matrix_exp(-args.beta * L) @ V
            s, ref, _ = timed(dense, dev)
            row.update(dense_s=f"{s:.3f}", dense_over_krylov=f"{s / kry_s:.0f}x",
                       max_diff_dense=f"{(out - ref).abs().max().item():.1e}")
        else:
            row.update(dense_s="n² too big", dense_over_krylov="", max_diff_dense="")
        if n <= args.scipy_max:
            s, ref, _ = timed(lambda: scipy_expm_multiply(g, args.beta, V), "cpu")
            row.update(scipy_s=f"{s:.3f}", scipy_over_krylov=f"{s / kry_s:.1f}x",
                       max_diff_scipy=f"{(out.cpu() - ref).abs().max().item():.1e}")
        rows.append(row)
        print(f"# n={n} done", flush=True)
    table(rows, ["n", "edges", "build_s", "krylov_s", "krylov_MB", "dense_s", "dense_over_krylov",
                 "max_diff_dense", "scipy_s", "scipy_over_krylov", "max_diff_scipy"])


def _build(ei, n):
    g = as_graph((ei, n))
    g.laplacian("combinatorial")
    return g


if __name__ == "__main__":
    main()
