"""Gaussian kernel matvec K @ v, d = 3: torchkern's backends against their peers.

    python bench/gram_matvec.py [--sizes 10000 100000 1000000] [--dtypes float32 float64]
                                [--device cuda] [--budget 120] [--threads k] [--grad]

Compared in one run on the same data: torchkern with ``backend="auto"``, its
``"compiled"`` backend (on the CPU the native C++ loop for radial kernels; ``compiled
tiles`` is the torch.compile engine, forced by writing the kernel as
``1.0 * (1.0 * RBF)``, which has no native profile — one scale of a radial kernel keeps
it; on CUDA both are torch.compile/Triton), ``"keops"`` and
``"blocked"``, a raw pykeops LazyTensor reduction, and dense torch (where n² floats fit).
``evals/s`` is n² / seconds. A method is skipped at a size when its time extrapolated
(∝ n²) from the previous size exceeds ``--budget`` seconds. First calls (KeOps and
compiled: compile, or load from the on-disk cache) are paid in a warm-up and reported
above the table; ``--grad`` adds rows for the backward pass (gradient to the inputs and
the lengthscale of ``sum(K @ v)``); ``--cold-cache`` starts from empty torchkern and
Inductor caches (KeOps keeps its own), so that the first calls include the compiles.
"""
import argparse
import os
import sys
import tempfile
import time

os.environ.setdefault("PYKEOPS_VERBOSE", "0")
if "--cold-cache" in sys.argv:  # first calls pay the compiles: empty torchkern/Inductor caches
    os.environ["TORCHKERN_CACHE_DIR"] = tempfile.mkdtemp(prefix="torchkern-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor-")
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
import torchkern as tk  # noqa: E402
from _util import device_name, table, timed  # noqa: E402

LS = 0.5


def raw_keops(X, V):
    from pykeops.torch import LazyTensor
    x, y = LazyTensor(X[:, None, :]), LazyTensor(X[None, :, :])
    return (-((x - y) ** 2).sum(-1) / (2 * LS ** 2)).exp() @ V


def dense_torch(X, V):
    return torch.exp(-torch.cdist(X, X).pow_(2) / (2 * LS ** 2)) @ V


def _methods(dev, dtype):
    k = tk.RBF(LS).to(dev, dtype)
    k_tiles = (1.0 * (1.0 * tk.RBF(LS))).to(dev, dtype)  # no native profile: compile tiles
    return {
        "torchkern auto": lambda X, V: k(X, backend="auto") @ V,
        "torchkern compiled": lambda X, V: k(X, backend="compiled") @ V,
        "torchkern compiled tiles": lambda X, V: k_tiles(X, backend="compiled") @ V,
        "torchkern keops": lambda X, V: k(X, backend="keops") @ V,
        "torchkern blocked": lambda X, V: k(X, backend="blocked") @ V,
        "pykeops raw": raw_keops,
        "dense torch": dense_torch,
    }, k


def _grad_method(k, backend):
    def run(X, V):
        Xg = X.detach().requires_grad_(True)
        with torch.enable_grad():
            (k(Xg, backend=backend) @ V).sum().backward()
        return Xg.grad
    return run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--dtypes", nargs="+", default=["float32"], choices=["float32", "float64"])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--budget", type=float, default=120.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--grad", action="store_true")
    ap.add_argument("--cold-cache", action="store_true",
                    help="empty torchkern and Inductor caches: first calls include compiles")
    ap.add_argument("--skip", nargs="*", default=[], help="method names to leave out")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    dev = args.device
    why = tk.gram.keops_unavailable_reason(dev)
    if why:  # a KeOps that crashes on this device is not run at all
        print(f"# KeOps unusable on {dev}: {why}")
    rows = []
    for dname in args.dtypes:
        dtype = getattr(torch, dname)
        methods, k = _methods(dev, dtype)
        if args.grad:
            for b in ("compiled", "blocked") + (("keops",) if not why else ()):
                methods[f"grad {b}"] = _grad_method(k, b)
        for name in list(methods):
            if name in args.skip or (why and ("keops" in name)):
                methods.pop(name)
        # warm-up: KeOps and the compiled backend compile once per machine (then cached)
        Xw = torch.randn(2000, 3, device=dev, dtype=dtype)
        Vw = torch.randn(2000, 1, device=dev, dtype=dtype)
        first = {}
        for name in [m for m in methods if "keops" in m or "compiled" in m]:
            t = time.perf_counter()
            with torch.no_grad():
                methods[name](Xw, Vw)
            first[name] = time.perf_counter() - t
        print(f"# {dname} on {device_name(dev)}, {torch.get_num_threads()} threads; first call "
              f"(compile or cache load) seconds: "
              + ", ".join(f"{n} {s:.1f}" for n, s in first.items()))
        rows += _run_sizes(methods, args, dev, dtype)
    table(rows, ["n", "dtype", "method", "seconds", "evals/s", "vs_blocked", "peak_MB",
                 "rel_err"])


def _run_sizes(methods, args, dev, dtype):
    rows, last = [], {}
    free = _free_bytes(dev)
    for n in args.sizes:
        torch.manual_seed(0)
        X = torch.randn(n, 3, device=dev, dtype=dtype)
        V = torch.randn(n, 1, device=dev, dtype=dtype)
        ref, res = {}, {}
        for name, fn in methods.items():
            if name == "dense torch" and 3 * n * n * dtype.itemsize > 0.5 * free:
                res[name] = ("no memory", None, None)
                continue
            if name in last and last[name][0] * (n / last[name][1]) ** 2 > args.budget:
                res[name] = ("skipped (time)", None, None)
                continue
            with torch.no_grad():
                s, out, mb = timed(lambda: fn(X, V), dev, repeat=args.repeat if n <= 20_000 else 1)
            last[name] = (s, n)
            kind = "grad" if name.startswith("grad") else "value"
            ref.setdefault(kind, out)
            err = ((out - ref[kind]).norm() / ref[kind].norm()).item()
            res[name] = (s, mb, err)
        for name, (s, mb, err) in res.items():
            row = {"n": n, "dtype": str(dtype).replace("torch.", ""), "method": name}
            if isinstance(s, str):
                row["seconds"] = s
            else:
                peer = "grad blocked" if name.startswith("grad") else "torchkern blocked"
                base = res.get(peer, (None,))[0]
                row.update(seconds=f"{s:.3f}", peak_MB=f"{mb:.0f}", rel_err=f"{err:.1e}",
                           **{"evals/s": f"{n * n / s:.2e}"},
                           vs_blocked=f"{base / s:.2f}x" if isinstance(base, float) else "")
            rows.append(row)
    return rows


def _free_bytes(dev):
    if torch.device(dev).type == "cuda":
        return torch.cuda.mem_get_info()[0]
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


if __name__ == "__main__":
    main()
