"""Compile the Triton engine's generated kernels for a GPU without one (CUDA sm_90 by
default), with the ptxas that ships in the triton wheel, and print each kernel's
registers and stack (spills) per thread.

    python bench/triton_offline_compile.py [--families rbf rbf64 ...] [--arch 90]
                                           [--tile 64 64] [--warps 4]

It checks, on a machine without a GPU, that every variant the engine launches — product
(FMA and tl.dot right-hand sides), Gram writer, backward with rows X (gradients to X and
hyperparameters) and with rows Y (Kᵀ G and the gradient to Y) — compiles, in float32
and float64. It does not run them: correctness is tests/test_triton_engine.py's
(interpreter on the CPU, compiled on CUDA).
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

os.environ["TRITON_INTERPRET"] = "0"
os.environ["TORCHKERN_TRITON_AUTOTUNE"] = "0"  # one configuration: compile it here
import torch  # noqa: E402
import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import torchkern as tk  # noqa: E402
from torchkern._compiled import triton as engine  # noqa: E402

FAMILIES = {
    "rbf": (lambda: tk.RBF(0.7), 3),
    "rbf64": (lambda: tk.RBF(4.0), 64),
    "sum": (lambda: 2.0 * tk.RBF(0.5) + tk.Matern(nu=1.5) * tk.Linear(), 3),
    "matern52": (lambda: tk.Matern(nu=2.5), 3),
    "periodic": (lambda: tk.Periodic(lengthscale=torch.tensor([0.5, 1.0, 2.0]), period=1.3), 3),
    "arccos": (lambda: tk.ArcCosine(order=1), 3),
    "poly64": (lambda: tk.Polynomial(degree=3), 64),
    "rq": (lambda: tk.RationalQuadratic(alpha=0.7), 3),
    "imq": (lambda: tk.InverseMultiquadric(), 3),
}


def _jit_fn(kern):
    while not isinstance(kern, triton.runtime.jit.JITFunction):
        kern = kern.fn
    return kern


def compile_spec(spec, rb, arch, tile, warps, defer=None):
    kern, _ = engine._compile(spec, interpret=False)
    fn = _jit_fn(kern)
    ptr = "*fp64" if spec.dtype == torch.float64 else "*fp32"
    sig, const = {}, {}
    for a in fn.arg_names:
        if a in ("n", "m", "r", "rs16", "tune_key"):
            sig[a] = "i32"
        elif a in ("BM", "BN", "RB", "DEFER"):
            sig[a] = "constexpr"
            const[a] = {"BM": tile[0], "BN": tile[1], "RB": rb,
                        "DEFER": int(engine._untuned_defer(spec, True) if defer is None
                                     else defer)}[a]
        else:
            sig[a] = ptr
    t = time.perf_counter()
    ck = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=const),
                        target=GPUTarget("cuda", arch, 32), options={"num_warps": warps})
    return time.perf_counter() - t, ck


def usage(ck):
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin",
                        "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as fh:
        fh.write(ck.asm["cubin"])
        fh.flush()
        out = subprocess.run([tool, "--dump-resource-usage", fh.name], capture_output=True,
                             text=True).stdout
    for line in out.splitlines():
        if "REG:" in line:
            parts = dict(p.split(":") for p in line.split() if ":" in p and p[0].isupper())
            return f"REG {parts.get('REG')} STACK {parts.get('STACK')}"
    return "?"


def variants(f, dtype, swap):
    rows = f.ys if swap else f.xs
    dims, pd = [x.shape[1] for x in rows], [p.numel() for p in f.ps]

    def spec(kind, mode, r, rows_, par, prod):
        # lowered as the engine lowers each kind (the forward and the Gram writer fold
        # exp(c‖x − y‖²)'s scale into the loads)
        L = engine._lower(f.fn, f.xs, f.ys, f.ps, swap, fold=kind != "backward")
        return engine._Spec(L, dims, pd, dtype, kind, mode, r, rows_, par, prod, False,
                            os.environ.get("TK_IDX64", "1") == "1")

    if not swap:
        return [("forward r=1", spec("forward", "fma", 1, False, False, False), 16),
                ("forward r=65", spec("forward", "dot", 65, False, False, False), 64),
                ("gram", spec("gram", "fma", 1, False, False, False), 16),
                ("backward rows X r=2", spec("backward", "fma", 2, True, True, False), 16),
                ("backward rows X r=100", spec("backward", "dot", 100, True, True, False), 64)]
    return [("backward rows Y r=2", spec("backward", "fma", 2, True, False, True), 16),
            ("backward rows Y r=20", spec("backward", "dot", 20, True, False, True), 32)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--families", nargs="+", default=list(FAMILIES), choices=list(FAMILIES))
    ap.add_argument("--dtypes", nargs="+", default=["float32", "float64"])
    ap.add_argument("--arch", type=int, default=90)
    ap.add_argument("--tile", type=int, nargs=2, default=[64, 64])
    ap.add_argument("--warps", type=int, default=4)
    args = ap.parse_args()
    print(f"# triton {triton.__version__}, sm_{args.arch}, tiles {args.tile}, "
          f"{args.warps} warps; load average {os.getloadavg()}")
    failed = 0
    for name in args.families:
        make, d = FAMILIES[name]
        for dname in args.dtypes:
            dtype = getattr(torch, dname)
            X = 0.2 * torch.randn(10, d, dtype=dtype)
            f = make().to(dtype).formula(X, X)
            for swap in (False, True):
                for label, spec, rb in variants(f, dtype, swap):
                    try:
                        t, ck = compile_spec(spec, rb, args.arch, args.tile, args.warps)
                        res = f"ok  {t:5.1f} s  {usage(ck)}"
                    except Exception as exc:  # noqa: BLE001 (report and go on)
                        failed += 1
                        res = "FAIL " + (str(exc).strip().splitlines() or [repr(exc)])[-1][:300]
                    print(f"{name:9s} {dname:8s} {label:22s} {res}", flush=True)
    print(f"# {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
