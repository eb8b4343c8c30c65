"""Neural tangent kernels: empirical NTKs against a naive autograd loop, and NTK regression
with the analytic kernel at sizes where the dense Gram matrix does not fit.

    python bench/ntk.py              # CPU: n = 32 (part 1), n = 2,000 (part 2)
    python bench/ntk.py              # CUDA: n = 256, n = 5,000 / 20,000 / 50,000

Part 1 — empirical NTK Θ(x, x') (all o × o blocks) of
  * a small CNN on 28 × 28 images (the scikit-learn digits upsampled from 8 × 8),
    conv(1→16, 3) relu conv(16→32, 3) relu maxpool(2) linear(4608→10), 47k parameters;
  * an MLP 784 → 256 → 256 → 10, 270k parameters;
by the naive loop (one ``torch.autograd.grad`` per sample and output, then J Jᵀ) and by
``empirical_ntk(method="jacobian" | "vjp-jvp")``: seconds, peak memory growth, max error
against the loop.

Part 2 — analytic NTK (ReLU, depth 2) kernel regression on a synthetic problem
(d = 8, y = sin(x·w₁) + ½cos(x·w₂) + noise): ``infinite_width_predict(t=None, reg)`` with
the lazy blocked Gram matrix (preconditioned CG, O(n) memory) and, where it fits, the dense
one (Cholesky): seconds, peak memory, test RMSE, and the dense n × n size it avoids.

Part 3 — CNTK Gram matrix (``torchkern.ntk.infinite_width``) of n digits images (8 × 8;
the 1,797 images cycled for n above that),
conv(3×3, same) relu conv(3×3, same) relu, then Flatten or global average pooling and a
Linear readout (W_std = 1.4, b_std = 0.1), float32, against neural-tangents 0.6.5
(``stax`` + ``nt.batch``, JAX on the CPU) when it is importable (run the bench from a venv
that has it; otherwise its rows say "not installed"): seconds, peak memory, max relative
difference of the two Gram matrices.

    python bench/ntk.py --cntk-only --cntk-ns 1000 --cntk-readouts flatten,gap

Peak memory: on CUDA ``torch.cuda.max_memory_allocated``; on the CPU each measurement runs
in a fresh process and reports its peak resident-set growth (``ru_maxrss``).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import torch
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from torchkern.ntk import NTK, empirical_ntk, infinite_width_predict  # noqa: E402


# --------------------------------------------------------------------------------------
# Part 1: empirical NTK
# --------------------------------------------------------------------------------------

def _digits_28(n, device):
    from sklearn.datasets import load_digits
    X = torch.tensor(load_digits().data[:n], dtype=torch.float32).reshape(n, 1, 8, 8) / 16
    return nn.functional.interpolate(X, size=(28, 28), mode="bilinear").to(device)


def _net(case, device):
    torch.manual_seed(0)
    if case == "cnn":
        net = nn.Sequential(nn.Conv2d(1, 16, 3), nn.ReLU(), nn.Conv2d(16, 32, 3), nn.ReLU(),
                            nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 12 * 12, 10))
    else:
        net = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256),
                            nn.ReLU(), nn.Linear(256, 10))
    return net.to(device)


def naive_ntk(net, X1, X2):
    """The loop a user writes first: per sample and output one autograd.grad, then J Jᵀ."""
    params = [p for p in net.parameters() if p.requires_grad]

    def jac(X):
        rows = []
        for x in X:
            out = net(x[None])[0]
            rows.append(torch.stack([torch.cat([g.reshape(-1) for g in torch.autograd.grad(
                out[a], params, retain_graph=True)]) for a in range(out.shape[0])]))
        return torch.stack(rows)

    J1, J2 = jac(X1), jac(X2)
    return torch.einsum("iap,jbp->ijab", J1, J2)


def _empirical_case(case, method, n, device, chunk):
    net = _net(case, device)
    X = _digits_28(n, device)
    run = (lambda: naive_ntk(net, X, X)) if method == "naive" else \
        (lambda: empirical_ntk(net, X, method=method, output="full", chunk_size=chunk))
    run_small = _digits_28(4, device)
    # Warm-up on 4 samples (allocator, vmap tracing), then the timed run.
    (naive_ntk(net, run_small, run_small) if method == "naive" else
     empirical_ntk(net, run_small, method=method, output="full"))
    out, secs, peak = _measure(run, device)
    ref = naive_ntk(net, X[:8], X[:8])
    err = float((out[:8, :8] - ref).abs().max() / ref.abs().max())
    return dict(seconds=secs, peak_mb=peak, err=err, params=sum(p.numel() for p in net.parameters()))


# --------------------------------------------------------------------------------------
# Part 2: analytic NTK regression
# --------------------------------------------------------------------------------------

def _regression_data(n, n_test, device, dtype):
    g = torch.Generator().manual_seed(0)
    X = torch.randn(n + n_test, 8, generator=g)
    w1, w2 = torch.randn(8, generator=g) / 2, torch.randn(8, generator=g) / 2
    y = torch.sin(X @ w1) + 0.5 * torch.cos(X @ w2) + 0.1 * torch.randn(n + n_test, generator=g)
    X, y = X.to(device, dtype), y.to(device, torch.float64)
    return X[:n], y[:n], X[n:], y[n:]


def _analytic_case(n, backend, device):
    dtype = torch.float64 if backend == "dense" else torch.float32
    X, y, Xt, yt = _regression_data(n, 2000, device, dtype)
    k = NTK(2, weight_std=1.5, bias_std=0.1).to(device)
    out, secs, peak = _measure(lambda: infinite_width_predict(k, X, y, Xt, reg=1e-1,
                                                              backend=backend, tol=1e-4), device)
    rmse = float(((out.double() - yt) ** 2).mean().sqrt())
    return dict(seconds=secs, peak_mb=peak, rmse=rmse, dense_gb=n * n * 8 / 2**30)


# --------------------------------------------------------------------------------------
# Part 3: CNTK Gram matrix, torchkern vs neural-tangents
# --------------------------------------------------------------------------------------

CNTK_W, CNTK_B, CNTK_C = 1.4, 0.1, 8


def _cntk_torch(readout):
    head = ([nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(CNTK_C, 10)] if readout == "gap"
            else [nn.Flatten(), nn.Linear(CNTK_C * 64, 10)])
    return nn.Sequential(nn.Conv2d(1, CNTK_C, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(CNTK_C, CNTK_C, 3, padding=1), nn.ReLU(), *head)


def _import_nt():
    import types
    sys.modules.setdefault("neural_tangents.experimental",
                           types.ModuleType("neural_tangents.experimental"))
    import neural_tangents as nt
    from neural_tangents import stax
    return nt, stax


def _cntk_case(n, readout, lib, device):
    from sklearn.datasets import load_digits
    import numpy as np
    D = load_digits().data                        # 1,797 images, cycled beyond
    X = D[np.arange(n) % len(D)].reshape(n, 1, 8, 8).astype(np.float32) / 16
    if lib == "torchkern":
        from torchkern.ntk import infinite_width
        k = infinite_width(_cntk_torch(readout), weight_std=CNTK_W, bias_std=CNTK_B)
        Xt = torch.tensor(X, device=device)

        def run():
            with torch.no_grad():
                return k(Xt, backend="dense").to_dense().cpu().numpy()
    else:
        try:
            nt, stax = _import_nt()
        except ImportError:
            return dict(error="not installed")
        conv = lambda: stax.Conv(CNTK_C, (3, 3), padding="SAME", W_std=CNTK_W, b_std=CNTK_B)
        head = stax.GlobalAvgPool() if readout == "gap" else stax.Flatten()
        kernel_fn = stax.serial(conv(), stax.Relu(), conv(), stax.Relu(), head,
                                stax.Dense(10, CNTK_W, CNTK_B))[2]
        batch = max(b for b in range(1, min(n, 100) + 1) if n % b == 0)
        kernel_fn = nt.batch(kernel_fn, batch_size=batch, store_on_device=False)
        Xj = np.transpose(X, (0, 2, 3, 1))

        def run():
            return np.asarray(kernel_fn(Xj, None, "ntk"))
    base = _rss_mb()
    t = time.perf_counter()
    K = run()
    secs = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - base
    if device.type == "cuda" and lib == "torchkern":
        peak = torch.cuda.max_memory_allocated() / 2**20
    out = f"/tmp/bench_ntk_cntk_{lib}_{readout}_{n}.npy"
    np.save(out, K)
    return dict(seconds=secs, peak_mb=peak, path=out)


def _cntk_table(ns, readouts, device, libs=("torchkern", "neural-tangents")):
    import numpy as np
    print(f"CNTK Gram matrix of n digits images (8 x 8), 2 convs + {'/'.join(readouts)} "
          f"readout, float32 (load average {os.getloadavg()[0]:.1f})")
    print("| n | readout | library | seconds | peak MB | max rel. diff vs torchkern |")
    print("|---|---|---|---|---|---|")
    for n in ns:
        for readout in readouts:
            ref = None
            for lib in libs:
                r = _one(dict(part="cntk", n=n, readout=readout, lib=lib), device)
                if "error" in r:
                    print(f"| {n} | {readout} | {lib} | {r['error']} | | |", flush=True)
                    continue
                K = np.load(r["path"])
                os.remove(r["path"])
                if ref is None:
                    ref, diff = K, "-"
                else:
                    diff = f"{np.abs(K - ref).max() / np.abs(ref).max():.1e}"
                print(f"| {n} | {readout} | {lib} | {r['seconds']:.1f} | {r['peak_mb']:.0f} | "
                      f"{diff} |", flush=True)
    print(f"(load average after: {os.getloadavg()[0]:.1f})\n")


def _measure(fn, device):
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    else:
        base = _rss_mb()
    t = time.perf_counter()
    out = fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    secs = time.perf_counter() - t
    if device.type == "cuda":
        peak = (torch.cuda.max_memory_allocated() - base) / 2**20
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - base
    return out.detach(), secs, peak


def _rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _one(spec, device):
    """Run one measurement; on the CPU in a fresh process (peak RSS is per process)."""
    if device.type == "cuda":
        return _dispatch(spec, device)
    cmd = [sys.executable, __file__, "--one", json.dumps(spec), "--device", "cpu"]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        return dict(error=res.stderr.strip().splitlines()[-1][:80])
    return json.loads(res.stdout.strip().splitlines()[-1])


def _dispatch(spec, device):
    if spec["part"] == "cntk":
        return _cntk_case(spec["n"], spec["readout"], spec["lib"], device)
    if spec["part"] == "empirical":
        return _empirical_case(spec["case"], spec["method"], spec["n"], device, spec["chunk"])
    return _analytic_case(spec["n"], spec["backend"], device)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--n-empirical", type=int, default=None,
                   help="samples for part 1 (default: 32 on the CPU, 256 on CUDA)")
    p.add_argument("--ns", default=None, help="comma-separated n for part 2 (default: "
                   "2000 on the CPU, 5000,20000,50000 on CUDA)")
    p.add_argument("--skip-empirical", action="store_true")
    p.add_argument("--cntk-ns", default="1000", help="comma-separated n for part 3")
    p.add_argument("--cntk-readouts", default="flatten,gap", help="part 3 readouts")
    p.add_argument("--cntk-only", action="store_true", help="run part 3 only")
    p.add_argument("--cntk-libs", default="torchkern,neural-tangents", help="part 3 libraries")
    p.add_argument("--one", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    device = torch.device(args.device)
    if args.one:
        print(json.dumps(_dispatch(json.loads(args.one), device)))
        return
    print(f"device: {device} ({torch.cuda.get_device_name() if device.type == 'cuda' else 'CPU'}"
          f", torch threads {torch.get_num_threads()})\n")
    _cntk_table([int(v) for v in args.cntk_ns.split(",")], args.cntk_readouts.split(","),
                device, args.cntk_libs.split(","))
    if args.cntk_only:
        return
    if not args.skip_empirical:
        n = args.n_empirical or (32 if device.type == "cpu" else 256)
        print(f"Empirical NTK, all o x o blocks, n = {n} digits upsampled to 28 x 28, float32")
        print(f"| network | method | seconds | speed-up vs loop | peak MB | max rel. err |")
        print(f"|---|---|---|---|---|---|")
        for case in ("cnn", "mlp"):
            base = None
            for method in ("naive", "jacobian", "vjp-jvp"):
                # Jacobians in chunks of 256 MB (the default); jvps over 16 samples at a
                # time (a vmap over 16·o tangents of a batch of 16).
                chunk = 16 if method == "vjp-jvp" else None
                spec = dict(part="empirical", case=case, method=method, n=n, chunk=chunk)
                r = _one(spec, device)
                if "error" in r:
                    print(f"| {case} | {method} | failed: {r['error']} | | | |")
                    continue
                base = r["seconds"] if method == "naive" else base
                speed = f"{base / r['seconds']:.1f}x" if base else "-"
                name = f"{case} ({r['params'] / 1e3:.0f}k params)"
                print(f"| {name} | {method} | {r['seconds']:.2f} | {speed} | {r['peak_mb']:.0f} "
                      f"| {r['err']:.1e} |", flush=True)
        print()
    ns = args.ns or ("2000" if device.type == "cpu" else "5000,20000,50000")
    print("Analytic NTK (ReLU, depth 2) regression, d = 8, 2,000 test points, "
          "infinite_width_predict(t=None, reg=0.1)")
    print("| n | Gram | seconds | peak MB | dense n x n float64 | test RMSE |")
    print("|---|---|---|---|---|---|")
    for n in (int(v) for v in ns.split(",")):
        for backend in ("dense", "blocked"):
            if backend == "dense" and n * n * 8 > 4 * 2**30:
                print(f"| {n} | dense | does not fit (> 4 GB) | | {n * n * 8 / 2**30:.1f} GB | |")
                continue
            r = _one(dict(part="analytic", n=n, backend=backend), device)
            if "error" in r:
                print(f"| {n} | {backend} | failed: {r['error']} | | | |")
                continue
            label = "dense float64, Cholesky" if backend == "dense" else "lazy float32, CG"
            print(f"| {n} | {label} | {r['seconds']:.1f} | {r['peak_mb']:.0f} | "
                  f"{r['dense_gb']:.1f} GB | {r['rmse']:.4f} |", flush=True)


if __name__ == "__main__":
    main()
