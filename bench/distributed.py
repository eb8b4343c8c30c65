"""Benchmark: torchkern.distributed strong scaling, and a paper model of weak scaling.

Strong scaling at fixed n over 1, 2, 4, ... processes (gloo on the CPU, one thread per
process; ``--device cuda``: NCCL, one GPU per process): the RBF product K v of a
:class:`~torchkern.distributed.ShardedKernelMatrix` (time per product, the share of it
spent in the all-gather, parallel efficiency T₁ / (p·T_p)) and a KernelRidge fit by
Nyström-preconditioned CG on the sharded Gram (seconds, iterations, efficiency).

Then a paper model of weak scaling to 64 GPUs, n up to 10⁸, from the measured rate of
kernel evaluations per device and the measured all-gather cost (bandwidth and latency;
on GPUs the interconnect figure is an assumption, printed as such): time per product,
communication share, and the memory each rank needs for the gathered columns (n·d) and
the replicated vectors (n·r) — where gathering stops being cheap, and what to stream
instead. The same analysis is in ``docs/distributed.md``.

Usage: ``python bench/distributed.py [--procs 1 2 4] [--n 6000] [--d 3]
[--device cpu|cuda] [--krr-n 4000]``. Runs in well under 90 s on 16 cores.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time

import torch
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(__file__))
from _util import table  # noqa: E402


MAX_GPUS = 64


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def _best(fn, device, barrier, repeat=3, inner=3):
    """Seconds per call: the best of ``repeat`` averages over ``inner`` calls, all ranks
    starting together."""
    best = float("inf")
    for _ in range(repeat):
        barrier()
        _sync(device)
        t = time.perf_counter()
        for _ in range(inner):
            fn()
        _sync(device)
        best = min(best, (time.perf_counter() - t) / inner)
    return best


def _worker(rank, world, init_file, args, out_file):
    import torch.distributed as dist

    import torchkern
    from torchkern import distributed as tkd
    from torchkern.distributed._comm import agree, all_reduce_sum, gather_rows

    torch.set_num_threads(args.threads)
    backend = "nccl" if args.device == "cuda" else "gloo"
    if backend == "nccl":
        os.environ["LOCAL_RANK"] = str(rank)
    device = tkd.init_process_group(backend, init_method=f"file://{init_file}", rank=rank,
                                    world_size=world, timeout=120)
    barrier = dist.barrier
    g = torch.Generator().manual_seed(0)
    X = torch.randn(args.n, args.d, generator=g)
    Xs = tkd.ShardedInput(tkd.shard_rows(X).to(device))
    local = "keops" if device.type == "cuda" and torchkern.gram.keops_available(device) \
        else "blocked"
    K = tkd.ShardedKernel(torchkern.RBF(1.0), vectors="sharded")(Xs, backend=local)
    v = tkd.shard_rows(torch.randn(args.n, 1, generator=g)).to(device)  # this rank's rows
    with torch.no_grad():
        K @ v  # warm-up (KeOps compile, thread pools)
        t_mv = _best(lambda: K @ v, device, barrier)
        part = torch.zeros(Xs.sharding.n_local, 1, device=device)

        def product_comm():  # what a product communicates: V's all-gather, a failure flag
            gather_rows(part, Xs.sharding)
            agree(None)
        t_comm = _best(product_comm, device, barrier, inner=10)
        # one all-reduce of a few numbers: each inner product / norm of the solvers
        t_reduce = _best(lambda: all_reduce_sum(part.new_zeros(2), None), device, barrier,
                         inner=10)
        # gather bandwidth for the model: a 2**22-float (16 MB) all-gather
        big = torch.zeros(2**22 // world, 1, device=device)
        sh = tkd.Sharding([big.shape[0]] * world, None)
        t_big = _best(lambda: gather_rows(big, sh), device, barrier, repeat=2, inner=2)
    # PCG kernel ridge regression on a sharded Gram of krr_n points
    Xk = torch.randn(args.krr_n, args.d, generator=g)
    yk = Xk.sin().sum(1)
    Xks = tkd.ShardedInput(tkd.shard_rows(Xk).to(device))
    model = torchkern.KernelRidge(tkd.ShardedKernel(torchkern.RBF(1.0)), alpha=1e-2,
                                  solver="cg", n_centers=200, tol=1e-5, random_state=0,
                                  backend=local)
    barrier()
    t = time.perf_counter()
    model.fit(Xks, tkd.shard_rows(yk).to(device))  # this rank's own targets
    _sync(device)
    t_krr = time.perf_counter() - t
    if rank == 0:
        with open(out_file, "w") as f:
            json.dump(dict(world=world, matvec=t_mv, comm=t_comm, reduce=t_reduce, krr=t_krr,
                           krr_iter=model.n_iter_, gather_s=t_big, gather_bytes=4 * 2**22,
                           local=local), f)
    dist.destroy_process_group()


def run(world, args):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "result.json")
        method = "spawn" if args.device == "cuda" else "fork"
        mp.start_processes(_worker, args=(world, os.path.join(tmp, "rdv"), args, out),
                           nprocs=world, join=True, start_method=method)
        with open(out) as f:
            return json.load(f)


def weak_scaling_model(rate, gather_bw, latency, gpus=(1, 2, 4, 8, 16, 32, 64),
                       n_max=1e8, memory_gb=80.0):
    """Rows of the weak-scaling model: fixed rows per device, n = n_max·p/max(p).

    A product costs n·(n/p) kernel entries per device (rate entries/s) plus a ring
    all-gather of the n·r float32 V ((p−1)/p of it through each link, ``latency`` per
    step); a CG step adds three all-reduces of r numbers (2·log₂p latencies each).
    Memory per device: the gathered columns n·d (float32), the gathered V (n·r float32)
    and ~6 sharded float64 CG vectors of (n/p)·r (X, R, P, Z, AP in float64).
    """
    rows = []
    for p in gpus:
        n = n_max * p / max(gpus)
        compute = n * (n / p) / rate
        comm = 0.0 if p == 1 else (latency * (p - 1) + 4 * n * (p - 1) / p / gather_bw
                                   + 3 * 2 * math.log2(p) * latency)
        mem = {f"cols GB d={d}": 4 * n * d / 1e9 for d in (3, 100)}
        mem.update({f"vectors GB r={r}": (4 * n * r + 48 * n * r / p) / 1e9 for r in (1, 31)})
        rows.append({"GPUs": p, "n": f"{n:.3g}", "s/product": f"{compute + comm:.3g}",
                     "comm %": f"{100 * comm / (compute + comm):.2g}",
                     **{k: f"{v:.3g}" + ("" if v < 0.5 * memory_gb else " (!)")
                        for k, v in mem.items()}})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--procs", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--n", type=int, default=6000)
    ap.add_argument("--krr-n", type=int, default=4000)
    ap.add_argument("--d", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="torch threads per process")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--gpu-rate", type=float, default=1.4e10,
                    help="kernel entries/s per GPU for the model with --device cpu (default:"
                         " RBF blocked product at n = 10^5 in docs/benchmarks_gpu.md)")
    ap.add_argument("--gpu-bandwidth", type=float, default=25e9,
                    help="assumed all-gather bandwidth per GPU, bytes/s (InfiniBand HDR)")
    args = ap.parse_args()
    load = os.getloadavg()[0]
    print(f"torchkern.distributed strong scaling: n = {args.n} (product), "
          f"{args.krr_n} (KRR), d = {args.d}, device {args.device}, "
          f"{args.threads} thread(s) per process, {os.cpu_count()} CPUs, load {load:.1f}")
    results = [run(p, args) for p in args.procs]
    base = results[0]
    rows = []
    for res in results:
        p = res["world"] / base["world"]
        rows.append({"procs": res["world"], "local": res["local"],
                     "ms/product": f"{1e3 * res['matvec']:.1f}",
                     "comm %": f"{100 * res['comm'] / res['matvec']:.1f}",
                     "us/reduce": f"{1e6 * res['reduce']:.0f}",
                     "eff. product": f"{base['matvec'] / (p * res['matvec']):.2f}",
                     "KRR s": f"{res['krr']:.2f}", "KRR iter": res["krr_iter"],
                     "eff. KRR": f"{base['krr'] / (p * res['krr']):.2f}"})
    table(rows, list(rows[0]))
    # Model inputs: the measured per-process rate and the measured gather cost.
    rate = args.n ** 2 / (base["world"] * base["matvec"])
    multi = [r for r in results if r["world"] > 1]
    bw = (multi[-1]["gather_bytes"] / multi[-1]["gather_s"]) if multi else 1e9
    lat = (min(r["comm"] for r in multi)) if multi else 20e-6
    print(f"\nmeasured: {rate:.3g} kernel entries/s per process ({base['local']}), "
          f"all-gather {bw / 1e9:.2g} GB/s, {1e6 * lat:.0f} us per product gather "
          f"(n = {args.n})")
    gpu_rate = rate if args.device == "cuda" else args.gpu_rate
    source = "measured above" if args.device == "cuda" else \
        "the RBF blocked rate measured on the project GPU run, docs/benchmarks_gpu.md"
    print(f"\nweak scaling model: {MAX_GPUS} GPUs, n = 10^8 at 64, fixed rows per GPU; "
          f"{gpu_rate:.3g} entries/s per GPU ({source}), "
          f"assumed interconnect {args.gpu_bandwidth / 1e9:.0f} GB/s, 30 us per ring step; "
          "(!) marks memory above half an 80 GB GPU")
    rows = weak_scaling_model(gpu_rate, args.gpu_bandwidth, 30e-6)
    table(rows, list(rows[0]))
    print("\nThe product all-gathers V (n·r numbers) against n²·d/p kernel work, and the "
          "solvers' vectors are sharded ((n/p)·r per rank). What stops gathering is\n"
          "memory: the gathered columns (n·d) and the gathered V (n·r) on every rank. Past "
          "half a GPU, stream instead: pass column blocks (X_j, V_j) round a ring\n"
          "(isend/irecv overlapped with the block products, n·(d + r)/p per rank).")


if __name__ == "__main__":
    main()
