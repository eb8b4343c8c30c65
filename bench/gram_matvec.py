"""Gaussian kernel matvec K @ v, d = 3, float32: torchkern against its peers.

    python bench/gram_matvec.py [--sizes 10000 100000 1000000] [--device cuda] [--budget 120]

Compared in one run on the same data: torchkern with ``backend="auto"``, torchkern's
``"keops"`` and ``"blocked"`` backends, a raw pykeops LazyTensor reduction, and dense
torch (where n² floats fit in memory). A method is skipped at a size when its time
extrapolated (∝ n²) from the previous size exceeds ``--budget`` seconds. KeOps compile
time is paid in a warm-up call and reported separately.
"""
import argparse
import os
import sys
import time

os.environ.setdefault("PYKEOPS_VERBOSE", "0")
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--budget", type=float, default=120.0)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    dev = args.device
    k = tk.RBF(LS).to(dev)
    methods = {
        "torchkern auto": lambda X, V: k(X, backend="auto") @ V,
        "torchkern keops": lambda X, V: k(X, backend="keops") @ V,
        "torchkern blocked": lambda X, V: k(X, backend="blocked") @ V,
        "pykeops raw": raw_keops,
        "dense torch": dense_torch,
    }
    why = tk.gram.keops_unavailable_reason(dev)
    if why:  # a KeOps that crashes on this device is not run at all
        print(f"# KeOps unusable on {dev}: {why}")
        for name in ("torchkern keops", "pykeops raw"):
            methods.pop(name)
    # warm-up: KeOps compiles each formula once per machine (cached afterwards)
    Xw = torch.randn(2000, 3, device=dev)
    Vw = torch.randn(2000, 1, device=dev)
    compile_s = {}
    for name in [m for m in ("torchkern keops", "pykeops raw") if m in methods]:
        t = time.perf_counter()
        with torch.no_grad():
            methods[name](Xw, Vw)
        compile_s[name] = time.perf_counter() - t
    print(f"# device: {device_name(dev)}; first-call (compile or cache load) seconds: "
          + ", ".join(f"{n} {s:.1f}" for n, s in compile_s.items()))
    rows, last = [], {}
    free = _free_bytes(dev)
    for n in args.sizes:
        torch.manual_seed(0)
        X = torch.randn(n, 3, device=dev)
        V = torch.randn(n, 1, device=dev)
        ref = None
        res = {}
        for name, fn in methods.items():
            if name == "dense torch" and 3 * n * n * 4 > 0.5 * free:
                res[name] = ("no memory", None, None)
                continue
            if name in last and last[name][0] * (n / last[name][1]) ** 2 > args.budget:
                res[name] = ("skipped (time)", None, None)
                continue
            with torch.no_grad():
                s, out, mb = timed(lambda: fn(X, V), dev, repeat=args.repeat if n <= 20_000 else 1)
            last[name] = (s, n)
            if ref is None:
                ref = out
            err = ((out - ref).norm() / ref.norm()).item()
            res[name] = (s, mb, err)
        base = res["pykeops raw"][0] if "pykeops raw" in res else "n/a"
        for name, (s, mb, err) in res.items():
            row = {"n": n, "method": name}
            if isinstance(s, str):
                row["seconds"] = s
            else:
                row.update(seconds=f"{s:.3f}", peak_MB=f"{mb:.0f}", rel_err=f"{err:.1e}",
                           vs_pykeops=f"{s / base:.2f}" if not isinstance(base, str) else "")
            rows.append(row)
    table(rows, ["n", "method", "seconds", "vs_pykeops", "peak_MB", "rel_err"])


def _free_bytes(dev):
    if torch.device(dev).type == "cuda":
        return torch.cuda.mem_get_info()[0]
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


if __name__ == "__main__":
    main()
