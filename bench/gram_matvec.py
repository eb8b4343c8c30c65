"""Gaussian kernel matvec K @ v, d = 3: torchkern's backends against their peers.

    python bench/gram_matvec.py [--sizes 10000 100000 1000000] [--dtypes float32 float64]
                                [--device cuda] [--budget 120] [--threads k] [--grad]
    python bench/gram_matvec.py --targets [--device cuda] [--scale 1.0] [--budget 60]

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
``torchkern triton`` is the generated Triton engine (``backend="triton"``, CUDA only).

``--targets`` prints the rows of issue #20's targets for the Triton engine instead, each
beside raw KeOps where KeOps runs: RBF d = 3 float32 at n = 10⁶, the sum RBF + Matérn 5/2
(its time against RBF alone), RBF d = 64 float32 at n = 2·10⁵, RBF d = 3 float64 at
n = 2·10⁵, and the backward (gradients to X and the lengthscale of ⟨G, K V⟩) against the
forward at n = 2·10⁵. Every row first runs at n/8 (autotuning there) and is skipped when
its time extrapolated to n exceeds ``--budget``; its relative error is measured on 256
rows against the blocked torch product. ``--scale`` multiplies every n (``--scale 1e-4
--device cpu`` checks the script under Triton's interpreter, ``TRITON_INTERPRET=1``).
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
        "torchkern triton": lambda X, V: k(X, backend="triton") @ V,
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
    ap.add_argument("--targets", action="store_true",
                    help="issue #20's target rows for the Triton engine (see the docstring)")
    ap.add_argument("--scale", type=float, default=1.0, help="--targets: multiply every n")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    dev = args.device
    if args.targets:
        return targets(args)
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
            if name in args.skip or (why and ("keops" in name)) or (
                    "triton" in name and not _triton_ok(dev)):
                methods.pop(name)
        # warm-up: KeOps and the compiled backend compile once per machine (then cached)
        Xw = torch.randn(2000, 3, device=dev, dtype=dtype)
        Vw = torch.randn(2000, 1, device=dev, dtype=dtype)
        first = {}
        for name in [m for m in methods if "keops" in m or "compiled" in m or "triton" in m]:
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


def _triton_ok(dev):
    from torchkern._compiled import triton as engine
    return engine.available(dev)


# (label, kernel factory, d, n, dtype, target evals/s or None)
TARGETS = [
    ("RBF d=3 float32", lambda: tk.RBF(LS), 3, 1_000_000, torch.float32, 1e12),
    ("RBF+Matern52 d=3 float32", lambda: tk.RBF(LS) + tk.Matern(nu=2.5, lengthscale=LS), 3,
     1_000_000, torch.float32, None),
    ("RBF d=64 float32", lambda: tk.RBF(4.0), 64, 200_000, torch.float32, 5e11),
    ("RBF d=3 float64", lambda: tk.RBF(LS), 3, 200_000, torch.float64, 2e11),
]


def _raw_keops_rbf(ls):
    def run(X, V):
        from pykeops.torch import LazyTensor
        x, y = LazyTensor(X[:, None, :]), LazyTensor(X[None, :, :])
        return (-((x - y) ** 2).sum(-1) / (2 * ls ** 2)).exp() @ V
    return run


def _rel_err(k, X, V, out):
    idx = torch.arange(min(256, X.shape[0]), device=X.device)
    with torch.no_grad():
        ref = k(X[idx], X, backend="blocked") @ V
    return float((out[idx] - ref).norm() / ref.norm())


def _timed_capped(fn, make, n, budget, dev):
    """Time fn at n/8 (warm-up, autotuning) and, unless that extrapolates (∝ n²) past
    ``budget`` seconds, at n. (seconds or a reason, result, data)"""
    n0 = max(16, n // 8)
    data0 = make(n0)
    fn(*data0)  # compile + autotune
    s0, _, _ = timed(lambda: fn(*data0), dev)
    if s0 * (n / n0) ** 2 > budget:
        return f"skipped (~{s0 * (n / n0) ** 2:.0f} s)", None, None
    data = make(n)
    fn(*data)  # a second autotune bucket, if any
    s, out, _ = timed(lambda: fn(*data), dev)
    return s, out, data


def _measure(label, n, method, fn, make, k, budget, dev):
    """A table row for ``fn`` at n (time, evaluations/s, relative error) and its seconds
    (or the reason it was skipped)."""
    s, out, data = _timed_capped(fn, make, n, budget, dev)
    row = {"case": label, "n": n, "method": method}
    if isinstance(s, str):
        row["seconds"] = s
    else:
        row.update(seconds=f"{s:.4f}", **{"evals/s": f"{n * n / s:.2e}"},
                   rel_err=f"{_rel_err(k, *data, out):.1e}")
    print("# measured:", row, flush=True)  # kept if a later row (KeOps) crashes the process
    return row, s


def targets(args):
    dev = args.device
    if not _triton_ok(dev):
        print(f"# the Triton engine cannot run on {dev} (CUDA with triton, or the CPU with "
              f"TRITON_INTERPRET=1)")
        return
    why = tk.gram.keops_unavailable_reason(dev)
    print(f"# issue #20 targets on {device_name(dev)}; torch {torch.__version__}, "
          f"triton {__import__('triton').__version__}; KeOps: {why or 'usable'}; "
          f"scale {args.scale}; load average {os.getloadavg()}")
    rows, rbf_time = [], None
    for label, factory, d, n, dtype, goal in TARGETS:
        n = max(16, int(n * args.scale))
        k = factory().to(dev, dtype)

        def make(size, d=d, dtype=dtype):
            g = torch.Generator(device="cpu").manual_seed(0)
            X = torch.randn(size, d, generator=g, dtype=dtype).to(dev)
            return X, torch.randn(size, 1, generator=g, dtype=dtype).to(dev)

        def tri(X, V, k=k):
            with torch.no_grad():
                return k(X, backend="triton") @ V

        row, s = _measure(label, n, "torchkern triton", tri, make, k, args.budget, dev)
        if not isinstance(s, str):
            if goal:
                row["target"] = f">= {goal:.0e}: {'met' if n * n / s >= goal else 'NOT met'}"
            if label.startswith("RBF d=3 float32"):
                rbf_time = s
            elif label.startswith("RBF+Matern") and rbf_time:
                row["target"] = (f"{s / rbf_time:.2f}x RBF (<= 1.5x: "
                                 f"{'met' if s <= 1.5 * rbf_time else 'NOT met'})")
        rows.append(row)
        if not why and label.startswith("RBF d=") and dev != "cpu":
            kr, s2 = _measure(label, n, "pykeops raw", _raw_keops_rbf(float(k.lengthscale)),
                              make, k, args.budget, dev)
            if not isinstance(s2, str) and not isinstance(s, str):
                kr["target"] = f"triton speed {s2 / s:.2f}x KeOps' (>= 1 wanted)"
            rows.append(kr)
    rows += _precision_rows(args, dev)
    rows += _baseline_rows(args, dev)
    rows += _crossover_rows(args, dev)
    rows += _backward_rows(args, dev)
    table(rows, ["case", "n", "method", "seconds", "evals/s", "rel_err", "target"])


def _precision_rows(args, dev):
    """The RBF, d = 64, float32, n = 2·10⁵ (scaled) with ⟨x, y⟩ on the tensor cores
    (``allow_tf32="tf32x3"``: about float32's accuracy; ``True``: TF32), and an ARD RBF
    with d = 8 at n = 10⁶ (bench/gp_million.py's data width)."""
    from torchkern._compiled import triton as engine
    rows = []
    n = max(16, int(200_000 * args.scale))
    k = tk.RBF(4.0).to(dev, torch.float32)

    def make(size, d=64):
        g = torch.Generator(device="cpu").manual_seed(0)
        return (torch.randn(size, d, generator=g).to(dev),
                torch.randn(size, 1, generator=g).to(dev))

    for prec in ("tf32x3", True):
        def run(X, V, prec=prec):
            f = k.formula(X, X)
            with torch.no_grad():
                return engine.matmul(f.fn, f.xs, f.ys, f.ps, V, allow_tf32=prec)
        row, _ = _measure(f"RBF d=64 float32 allow_tf32={prec}", n, "torchkern triton", run,
                          make, k, args.budget, dev)
        rows.append(row)
    n8 = max(16, int(1_000_000 * args.scale))
    k8 = tk.RBF(lengthscale=torch.linspace(0.5, 4.0, 8)).to(dev, torch.float32)

    def tri8(X, V):
        with torch.no_grad():
            return k8(X, backend="triton") @ V
    row, _ = _measure("RBF ARD d=8 float32", n8, "torchkern triton", tri8,
                      lambda size: make(size, 8), k8, args.budget, dev)
    return rows + [row]


def _crossover_rows(args, dev):
    """Steady-state times of the Triton engine and blocked torch on small products (RBF,
    d = 3, float32): where ``auto`` should start to use the engine."""
    rows = []
    k = tk.RBF(LS).to(dev, torch.float32)
    for n in (2_000, 4_000, 8_000, 16_000):
        n = max(16, int(n * min(1.0, args.scale * 100)))
        g = torch.Generator(device="cpu").manual_seed(3)
        X, V = torch.randn(n, 3, generator=g).to(dev), torch.randn(n, 1, generator=g).to(dev)
        times = {}
        for backend in ("triton", "blocked"):
            def run(backend=backend):
                with torch.no_grad():
                    return k(X, backend=backend) @ V
            run()
            times[backend] = min(timed(run, dev)[0] for _ in range(3))
        rows.append({"case": "crossover RBF d=3 float32", "n": n, "method": "triton / blocked",
                     "seconds": f"{times['triton']:.5f} / {times['blocked']:.5f}",
                     "target": f"triton {times['blocked'] / times['triton']:.2f}x faster"})
        print("# measured:", rows[-1], flush=True)
    return rows


def _baseline_rows(args, dev):
    """The Triton engine beside what ``auto`` chose before it (``config.triton_auto``
    off: the compiled tiles or KeOps) on the RBF, d = 3, float32, n = 2·10⁵ (scaled)."""
    n = max(16, int(200_000 * args.scale))
    k = tk.RBF(LS).to(dev, torch.float32)

    def make(size):
        g = torch.Generator(device="cpu").manual_seed(2)
        return (torch.randn(size, 3, generator=g).to(dev),
                torch.randn(size, 1, generator=g).to(dev))

    def product(backend, triton_auto=False):
        def run(X, V):
            old, tk.config.triton_auto = tk.config.triton_auto, triton_auto
            try:
                with torch.no_grad():
                    return k(X, backend=backend) @ V
            finally:
                tk.config.triton_auto = old
        return run

    rows, times = [], {}
    label = "RBF d=3 float32 (before)"
    for method, fn in (("torchkern triton", product("triton")),
                       ("torchkern auto, triton_auto off", product("auto")),
                       ("torchkern compiled", product("compiled"))):
        row, s = _measure(label, n, method, fn, make, k, args.budget, dev)
        if not isinstance(s, str):
            times[method] = s
            if method != "torchkern triton" and "torchkern triton" in times:
                row["target"] = f"triton {s / times['torchkern triton']:.1f}x faster"
        rows.append(row)
    return rows


def _backward_rows(args, dev):
    """Forward and backward (gradients to X and the lengthscale of ⟨G, K V⟩) of the Triton
    RBF product, d = 3, float32, n = 2·10⁵ (scaled)."""
    n = max(16, int(200_000 * args.scale))
    k = tk.RBF(LS).to(dev, torch.float32)
    g = torch.Generator(device="cpu").manual_seed(1)
    X = torch.randn(n, 3, generator=g).to(dev)
    V = torch.randn(n, 1, generator=g).to(dev)
    G = torch.randn(n, 1, generator=g).to(dev)

    def fwd():
        with torch.no_grad():
            return k(X, backend="triton") @ V

    def bwd():
        Xg = X.detach().requires_grad_(True)
        with torch.enable_grad():
            out = k(Xg, backend="triton") @ V
            gx, _ = torch.autograd.grad((out * G).sum(), [Xg, *k.parameters()])
        return gx

    fwd(), bwd()  # compile + autotune
    sf, _, _ = timed(fwd, dev)
    if sf * 4 > args.budget:
        return [{"case": "backward / forward", "n": n, "method": "torchkern triton",
                 "seconds": f"skipped (forward {sf:.1f} s)"}]
    sfb, _, _ = timed(bwd, dev)  # forward + backward
    sb = max(sfb - sf, 0.0)
    return [{"case": "forward (grad run)", "n": n, "method": "torchkern triton",
             "seconds": f"{sf:.4f}", "evals/s": f"{n * n / sf:.2e}"},
            {"case": "backward: grad X, lengthscale", "n": n, "method": "torchkern triton",
             "seconds": f"{sb:.4f} (+fwd {sfb:.4f})",
             "target": f"{sb / sf:.2f}x forward (<= 3x: {'met' if sb <= 3 * sf else 'NOT met'})"}]


def _free_bytes(dev):
    if torch.device(dev).type == "cuda":
        return torch.cuda.mem_get_info()[0]
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


if __name__ == "__main__":
    main()
