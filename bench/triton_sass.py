"""The Triton engine's column loop read off its SASS, without a GPU: instructions per
kernel evaluation (pair) by class, and the throughput bound they put on one SM.

    python bench/triton_sass.py [--cases rbf-r1 rbf-r16 ... periodic-r1] [--arch 90]
                                [--tile BM BN] [--warps W] [--defer 0|1] [--dump DIR]

Each case is compiled for sm_90 by ``bench/triton_offline_compile.py``'s compiler (the
ptxas in the triton wheel), disassembled with the wheel's ``cuobjdump -sass``, and the
outermost loop (the widest backward branch: the loop over the column tiles of Y) is
counted. A thread evaluates BM·BN / (32·warps) pairs per loop step, so counts are divided
by that. The bound is an estimate of the issue and pipe limits per SM and clock on an
H100 (NVIDIA, "H100 Tensor Core GPU Architecture", 2022; CUDA C++ Programming Guide,
"Arithmetic instructions" throughput table): 128 thread-instructions issued (4
schedulers × 32 lanes), 128 FP32 (FFMA/FMUL/FADD), 64 other ALU (integer, compares,
min/max, selects, moves), 16 MUFU (ex2, rcp, rsq, lg2, sin/cos) and conversions, 64 FP64,
32 LSU (loads, stores, shuffles); times 132 SMs at 1.98 GHz. Latency, memory and the
tensor cores are not modelled: a bound, not a prediction; only a GPU run measures.
"""
import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import triton_offline_compile as toc  # noqa: E402  (sets TRITON_INTERPRET=0 first)
import torch  # noqa: E402
import triton  # noqa: E402
import torchkern as tk  # noqa: E402
from torchkern._compiled import triton as engine  # noqa: E402

SMS, CLOCK = 132, 1.98e9
RATE = {"issue": 128, "fp32": 128, "alu": 64, "mufu": 16, "cvt": 16, "fp64": 64, "lsu": 32}
CLASSES = {  # SASS opcode (before the first dot) -> class
    "fp32": "FFMA FMUL FADD FFMA2 FMUL2 FADD2 HFMA2 HADD2 HMUL2",
    "fp64": "DFMA DMUL DADD DSETP DMNMX",
    "mufu": "MUFU",
    "tensor": "HMMA DMMA IMMA HGMMA QGMMA",
    "cmp": "FSETP ISETP PSETP FMNMX VIMNMX FSEL SEL FSWZADD PLOP3 P2R R2P FCHK",
    "int": "IADD3 IMAD LEA SHF LOP3 IABS MOV MOV32I CS2R S2R IMNMX PRMT SHL SHR VIADD "
           "IADD BMSK FLO POPC UIADD3 UIMAD ULEA USHF ULOP3 UMOV UISETP USEL S2UR ULDC",
    "load": "LDG LDS LDSM LDC LDGSTS LDGDEPBAR LD",
    "store": "STG STS ST RED ATOM ATOMG",
    "shfl": "SHFL",
    "cvt": "F2F F2I I2F FRND I2I F2FP",
    "branch": "BRA BSSY BSYNC WARPSYNC EXIT CALL RET JMP BREAK",
}
OPCLASS = {op: c for c, ops in CLASSES.items() for op in ops.split()}
PIPE = {"fp32": "fp32", "fp64": "fp64", "mufu": "mufu", "cmp": "alu", "int": "alu",
        "cvt": "cvt", "load": "lsu", "store": "lsu", "shfl": "lsu"}

CASES = {  # name: (kernel, d, dtype, r[, allow_tf32])
    "rbf-r1": (lambda: tk.RBF(0.7), 3, torch.float32, 1),
    "rbf-r16": (lambda: tk.RBF(0.7), 3, torch.float32, 16),
    "rbf-d64": (lambda: tk.RBF(4.0), 64, torch.float32, 1),
    "rbf+matern52": (lambda: tk.RBF(0.7) + tk.Matern(nu=2.5, lengthscale=0.7), 3,
                     torch.float32, 1),
    "rbf-f64": (lambda: tk.RBF(0.7), 3, torch.float64, 1),
    # ⟨x, y⟩ on the tensor cores (three TF32 products): IEEE float32 needs d FFMAs a pair
    "rbf-d64-tf32x3": (lambda: tk.RBF(4.0), 64, torch.float32, 1, "tf32x3"),
}
DEFAULT = list(CASES)  # issue #20's targets; the other families by name
CASES.update({f"{k}-r1": (make, d, torch.float32, 1)  # the offline compile's families
              for k, (make, d) in toc.FAMILIES.items() if k not in ("rbf", "rbf64")})
TILES = {torch.float32: ((64, 64), 4), torch.float64: ((32, 32), 4)}
_LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z0-9_]+)([.\w]*)\s*([^;]*);")


def sass(cubin: bytes) -> str:
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin",
                        "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as fh:
        fh.write(cubin)
        fh.flush()
        return subprocess.run([tool, "-sass", fh.name], capture_output=True, text=True,
                              check=True).stdout


def parse(text):
    """[(address, opcode, modifiers, operands)] of the SASS listing."""
    return [(int(a, 16), op, mods, args) for a, _, op, mods, args in _LINE.findall(text)]


def column_loop(ins):
    """The instructions of the widest loop (a branch back to an earlier address)."""
    best = None
    for addr, op, _, args in ins:
        if op == "BRA":
            target = int(args.split()[-1].rstrip(";"), 16)
            if target < addr and (best is None or addr - target > best[1] - best[0]):
                best = (target, addr)
    if best is None:
        raise RuntimeError("no loop in the SASS")
    return [i for i in ins if best[0] <= i[0] <= best[1]]


def classify(loop):
    count = collections.Counter()
    mufu = collections.Counter()
    for _, op, mods, _ in loop:
        c = OPCLASS.get(op, "other")
        count[c] += 1
        if c == "mufu":
            mufu[mods.lstrip(".")] += 1
    return count, mufu


def bound(per_pair):
    """Pairs per second on 132 SMs: the tightest of issue and each pipe."""
    limits = {"issue": sum(per_pair.values()) / RATE["issue"]}
    for c, v in per_pair.items():
        p = PIPE.get(c)
        if p:
            limits[p] = limits.get(p, 0.0) + v / RATE[p]
    worst = max(limits, key=limits.get)
    return SMS * CLOCK / limits[worst], worst


def spec_of(make, d, dtype, r, allow_tf32=False):
    X = 0.2 * torch.randn(10, d, dtype=dtype)
    f = make().to(dtype).formula(X, X)
    L = engine._lower(f.fn, f.xs, f.ys, f.ps, fold=True)  # as engine._forward lowers
    mode = engine._r_mode(r)
    return engine._Spec(L, [x.shape[1] for x in f.xs], [p.numel() for p in f.ps], dtype,
                        "forward", mode, r, False, False, False, allow_tf32, False), mode


def analyse(name, arch, dump=None, tile=None, warps=None, defer=None):
    make, d, dtype, r, *allow = CASES[name]
    spec, mode = spec_of(make, d, dtype, r, *allow)
    (bm, bn), nw = TILES[dtype]
    bm, bn = tile or (bm, bn)
    warps = warps or nw
    rb = engine._rb(spec, r)
    _, ck = toc.compile_spec(spec, rb, arch, (bm, bn), warps, defer)
    text = sass(ck.asm["cubin"])
    if dump:
        os.makedirs(dump, exist_ok=True)
        with open(os.path.join(dump, f"{name}.sass"), "w") as fh:
            fh.write(text)
    loop = column_loop(parse(text))
    count, mufu = classify(loop)
    pairs = bm * bn / (32 * warps)
    per = {c: v / pairs for c, v in count.items()}
    rate, by = bound(per)
    return dict(name=name, tile=f"{bm}x{bn}/{warps}w", regs=toc.usage(ck), n=len(loop),
                pairs=pairs, per=per, mufu=dict(mufu), rate=rate, by=by)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", nargs="+", default=DEFAULT, choices=list(CASES))
    ap.add_argument("--arch", type=int, default=90)
    ap.add_argument("--dump", help="write each case's SASS listing into this folder")
    ap.add_argument("--tile", type=int, nargs=2, help="BM BN (default: 64 64, float64 32 32)")
    ap.add_argument("--warps", type=int, help="warps a program (default 4)")
    ap.add_argument("--defer", type=int, choices=(0, 1),
                    help="DEFER as given (default: as the engine's untuned launch)")
    args = ap.parse_args()
    order = ["fp32", "fp64", "mufu", "tensor", "cmp", "int", "load", "store", "shfl", "cvt",
             "branch", "other"]
    print(f"# triton {triton.__version__}, sm_{args.arch}; instructions of the column loop "
          f"per thread and pair; bound on 132 SMs at 1.98 GHz")
    print(f"{'case':13s} {'tile':11s} {'instr/pair':>10s}  "
          + " ".join(f"{c:>6s}" for c in order) + "   bound/s  by     registers")
    for name in args.cases:
        res = analyse(name, args.arch, args.dump, args.tile, args.warps, args.defer)
        total = sum(res["per"].values())
        cols = " ".join(f"{res['per'].get(c, 0.0):6.2f}" for c in order)
        print(f"{name:13s} {res['tile']:11s} {total:10.2f}  {cols}  {res['rate']:8.2e}  "
              f"{res['by']:5s}  {res['regs']}  MUFU {res['mufu']}", flush=True)


if __name__ == "__main__":
    main()
