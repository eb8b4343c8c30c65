r"""A Triton engine generated from a kernel's formula: K V, its gradients and stored Gram
blocks, each in one launch, with no tile of K ever written to memory.

The formula ``fn(xs, ys, ps)`` (:class:`torchkern.gram.Formula`) is traced once per call
with symbolic stand-ins for its variables (:class:`Sym`, which answers the operations of a
KeOps ``LazyTensor``: arithmetic, integer powers, ``exp``, ``log``, ``sqrt``, ``rsqrt``,
``abs``, ``sin``, ``cos``, ``atan2``, ``relu``, ``clamp``, ``sum(-1)``, ``elem``). The
trace is lowered to scalar code on a tile of rows i × columns j; from it this module writes
the source of

* a **product** kernel: a grid over tiles of BM rows of X (and chunks of V's columns);
  each program loops over tiles of BN rows of Y, evaluates the kernel tile in registers
  and accumulates it against V's tile — ``tl.dot`` for more than 8 right-hand sides, one
  FMA reduction per column below (up to 4: K ∘ v summed in a tile, reduced once after the
  loop, which also gives Triton a one-column-a-thread layout) (the pattern of
  FlashAttention: Dao et al. 2022,
  "FlashAttention: fast and memory-efficient exact attention with IO-awareness", NeurIPS;
  and of KeOps: Charlier, Feydy, Glaunès, Collin and Durif 2021, "Kernel operations on
  the GPU, with autodiff, without memory overflows", JMLR 22(74));
* a **backward** kernel of the same form: with W = A Bᵀ formed tile by tile (A = G, B =
  V for the row variables), it reduces the formula's derivative — taken symbolically by
  reverse accumulation on the traced scalar code (Griewank and Walther 2008, "Evaluating
  Derivatives", 2nd ed., SIAM, ch. 3) — against W into the gradients of the row
  variables and (per program, summed after) of the hyperparameters. The gradient to Y
  and to V is the same kernel with the roles of X and Y swapped (rows Y, A = V, B = G),
  which also accumulates Kᵀ G;
* a **Gram writer**: one tile of K per program, stored (rows of K, K_nm).

Its clamps (``relu``, ``max``/``min``, ``clamp``, the sine's reduction, the fast form's
clip at 0) propagate NaN, as torch's and KeOps' do (Triton's default returns the other
operand: a NaN lengthscale gave a finite Matérn product). Computation details: row-only
and scalar subexpressions are hoisted out of the column loop; ``exp`` is ``exp2`` with
log₂e folded into a constant factor, and in the product and the Gram writer exp(c‖x − y‖²)
of a variable used nowhere else (the RBF) is 2^(−‖σx − σy‖²), σ = √(−c·log₂e) applied as
the points are loaded; ‖x − y‖² of a variable of width d ≥ 16 that is not under a square
root is ‖x‖² + ‖y‖² − 2⟨x, y⟩ with ``tl.dot`` (exact IEEE fp32 unless ``allow_tf32=True``,
whose 10-bit mantissa puts a relative error of about 2⁻¹¹·2|⟨x, y⟩| on the distance, or
``allow_tf32="tf32x3"``, three TF32 products on the tensor cores with about float32's
accuracy), clipped at 0, and — as in :func:`torchkern.kernels._ops.fast_form_dtype` — only
where its round-off ε·(max‖x‖² + max‖y‖²) stays below ``_config.fast_form_max_roundoff``
of the dtype; elsewhere (and for d < 16) the sum of squared differences (‖y‖² computed
once per launch, not per tile). Clamps and reciprocals that formulas write with portable
operations become one instruction each (``_Lowered._rewrite``: relu(x − c) + c is max(x,
c), 1/√x is rsqrt, divisions by loop-invariant values are products by a hoisted
reciprocal); sin and cos are generated code (a Cody–Waite reduction and a series), not
libdevice's. The instruction counts per pair of these kernels, read off their sm_90 SASS
without a GPU, are ``bench/triton_sass.py``'s. float32 and float64 are supported; in
float64 the backward forms W = A Bᵀ by FMAs (a float64 ``tl.dot`` there gave wrong
gradients on an H100 with Triton 3.6, where the same code in float32 and the float64
forward were right). On CUDA the tile sizes are chosen by ``triton.autotune`` among a few
configurations (cached per size bucket); under Triton's CPU interpreter
(``TRITON_INTERPRET=1``, used by the tests) small fixed tiles;
``TORCHKERN_TRITON_AUTOTUNE=0`` replaces the autotuning by one configuration (32 × 32
tiles, 4 warps; the CUDA tests use it to compile each kernel once). The autotuner's key
separates products of fewer and more than 2²⁶ entries.

Cost: O(n·m·(w + r)) time for inputs of total width w and r right-hand sides, O((n + m)
(w + r)) memory. A formula that uses an operation this generator cannot emit raises
:class:`NotImplementedError` naming it (the caller falls back to another backend).
"""
from __future__ import annotations

import hashlib
import importlib.util
import math
import os
import sys
import threading

import torch

from .._config import fast_form_max_roundoff

__all__ = ["Sym", "available", "interpreting", "matmul", "gram", "trace", "generate_source"]

MATRIX_MIN_D = 16     # ‖x − y‖², ⟨x, y⟩ of variables this wide by tl.dot
FMA_MAX_R = 8         # up to this many right-hand sides: one FMA reduction per column
DEFER_MAX_R = 4       # up to this many: products may reduce once, after the loop (DEFER)
_LOG2E = 1.4426950408889634


def interpreting() -> bool:
    """Whether Triton runs kernels in its CPU interpreter (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def available(device) -> bool:
    """Whether this engine can run on ``device``: CUDA with triton importable (compiled,
    whatever ``TRITON_INTERPRET`` says), or the CPU when ``TRITON_INTERPRET=1`` asks for
    Triton's interpreter (slow; for tests)."""
    dev = torch.device(device)
    if not ((dev.type == "cuda" and torch.cuda.is_available())
            or (dev.type == "cpu" and interpreting())):
        return False
    try:
        import triton  # noqa: F401
    except Exception:  # noqa: BLE001 (ImportError, a broken install)
        return False
    return True


# --------------------------------------------------------------------------------------
# Tracing: symbolic stand-ins that answer the LazyTensor operations formulas use
# --------------------------------------------------------------------------------------

class Sym:
    """A node of a traced formula: ``op`` with ``args`` and feature width ``dim``.

    Leaves are ``("row", a)`` / ``("col", a)`` (the a-th variable of the row or column
    point, width d_a), ``("par", b)`` (hyperparameter b, width its size) and ``("const",
    v)``. Operations follow KeOps' LazyTensor semantics: a width-1 operand broadcasts
    against any width, ``sum(-1)`` reduces the features to width 1.
    """

    __slots__ = ("op", "args", "dim")

    def __init__(self, op, args, dim):
        self.op, self.args, self.dim = op, tuple(args), dim

    # -- helpers
    @staticmethod
    def wrap(v) -> "Sym":
        if isinstance(v, Sym):
            return v
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise NotImplementedError(f"the Triton engine cannot use an operand of type "
                                      f"{type(v).__name__} in a kernel formula")
        return Sym("const", (float(v),), 1)

    def _bin(self, op, other, swap=False):
        other = Sym.wrap(other)
        a, b = (other, self) if swap else (self, other)
        if a.dim != b.dim and 1 not in (a.dim, b.dim):
            raise ValueError(f"formula operands of widths {a.dim} and {b.dim} do not broadcast")
        return Sym(op, (a, b), max(a.dim, b.dim))

    def _un(self, op):
        return Sym(op, (self,), self.dim)

    # -- arithmetic
    def __add__(self, o): return self._bin("add", o)
    def __radd__(self, o): return self._bin("add", o, True)
    def __sub__(self, o): return self._bin("sub", o)
    def __rsub__(self, o): return self._bin("sub", o, True)
    def __mul__(self, o): return self._bin("mul", o)
    def __rmul__(self, o): return self._bin("mul", o, True)
    def __truediv__(self, o): return self._bin("div", o)
    def __rtruediv__(self, o): return self._bin("div", o, True)
    def __neg__(self): return self._un("neg")

    def __pow__(self, k):
        if isinstance(k, (int, float)) and not isinstance(k, bool) and float(k).is_integer():
            return Sym("pow", (self, Sym.wrap(float(k))), self.dim)
        if k == 0.5:
            return self.sqrt()
        if k == -0.5:
            return self.rsqrt()
        raise NotImplementedError(f"the Triton engine cannot emit the power x ** {k!r} "
                                  f"(integer powers and ±1/2 only)")

    def exp(self): return self._un("exp")
    def log(self): return self._un("log")
    def sqrt(self): return self._un("sqrt")
    def rsqrt(self): return self._un("rsqrt")
    def abs(self): return self._un("abs")
    def __abs__(self): return self._un("abs")
    def sin(self): return self._un("sin")
    def cos(self): return self._un("cos")
    def relu(self): return self._un("relu")

    def clamp(self, lo, hi):
        return self._bin("max", lo)._bin("min", hi)

    def grad_clamp(self, lo, hi):
        """clamp(lo, hi) where a gradient is taken; the value itself where none is (the
        forward product and the Gram writer): for clamps that only keep a derivative
        finite and leave the kernel's value as it is (``kernels._ops.sqdist_exact``)."""
        return Sym("gclamp", (self._bin("max", lo)._bin("min", hi), self), self.dim)
    def atan2(self, other): return self._bin("atan2", other)

    def sum(self, axis=-1, dim=None, **kw):
        ax = axis if dim is None else dim
        if ax not in (-1, 2) or kw:
            raise NotImplementedError(f"the Triton engine reduces formulas over the feature "
                                      f"dimension only (sum(-1)), got sum({ax!r}"
                                      f"{''.join(f', {k}={v!r}' for k, v in kw.items())})")
        return Sym("sum", (self,), 1)

    def elem(self, k):
        if not 0 <= k < self.dim:
            raise IndexError(f"elem({k}) of a width-{self.dim} formula variable")
        return Sym("elem", (self, k), 1)

    @property
    def ndim(self):
        return self.dim

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise NotImplementedError(f"the Triton engine cannot emit the formula operation "
                                  f"{name!r}")

    def __bool__(self):
        raise NotImplementedError("the Triton engine cannot emit a formula that branches on "
                                  "its values")


def trace(fn, row_dims, col_dims, par_dims, swap: bool = False) -> Sym:
    """The formula ``fn`` evaluated on symbols: rows i are the first argument (``swap``:
    the second, for Kᵀ), columns j the other. Returns the width-1 result."""
    rows = [Sym("row", (a,), d) for a, d in enumerate(row_dims)]
    cols = [Sym("col", (a,), d) for a, d in enumerate(col_dims)]
    pars = [Sym("par", (b,), d) for b, d in enumerate(par_dims)]
    out = fn(cols, rows, pars) if swap else fn(rows, cols, pars)
    out = Sym.wrap(out)
    if out.dim != 1:
        raise ValueError(f"a kernel formula must return width 1, this one has width {out.dim}")
    return out


# --------------------------------------------------------------------------------------
# Lowering: scalar SSA on a tile; shapes "c" (scalar), "i" ([BM, 1]), "j" ([1, BN]), "ij"
# --------------------------------------------------------------------------------------

def _join(*shapes):
    i = any(s in ("i", "ij") for s in shapes)
    j = any(s in ("j", "ij") for s in shapes)
    return "ij" if i and j else "i" if i else "j" if j else "c"


def _pattern(node: Sym):
    """``("sqd"|"dot"|"nrow"|"ncol", a)`` where ``node`` is sum((x_a − y_a)²), sum(x_a y_a),
    sum(x_a x_a) or sum(y_a y_a) of one variable pair; else None."""
    if node.op != "sum":
        return None
    t = node.args[0]

    def leaf(s):
        return (s.op, s.args[0]) if s.op in ("row", "col") else None

    if t.op == "pow" and t.args[1].args[0] == 2.0 and t.args[0].op == "sub":
        a, b = (leaf(s) for s in t.args[0].args)
        if a and b and a[1] == b[1] and {a[0], b[0]} == {"row", "col"}:
            return ("sqd", a[1])
    if t.op == "mul":
        a, b = (leaf(s) for s in t.args)
        if a and b and a[1] == b[1]:
            if a[0] != b[0]:
                return ("dot", a[1])
            return ("nrow" if a[0] == "row" else "ncol", a[1])
    return None


def _exp_sqd(node: Sym):
    """``(a, c)`` where ``node`` is exp(c · sum((x_a − y_a)²)) with a constant c < 0."""
    if node.op != "exp" or node.args[0].op != "mul":
        return None
    for u, v in (node.args[0].args, node.args[0].args[::-1]):
        p = _pattern(u)
        if v.op == "const" and v.args[0] < 0 and p is not None and p[0] == "sqd":
            return p[1], v.args[0]
    return None


class _Lowered:
    """The traced formula as scalar SSA instructions ``(op, args, shape)``; args are SSA
    indices, or literals for ``const``/leaves."""

    def __init__(self, root: Sym, row_dims, par_dims, fast_ok, fold=False):
        self.instrs = []
        self.memo = {}
        self.row_dims = list(row_dims)
        self.par_dims = list(par_dims)
        self.matrix = self._matrix_vars(root, fast_ok)
        self.folded = self._folds(root) if fold else {}
        self.values_only = fold  # forward and Gram writer: nothing is differentiated
        self.node_memo = {}
        self.out = self.lower(root)[0]

    def _folds(self, root):
        """{id(e): (a, σ)} for the nodes e = exp(c·Σ(x_a − y_a)²), c < 0, of a variable a
        used nowhere else: e = 2^(−Σ(σx_a − σy_a)²) with σ = √(−c·log₂e) applied as x_a and
        y_a are loaded (once per row, once per column), which spares a multiplication per
        pair. Their extra rounding (ε|σx|) is that of the division by the lengthscale
        that made x_a. Forward and Gram writer only: the backward differentiates x_a."""
        cand, other, seen = {}, set(), set()

        def visit(s):
            if id(s) in seen:
                return
            seen.add(id(s))
            hit = _exp_sqd(s)
            if hit is not None and hit[0] not in self.matrix:
                cand.setdefault(hit[0], set()).add((id(s), hit[1]))
                return
            if s.op in ("row", "col"):
                other.add(s.args[0])
            for u in s.args:
                if isinstance(u, Sym):
                    visit(u)

        visit(root)
        return {e: (a, math.sqrt(-c * _LOG2E)) for a, es in cand.items()
                if a not in other and len(es) == 1 for e, c in es}

    # which variables run in matrix mode: wide, used only through the patterns, and (for
    # ‖x − y‖²) not under a square root and with acceptable round-off
    def _matrix_vars(self, root, fast_ok):
        scalar_use, sensitive, seen = set(), set(), set()
        pats = {}

        sqd_below = {}

        def visit(s):
            if id(s) in seen:
                return sqd_below.get(id(s), set())
            seen.add(id(s))
            p = _pattern(s)
            below = set()
            if p is not None:
                pats[id(s)] = p
                if p[0] == "sqd":
                    below.add(p[1])
            elif s.op in ("row", "col"):
                scalar_use.add(s.args[0])
            else:
                for a in s.args:
                    if isinstance(a, Sym):
                        below |= visit(a)
            if s.op == "sqrt":
                sensitive.update(below)
            sqd_below[id(s)] = below
            return below

        visit(root)
        used = {p[1] for p in pats.values()}
        out = set()
        for a in used:
            if a in scalar_use or self.row_dims[a] < MATRIX_MIN_D:
                continue
            if any(p == ("sqd", a) for p in pats.values()) and (a in sensitive or not fast_ok[a]):
                continue
            out.add(a)
        return out

    def emit(self, op, args, shape):
        key = (op, tuple(args))
        if key in self.memo:
            return self.memo[key]
        self.instrs.append((op, tuple(args), shape))
        self.memo[key] = len(self.instrs) - 1
        return self.memo[key]

    def const(self, v):
        return self.emit("const", (float(v),), "c")

    def value(self, k):
        op, args, _ = self.instrs[k]
        return args[0] if op == "const" else None

    def shape(self, k):
        return self.instrs[k][2]

    def op(self, name, *ks):
        vals = [self.value(k) for k in ks]
        if all(v is not None for v in vals):  # constant folding
            return self.const(_fold(name, vals))
        if name == "add":
            if vals[0] == 0.0:
                return ks[1]
            if vals[1] == 0.0:
                return ks[0]
        if name == "sub" and vals[1] == 0.0:
            return ks[0]
        if name == "mul":
            if vals[0] == 1.0:
                return ks[1]
            if vals[1] == 1.0:
                return ks[0]
        if name == "div" and vals[1] == 1.0:
            return ks[0]
        k = self._rewrite(name, ks, vals)
        if k is not None:
            return k
        if name == "pow":
            n = int(vals[1])
            if n == 1:
                return ks[0]
            if n == 2:
                return self.op("mul", ks[0], ks[0])
        return self.emit(name, ks, _join(*(self.shape(k) for k in ks)))

    def _rewrite(self, name, ks, vals):
        """Forms of the clamps and reciprocals that formulas write with the operations
        every backend has (``kernels._ops.safe_sqrt``), as one instruction each; equal
        values (to a rounding) and equal derivatives, almost everywhere:

        * relu(x − c) + c → max(x, c);
        * 1/√x → rsqrt(x), 1/rsqrt(x) → √x;
        * 1/max(a, c) → min(1/a, 1/c) for a ≥ 0 (a square root, rsqrt, exp) and c > 0;
        * x / b → x · (1/b) where b is loop-invariant and x is not (the reciprocal is
          hoisted out of the loop over the columns, a division a pair saved).

        The Matérn distance min(√max(s, ε), u), written 1/(relu(1/√max(s, ε) − 1/u) +
        1/u), is then a square root and two min/max, not two divisions (sm_90 SASS of
        the Matérn 5/2 product: ~36 → ~20 instructions a pair)."""
        instr = self.instrs
        if name == "add":
            for r, c in (ks, ks[::-1]):
                if instr[r][0] == "relu":
                    sub = instr[instr[r][1][0]]
                    if sub[0] == "sub" and sub[1][1] == c and self.value(c) is not None:
                        return self.op("max", sub[1][0], c)
        if name == "div" and vals[0] == 1.0:
            op, args, _ = instr[ks[1]]
            if op in ("sqrt", "rsqrt"):
                return self.op("rsqrt" if op == "sqrt" else "sqrt", args[0])
            if op == "max":
                a, c = args if self.value(args[1]) is not None else args[::-1]
                if (self.value(c) is not None and self.value(c) > 0
                        and instr[a][0] in ("sqrt", "rsqrt", "exp")):
                    return self.op("min", self.op("div", ks[0], a),
                                   self.const(1.0 / self.value(c)))
        if (name == "div" and vals[0] != 1.0 and self.shape(ks[1]) in ("c", "i")
                and self.shape(ks[0]) in ("j", "ij")):
            return self.op("mul", ks[0], self.op("div", self.const(1.0), ks[1]))
        return None

    def lower(self, s: Sym):
        """The SSA indices of s's features (a list of length s.dim)."""
        if id(s) in self.node_memo:
            return self.node_memo[id(s)][1]
        out = self._lower(s)
        self.node_memo[id(s)] = (s, out)  # keep s alive: ids stay unique
        return out

    def _lower(self, s):
        op = s.op
        if id(s) in self.folded:
            a, sigma = self.folded[id(s)]
            acc = None  # −Σ t², as FMAs with a negated factor (no negation of the sum)
            for k in range(self.row_dims[a]):
                t = self.op("sub", self.emit("xrow", (a, k, sigma), "i"),
                            self.emit("xcol", (a, k, sigma), "j"))
                t2 = self.op("mul", t, t)
                acc = self.op("neg", t2) if acc is None else self.op("sub", acc, t2)
            return [self.emit("exp2", (acc,), self.shape(acc))]
        if op == "const":
            return [self.const(s.args[0])]
        if op == "row":
            a = s.args[0]
            return [self.emit("xrow", (a, k), "i") for k in range(s.dim)]
        if op == "col":
            a = s.args[0]
            return [self.emit("xcol", (a, k), "j") for k in range(s.dim)]
        if op == "par":
            b = s.args[0]
            return [self.emit("par", (b, k), "c") for k in range(s.dim)]
        if op == "sum":
            p = _pattern(s)
            if p is not None and p[1] in self.matrix:
                shape = {"sqd": "ij", "dot": "ij", "nrow": "i", "ncol": "j"}[p[0]]
                return [self.emit(p[0], (p[1],), shape)]
            parts = self.lower(s.args[0])
            acc = parts[0]
            for k in parts[1:]:
                acc = self.op("add", acc, k)
            return [acc]
        if op == "elem":
            return [self.lower(s.args[0])[s.args[1]]]
        if op == "gclamp":  # (clamped, unclamped): the clamp only where we differentiate
            return self.lower(s.args[1] if self.values_only else s.args[0])
        if op in ("add", "sub", "mul", "div", "atan2", "pow", "max", "min"):
            a, b = self.lower(s.args[0]), self.lower(s.args[1])
            w = max(len(a), len(b))
            a, b = a * w if len(a) == 1 else a, b * w if len(b) == 1 else b
            return [self.op(op, u, v) for u, v in zip(a, b)]
        return [self.op(op, u) for u in self.lower(s.args[0])]


def _fold(name, v):
    f = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
         "div": lambda a, b: a / b, "pow": lambda a, b: a ** int(b), "neg": lambda a: -a,
         "exp": math.exp, "log": math.log, "sqrt": math.sqrt, "rsqrt": lambda a: a ** -0.5,
         "abs": abs, "sin": math.sin, "cos": math.cos, "relu": lambda a: max(a, 0.0),
         "max": max, "min": min,
         "atan2": math.atan2}[name]
    return f(*v)


# --------------------------------------------------------------------------------------
# Code generation
# --------------------------------------------------------------------------------------

_REDUCE = {  # contribution of shape (from) reduced to the operand's shape (to)
    ("ij", "i"): "_tk_sum({}, axis=1, keep_dims=True)",
    ("ij", "j"): "_tk_sum({}, axis=0, keep_dims=True)",
    ("ij", "c"): "_tk_sum(_tk_sum({}, axis=1, keep_dims=True), axis=0, keep_dims=True)",
    ("i", "c"): "_tk_sum({}, axis=0, keep_dims=True)",
    ("j", "c"): "_tk_sum({}, axis=1, keep_dims=True)",
}


def _lit(v: float) -> str:
    return repr(float(v)) if math.isfinite(v) else f"float('{v}')"


class _Writer:
    def __init__(self):
        self.lines = []

    def __call__(self, line, ind):
        self.lines.append("    " * ind + line)


def _expr(L: _Lowered, k: int, name) -> str:
    """Source of SSA instruction k, its operands named by ``name``."""
    op, args, _ = L.instrs[k]
    if op == "const":
        return _lit(args[0])
    a = [name(x) for x in args] if op not in ("xrow", "xcol", "par", "sqd", "dot", "nrow",
                                               "ncol") else None
    if op in ("add", "sub", "mul", "div"):
        sym = {"add": "+", "sub": "-", "mul": "*", "div": "/"}[op]
        return f"({a[0]} {sym} {a[1]})"
    if op == "pow":
        n = int(L.value(args[1]))
        if n == 0:
            return f"({a[0]} * 0.0 + 1.0)"
        base = a[0] if n > 0 else f"(1.0 / {a[0]})"
        return "(" + " * ".join([base] * abs(n)) + ")"
    if op == "neg":
        return f"(-{a[0]})"
    if op == "exp":  # exp2 with log2(e) folded into a constant factor
        x = args[0]
        xop, xargs, _ = L.instrs[x]
        if xop == "mul":
            for u, w in (xargs, xargs[::-1]):
                c = L.value(w)
                if c is not None:
                    return f"tl.exp2({name(u)} * {_lit(c * _LOG2E)})"
        return f"tl.exp2({a[0]} * {_lit(_LOG2E)})"
    if op == "exp2":  # 2^a: a = −Σ(σx − σy)² (_Lowered._folds)
        return f"tl.exp2({a[0]})"
    if op == "log":
        return f"tl.log({a[0]})"
    if op == "sqrt":
        return f"tl.sqrt({a[0]})"
    if op == "rsqrt":
        return f"tl.rsqrt({a[0]})"
    if op == "abs":
        return f"tl.abs({a[0]})"
    if op == "sin":
        return f"_sin({a[0]})"
    if op == "cos":
        return f"_cos({a[0]})"
    if op == "relu":
        return f"tl.maximum({a[0]}, 0.0, propagate_nan=tl.PropagateNan.ALL)"
    if op in ("max", "min"):
        return f"tl.{op}imum({a[0]}, {a[1]}, propagate_nan=tl.PropagateNan.ALL)"
    if op == "atan2":
        return f"_atan2({a[0]}, {a[1]})"
    raise NotImplementedError(f"the Triton engine cannot emit the formula operation {op!r}")


def _partials(L: _Lowered, k: int, g: str, name):
    """[(operand SSA index, contribution source)] of instruction k with adjoint g."""
    op, args, _ = L.instrs[k]
    v = name(k)
    a = [name(x) for x in args]
    if op == "add":
        return [(args[0], g), (args[1], g)]
    if op == "sub":
        return [(args[0], g), (args[1], f"(-{g})")]
    if op == "mul":
        return [(args[0], f"({g} * {a[1]})"), (args[1], f"({g} * {a[0]})")]
    if op == "div":
        return [(args[0], f"({g} / {a[1]})"), (args[1], f"(-{g} * {v} / {a[1]})")]
    if op == "pow":
        n = int(L.value(args[1]))
        if n == 0:
            return []
        if n - 1 == 0:
            d = "1.0"
        elif n - 1 > 0:
            d = " * ".join([a[0]] * (n - 1))
        else:
            d = "1.0 / (" + " * ".join([a[0]] * (1 - n)) + ")"
        return [(args[0], f"({g} * {float(n)!r} * ({d}))")]
    if op == "neg":
        return [(args[0], f"(-{g})")]
    if op == "exp":
        return [(args[0], f"({g} * {v})")]
    if op == "log":
        return [(args[0], f"({g} / {a[0]})")]
    if op == "sqrt":
        return [(args[0], f"({g} * 0.5 / {v})")]
    if op == "rsqrt":
        return [(args[0], f"({g} * -0.5 * {v} * {v} * {v})")]
    if op == "abs":
        return [(args[0], f"tl.where({a[0]} > 0, {g}, tl.where({a[0]} < 0, -{g}, 0.0 * {g}))")]
    if op == "sin":
        return [(args[0], f"({g} * _cos({a[0]}))")]
    if op == "cos":
        return [(args[0], f"(-{g} * _sin({a[0]}))")]
    if op == "relu":
        return [(args[0], f"tl.where({a[0]} > 0, {g}, 0.0 * {g})")]
    if op in ("max", "min"):  # to the first operand where it is strictly the result
        cmp = ">" if op == "max" else "<"
        return [(args[0], f"tl.where({a[0]} {cmp} {a[1]}, {g}, 0.0 * {g})"),
                (args[1], f"tl.where({a[0]} {cmp} {a[1]}, 0.0 * {g}, {g})")]
    if op == "atan2":  # d atan2(y, x) = (x dy − y dx) / (x² + y²)
        q = f"({a[0]} * {a[0]} + {a[1]} * {a[1]})"
        return [(args[0], f"({g} * {a[1]} / {q})"), (args[1], f"(-{g} * {a[0]} / {q})")]
    raise NotImplementedError(f"the Triton engine cannot differentiate {op!r}")


_ATAN2 = '''
@triton.jit
def _tk_sum(x, axis: tl.constexpr, keep_dims: tl.constexpr = False):
    # tl.sum without calling it: triton.language's own @jit helpers are decorated when
    # triton is imported, compiled or interpreted by TRITON_INTERPRET at that moment, and
    # cannot run in the other mode; tl.reduce with tl.standard's combine function can
    # (the interpreter then sums with numpy).
    return tl.reduce(x, axis, tl.standard._sum_combine, keep_dims=keep_dims)


@triton.jit
def _sin(a):
    return _sin_reduced(a, 0.0)


@triton.jit
def _cos(a):  # cos a = -(-1)^k sin(a - (k + 1/2) pi)
    return -_sin_reduced(a, 0.5)


@triton.jit
def _sin_reduced(a, h: tl.constexpr):
    # (-1)^k sin(r), r = a - (k + h) pi in [-pi/2, pi/2], k = rint(a/pi - h) by the
    # 1.5 * 2^52 (float64) or 1.5 * 2^23 (float32) rounding constant, whose last bit is
    # k's parity: Cody and Waite's reduction with pi in three parts of few bits (Cody and
    # Waite 1980, "Software Manual for the Elementary Functions", Prentice-Hall, ch. 8),
    # then the odd Taylor series, to r^21 in float64 (error < 4e-18; k pi_1 exact for
    # |k| < 2^26, |a| < 2e8) and to r^13 in float32 (error < 1e-9). About 18 instructions
    # where libdevice's sinf, with its Payne-Hanek path for huge arguments, took about 90
    # (sm_90 SASS), and libdevice's float64 sin and cos, their slow path called out of
    # line, made the float64 kernels spill. Past |a| ~ 1e5 (float32) or 2e8 (float64) the
    # reduction loses bits (a float32's spacing at 1e5 is ~0.01) and r is clamped.
    if a.dtype == tl.float64:
        kf = a * 0.3183098861837907 - h + 6755399441055744.0
        k = (kf - 6755399441055744.0) + h
        r = a - k * 3.1415926218032837
        r = r - k * 3.1786509424591713e-08
        r = r - k * 1.2246467991473532e-16
        r = tl.minimum(tl.maximum(r, -1.5707963267948966, propagate_nan=tl.PropagateNan.ALL),
                       1.5707963267948966, propagate_nan=tl.PropagateNan.ALL)
        r2 = r * r
        p = 1.9572941063391263e-20
        p = p * r2 - 8.22063524662433e-18
        p = p * r2 + 2.8114572543455206e-15
        p = p * r2 - 7.647163731819816e-13
        p = p * r2 + 1.6059043836821613e-10
        odd = (kf.to(tl.int64, bitcast=True) & 1) != 0
    else:
        kf = a * 0.3183098861837907 - h + 12582912.0
        k = (kf - 12582912.0) + h
        r = a - k * 3.140625
        r = r - k * 9.67502593994140625e-04
        r = r - k * 1.509957990978376432e-07
        r = tl.minimum(tl.maximum(r, -1.5707963705062866, propagate_nan=tl.PropagateNan.ALL),
                       1.5707963705062866, propagate_nan=tl.PropagateNan.ALL)
        r2 = r * r
        p = 1.6059043836821613e-10
        odd = (kf.to(tl.int32, bitcast=True) & 1) != 0
    p = p * r2 - 2.505210838544172e-08
    p = p * r2 + 2.7557319223985893e-06
    p = p * r2 - 1.984126984126984e-04
    p = p * r2 + 8.333333333333333e-03
    p = p * r2 - 1.6666666666666666e-01
    sr = r + r * r2 * p
    return tl.where(odd, -sr, sr)


@triton.jit
def _atan2(y, x):
    # atan2 by range reduction: t = min/max in [0, 1], three half-angle steps
    # atan t = 2 atan(t / (1 + sqrt(1 + t^2))) to |t| <= tan(pi/32), then the odd Taylor
    # series to t^19 (error < 1e-20), then the octant.
    ay = tl.abs(y)
    ax = tl.abs(x)
    hi = tl.maximum(ax, ay, propagate_nan=tl.PropagateNan.ALL)
    lo = tl.minimum(ax, ay, propagate_nan=tl.PropagateNan.ALL)
    t = tl.where(hi > 0, lo / tl.where(hi > 0, hi, 1.0), 0.0 * hi)
    t = t / (1.0 + tl.sqrt(1.0 + t * t))
    t = t / (1.0 + tl.sqrt(1.0 + t * t))
    t = t / (1.0 + tl.sqrt(1.0 + t * t))
    t2 = t * t
    s = 1.0 / 19.0
    s = 1.0 / 17.0 - t2 * s
    s = 1.0 / 15.0 - t2 * s
    s = 1.0 / 13.0 - t2 * s
    s = 1.0 / 11.0 - t2 * s
    s = 1.0 / 9.0 - t2 * s
    s = 1.0 / 7.0 - t2 * s
    s = 1.0 / 5.0 - t2 * s
    s = 1.0 / 3.0 - t2 * s
    s = 1.0 - t2 * s
    a = 8.0 * t * s
    a = tl.where(ay > ax, 1.5707963267948966 - a, a)
    a = tl.where(x < 0, 3.141592653589793 - a, a)
    return tl.where(y < 0, -a, a)
'''


class _Spec:
    """What one generated kernel is: the lowered formula and the launch variant."""

    def __init__(self, L, row_dims, par_dims, dtype, kind, r_mode, r, want_rows, want_par,
                 want_prod, allow_tf32, idx64=True):
        self.L, self.row_dims, self.par_dims = L, list(row_dims), list(par_dims)
        self.dtype, self.kind, self.r_mode, self.r = dtype, kind, r_mode, r
        self.want_rows, self.want_par, self.want_prod = want_rows, want_par, want_prod
        self.allow_tf32 = allow_tf32
        self.idx64 = idx64  # element offsets need 64 bits (else int32 address arithmetic)


def _idx64(n: int, m: int, row_dims, r: int, gram: bool = False) -> bool:
    """Whether an element offset (row · width + column) of the inputs, A, B, the output,
    the row gradients or the stored Gram (``gram``) can reach 2³¹ − 1."""
    top = (max(n, m) + 1) * max(sum(row_dims), r, 1)
    return max(top, n * m if gram else 0) >= 2**31 - 1


def _prec(spec) -> str:
    """``tl.dot``'s input precision: IEEE unless float32 and ``allow_tf32`` asks for
    ``"tf32"`` (True) or ``"tf32x3"`` (three TF32 products: about float32's accuracy on
    the tensor cores)."""
    if spec.dtype == torch.float64 or spec.allow_tf32 is False:
        return '"ieee"'
    return '"tf32x3"' if spec.allow_tf32 == "tf32x3" else '"tf32"'


def _pow2(k: int) -> int:
    return 1 << max(0, int(k - 1).bit_length())


def generate_source(spec: _Spec, tune: bool, interpret: bool = False) -> str:
    """The Python/Triton source of the kernel ``_kernel`` described by ``spec``
    (``interpret``: for Triton's CPU interpreter, where the sizes are compile-time
    constants -- its ``range`` over a runtime size fails in Triton 3.6)."""
    L = spec.L
    acc = "tl.float64" if spec.dtype == torch.float64 else "tl.float32"
    prec = _prec(spec)
    nvar, npar = len(spec.row_dims), len(spec.par_dims)
    w = _Writer()
    w("import triton", 0)
    w("import triton.language as tl", 0)
    w(_ATAN2, 0)
    if tune:
        w("@triton.autotune(configs=[", 0)
        # 64 x 64 tiles on 4 warps take ~160 registers a thread for RBF, d = 3 (sm_90,
        # compiled offline by bench/triton_offline_compile.py); sums of kernels and the
        # backward spill there: smaller tiles and more warps are among the choices.
        configs = [(64, 64, 4, 3, 0), (64, 64, 8, 3, 0), (128, 64, 8, 3, 0),
                   (32, 64, 4, 3, 0), (32, 32, 4, 3, 0), (64, 32, 4, 3, 0)]
        if _defer_applies(spec):
            # DEFER: K ∘ v accumulated in a [BM, BN] tile, reduced once after the loop.
            # Without it the loop-carried [BM, 1] sums set Triton's layout to 32 rows per
            # warp, one row a thread: each thread loads every column of the tile (one
            # load per pair and feature) and tiles of fewer rows than threads are computed
            # twice or more (sm_90 SASS of the RBF, d = 3, 64 × 64 tiles, 4 warps: 1,530
            # instructions per thread and tile step for 32 distinct pairs). With it the
            # tile is laid out one column a thread: 307 instructions for 32 pairs, one
            # MUFU.EX2 and ~8 FP32 instructions a pair. Rows held per thread cost d
            # registers each: small tiles are among the choices for wide inputs
            configs = [(32, 32, 4, 3, 1), (64, 32, 4, 3, 1), (32, 64, 4, 3, 1),
                       (64, 64, 4, 3, 1), (64, 64, 8, 3, 1), (128, 64, 8, 3, 1),
                       (128, 64, 4, 3, 0), (64, 64, 4, 3, 0)]
        for bm, bn, nw, ns, df in configs:
            w(f"triton.Config({{'BM': {bm}, 'BN': {bn}, 'DEFER': {df}}}, num_warps={nw}, "
              f"num_stages={ns}),", 1)
        w("], key=['tune_key'], reset_to_zero=['GP'])", 0)
    w("@triton.jit", 0)
    params = [f"X{a}" for a in range(nvar)] + [f"Y{a}" for a in range(nvar)]
    params += [f"NY{a}" for a in sorted(L.matrix)]  # ‖y‖² of the wide variables
    params += [f"P{b}" for b in range(npar)]
    sizes = ["n: tl.constexpr", "m: tl.constexpr", "r: tl.constexpr", "rs16: tl.constexpr"
             ] if interpret else ["n", "m", "r", "rs16"]
    params += ["A", "B", "O", "GR", "GP", *sizes, "tune_key", "BM: tl.constexpr",
               "BN: tl.constexpr", "RB: tl.constexpr", "DEFER: tl.constexpr"]
    w(f"def _kernel({', '.join(params)}):", 0)
    w("pid = tl.program_id(0)", 1)
    w("rows = pid * BM + tl.arange(0, BM)", 1)
    w("rmask = rows < n", 1)
    ix = ".to(tl.int64)" if spec.idx64 else ""
    w(f"ri = tl.minimum(rows, n - 1){ix}", 1)
    instrs = L.instrs
    need = _needed(L)
    kind = spec.kind

    def name(k):
        op, args, _ = instrs[k]
        if op == "const":
            return _lit(args[0])
        return f"v{k}"

    # loads of row variables (hoisted) and hyperparameters
    for a in range(nvar):
        d = spec.row_dims[a]
        if a in L.matrix:
            da = _pow2(d)
            w(f"fa{a} = tl.arange(0, {da})", 1)
            w(f"xt{a} = tl.load(X{a} + ri[:, None] * {d} + fa{a}[None, :], "
              f"mask=fa{a}[None, :] < {d}, other=0.0).to({acc})", 1)
            w(f"nx{a} = _tk_sum(xt{a} * xt{a}, axis=1, keep_dims=True)", 1)
    for k in need:
        op, args, shape = instrs[k]
        if op == "xrow":
            a, f = args[:2]
            w(f"v{k} = tl.load(X{a} + ri * {spec.row_dims[a]} + {f}).to({acc})[:, None]"
              f"{_scaled(args)}", 1)
        elif op == "par":
            b, f = args
            w(f"v{k} = tl.load(P{b} + {f}).to({acc})", 1)
        elif op == "nrow":
            a = args[0]
            w(f"v{k} = nx{a}", 1)
    pre = [k for k in need if instrs[k][2] in ("c", "i") and instrs[k][0] not in
           ("xrow", "par", "nrow", "const")]
    for k in pre:
        w(f"v{k} = {_expr(L, k, name)}", 1)
    loop = [k for k in need if instrs[k][2] in ("j", "ij")]
    out = L.out
    rc_fma = spec.r_mode == "fma"
    # accumulators
    if kind == "gram":
        w("pj = tl.program_id(1)", 1)
        w("cols = pj * BN + tl.arange(0, BN)", 1)
        w("cmask = cols < m", 1)
        w(f"cj = tl.minimum(cols, m - 1){ix}", 1)
        _emit_cols(w, L, spec, loop, name, acc, 1)
        w(f"kv = {_tile(L, out, name, acc)}", 1)
        w("tl.store(O + ri[:, None] * m + cj[None, :], kv, mask=rmask[:, None] & cmask[None, :])", 1)
        return "\n".join(w.lines) + "\n"
    prod = kind == "forward" or spec.want_prod
    if kind == "forward":
        w("pr = tl.program_id(1)", 1)
    if prod:
        if rc_fma:
            for c in range(spec.r):
                w(f"acc{c} = tl.full([BM, 1], 0, {acc})", 1)
                if _defer_prod(spec):
                    w(f"accd{c} = tl.full([BM, BN], 0, {acc})", 1)
        else:
            w("rb = pr * RB + tl.arange(0, RB)" if kind == "forward"
              else "rb = tl.arange(0, RB)", 1)
            w("rbm = rb < r", 1)
            w(f"acc = tl.full([BM, RB], 0, {acc})", 1)
    if kind == "backward":
        # row-side A columns, hoisted in FMA mode
        if rc_fma:
            for c in range(spec.r):
                w(f"a{c} = tl.load(A + ri * {spec.r} + {c}, mask=rmask, other=0.0).to({acc})[:, None]", 1)
        adj_loopcarried = [k for k in need if instrs[k][2] in ("c", "i") and _diff(L, k, spec)]
        for k in adj_loopcarried:
            shp = "[BM, 1]" if instrs[k][2] == "i" else "[1, 1]"
            w(f"ga{k} = tl.full({shp}, 0, {acc})", 1)
            if _defer_applies(spec):
                w(f"gad{k} = tl.full([BM, BN], 0, {acc})", 1)
        for a in L.matrix:
            if spec.want_rows:
                w(f"gm{a} = tl.full([BM, {_pow2(spec.row_dims[a])}], 0, {acc})", 1)
    w("for c0 in range(0, m, BN):", 1)
    w("cols = c0 + tl.arange(0, BN)", 2)
    w("cmask = cols < m", 2)
    w(f"cj = tl.minimum(cols, m - 1){ix}", 2)
    _emit_cols(w, L, spec, loop, name, acc, 2)
    w(f"kv = {_tile(L, out, name, acc)}", 2)
    # the product with the column-side matrix B
    if prod:
        if rc_fma:
            for c in range(spec.r):
                w(f"b{c} = tl.load(B + cj * {spec.r} + {c}, mask=cmask, other=0.0).to({acc})[None, :]", 2)
                if _defer_prod(spec):
                    w("if DEFER:", 2)
                    w(f"accd{c} += kv * b{c}", 3)
                    w("else:", 2)
                    w(f"acc{c} += _tk_sum(kv * b{c}, axis=1, keep_dims=True)", 3)
                else:
                    w(f"acc{c} += _tk_sum(kv * b{c}, axis=1, keep_dims=True)", 2)
        else:
            if kind == "forward":  # V zero-padded by _launch: no mask, vector loads
                w(f"bt = tl.load(B + cols{ix}[:, None] * (rs16 * 16) + rb[None, :])"
                  f".to({acc})", 2)
            else:
                w(f"bt = tl.load(B + cj[:, None] * r + rb[None, :], mask=cmask[:, None] & "
                  f"rbm[None, :], other=0.0).to({acc})", 2)
            w(f"acc += tl.dot(kv, bt, input_precision={prec}, out_dtype={acc})", 2)
    if kind == "backward":
        if rc_fma:
            if not prod:
                for c in range(spec.r):
                    w(f"b{c} = tl.load(B + cj * {spec.r} + {c}, mask=cmask, other=0.0).to({acc})[None, :]", 2)
            w("W = " + " + ".join(f"a{c} * b{c}" for c in range(spec.r)), 2)
        elif spec.dtype == torch.float64:
            # W = A Bᵀ by FMAs, one column pair at a time: float64 tl.dot(at, tl.trans(b))
            # (the tensor cores' DMMA) gave wrong gradients on an H100 (Triton 3.6)
            w(f"W = tl.full([BM, BN], 0, {acc})", 2)
            w("for c in range(0, r):", 2)
            w(f"W += (tl.load(A + ri * r + c, mask=rmask, other=0.0).to({acc})[:, None] * "
              f"tl.load(B + cj * r + c, mask=cmask, other=0.0).to({acc})[None, :])", 3)
        elif spec.want_prod:  # one chunk of r holds all columns
            w(f"at = tl.load(A + ri[:, None] * r + rb[None, :], mask=rmask[:, None] & "
              f"rbm[None, :], other=0.0).to({acc})", 2)
            w(f"W = tl.dot(at, tl.trans(bt), input_precision={prec}, out_dtype={acc})", 2)
        else:
            w(f"W = tl.full([BM, BN], 0, {acc})", 2)
            w("for r0 in range(0, r, RB):", 2)
            w("rb2 = r0 + tl.arange(0, RB)", 3)
            w(f"at = tl.load(A + ri[:, None] * r + rb2[None, :], mask=rmask[:, None] & "
              f"(rb2[None, :] < r), other=0.0).to({acc})", 3)
            w(f"bt2 = tl.load(B + cj[:, None] * r + rb2[None, :], mask=cmask[:, None] & "
              f"(rb2[None, :] < r), other=0.0).to({acc})", 3)
            w(f"W += tl.dot(at, tl.trans(bt2), input_precision={prec}, out_dtype={acc})", 3)
        _emit_adjoints(w, L, spec, name, acc, prec, inloop=True)
    # after the loop
    if kind == "backward":
        summed = [k for k in need if instrs[k][2] in ("c", "i") and _diff(L, k, spec)]
        if _defer_applies(spec) and summed:
            w("if DEFER:", 1)
            for k in summed:
                w(f"ga{k} += " + _REDUCE[("ij", instrs[k][2])].format(f"gad{k}"), 2)
        _emit_adjoints(w, L, spec, name, acc, prec, inloop=False)
    if prod:
        if rc_fma:
            for c in range(spec.r):
                if _defer_prod(spec):
                    w("if DEFER:", 1)
                    w(f"acc{c} = _tk_sum(accd{c}, axis=1, keep_dims=True)", 2)
                w(f"tl.store(O + ri * {spec.r} + {c}, tl.reshape(acc{c}, [BM]), mask=rmask)", 1)
        else:
            w("tl.store(O + ri[:, None] * r + rb[None, :], acc, mask=rmask[:, None] & rbm[None, :])", 1)
    return "\n".join(w.lines) + "\n"


def _tile(L: _Lowered, k: int, name, acc) -> str:
    """Instruction k as a [BM, BN] tile (broadcast when it depends on rows or columns
    alone, or on neither)."""
    if L.instrs[k][2] == "ij":
        return name(k)
    return f"({name(k)}) + tl.full([BM, BN], 0, {acc})"


def _needed(L: _Lowered):
    """SSA indices reachable from the output, in order."""
    keep = set()
    stack = [L.out]
    while stack:
        k = stack.pop()
        if k in keep:
            continue
        keep.add(k)
        op, args, _ = L.instrs[k]
        if op not in ("const", "xrow", "xcol", "par", "sqd", "dot", "nrow", "ncol"):
            stack.extend(args)
    return sorted(keep)


def _diff(L: _Lowered, k: int, spec) -> bool:
    """Whether instruction k depends on something the backward differentiates (row
    variables when their gradient is wanted, hyperparameters when theirs is)."""
    memo = L.__dict__.setdefault("_diffmemo", {})
    key = (k, spec.want_rows, spec.want_par)
    if key in memo:
        return memo[key]
    op, args, _ = L.instrs[k]
    if op in ("xrow", "nrow"):
        res = spec.want_rows
    elif op in ("sqd", "dot"):
        res = spec.want_rows
    elif op == "par":
        res = spec.want_par
    elif op in ("const", "xcol", "ncol"):
        res = False
    else:
        res = any(_diff(L, a, spec) for a in args)
    memo[key] = res
    return res


def _scaled(args) -> str:
    """The factor σ of a variable load folded from an exponential (_Lowered._folds)."""
    return f" * {_lit(args[2])}" if len(args) == 3 else ""


def _emit_cols(w, L, spec, loop, name, acc, ind):
    """Loads of the column variables of this tile and the tile's instructions."""
    instrs = L.instrs
    for a in sorted(L.matrix):
        d = spec.row_dims[a]
        w(f"yt{a} = tl.load(Y{a} + cj[:, None] * {d} + fa{a}[None, :], "
          f"mask=fa{a}[None, :] < {d}, other=0.0).to({acc})", ind)
    prec = _prec(spec)
    for k in loop:
        op, args, _ = instrs[k]
        if op == "xcol":
            a, f = args[:2]
            w(f"v{k} = tl.load(Y{a} + cj * {spec.row_dims[a]} + {f}).to({acc})[None, :]"
              f"{_scaled(args)}", ind)
        elif op == "ncol":
            a = args[0]
            w(f"v{k} = tl.load(NY{a} + cj).to({acc})[None, :]", ind)
        elif op == "dot":
            a = args[0]
            w(f"v{k} = tl.dot(xt{a}, tl.trans(yt{a}), input_precision={prec}, out_dtype={acc})", ind)
        elif op == "sqd":
            a = args[0]
            w(f"ny{a} = tl.load(NY{a} + cj).to({acc})[None, :]", ind)
            w(f"v{k} = tl.maximum(nx{a} + ny{a} - 2.0 * tl.dot(xt{a}, tl.trans(yt{a}), "
              f"input_precision={prec}, out_dtype={acc}), 0.0, "
              f"propagate_nan=tl.PropagateNan.ALL)", ind)
        else:
            w(f"v{k} = {_expr(L, k, name)}", ind)


def _emit_adjoint_sum(w, spec, k, tile, reduced, ind):
    """Add a contribution to the loop-summed adjoint ``ga<k>``: its [BM, BN] ``tile``
    into ``gad<k>`` under DEFER (reduced after the loop), else the ``reduced`` form."""
    if tile is not None and _defer_applies(spec):
        w("if DEFER:", ind)
        w(f"gad{k} += {tile}", ind + 1)
        w("else:", ind)
        w(f"ga{k} += {reduced}", ind + 1)
    else:
        w(f"ga{k} += {reduced}", ind)


def _emit_adjoints(w, L, spec, name, acc, prec, inloop: bool):
    """Reverse accumulation: in the loop over the column tiles of instructions of shape j
    and ij (seeded with W at the output); after it, of those of shape c and i, whose
    adjoints were summed over the loop (``ga<k>``)."""
    instrs = L.instrs
    need = _needed(L)
    ind = 2 if inloop else 1
    mine = [k for k in need if (instrs[k][2] in ("j", "ij")) == inloop and _diff(L, k, spec)]
    contrib = {k: [] for k in need}
    out = L.out
    if inloop and _diff(L, out, spec) and instrs[out][2] in ("j", "ij"):
        contrib[out].append(("W", "ij"))
    for k in reversed(mine):
        op, args, shape = instrs[k]
        parts = contrib[k]
        if not parts and not (not inloop and instrs[k][2] in ("c", "i")):
            continue
        terms = []
        for src, sshape in parts:
            if sshape != shape:
                src = _REDUCE[(sshape, shape)].format(src)
            terms.append(src)
        if not inloop:
            terms.append(f"ga{k}")
        g = f"g{k}"
        w(f"{g} = " + " + ".join(terms), ind)
        if op == "xrow":
            continue  # stored after the loop
        if op == "par":
            continue
        if op == "sqd" or op == "dot":
            a = args[0]
            if spec.want_rows:
                if op == "sqd":
                    w(f"gm{a} += 2.0 * (_tk_sum({g}, axis=1, keep_dims=True) * xt{a} - "
                      f"tl.dot({g}, yt{a}, input_precision={prec}, out_dtype={acc}))", ind)
                else:
                    w(f"gm{a} += tl.dot({g}, yt{a}, input_precision={prec}, out_dtype={acc})", ind)
            continue
        if op == "nrow":
            a = args[0]
            if spec.want_rows:
                w(f"gm{a} += 2.0 * {g} * xt{a}", ind)
            continue
        for child, src in _partials(L, k, g, name):
            if not _diff(L, child, spec):
                continue
            cshape = instrs[child][2]
            if inloop and cshape in ("c", "i"):
                red = src if shape == cshape else _REDUCE[(shape, cshape)].format(src)
                _emit_adjoint_sum(w, spec, child, src if shape == "ij" else None, red, ind)
            else:
                contrib[child].append((src, shape))
    if inloop:
        # the output itself of shape c or i: its adjoint is summed W
        if _diff(L, out, spec) and instrs[out][2] in ("c", "i"):
            _emit_adjoint_sum(w, spec, out, "W", _REDUCE[("ij", instrs[out][2])].format("W"),
                              ind)
        return
    # stores: row-variable gradients and hyperparameter partial sums
    if spec.want_rows:
        for k in need:
            op, args, _ = instrs[k]
            if op == "xrow" and _diff(L, k, spec):
                a, f = args
                w(f"tl.store(GR + ri * {_gr_width(spec)} + {_gr_off(spec, a) + f}, "
                  f"tl.reshape(g{k}, [BM]), mask=rmask)", 1)
        for a in sorted(L.matrix):
            d = spec.row_dims[a]
            w(f"tl.store(GR + ri[:, None] * {_gr_width(spec)} + {_gr_off(spec, a)} + "
              f"fa{a}[None, :], gm{a}, mask=rmask[:, None] & (fa{a}[None, :] < {d}))", 1)
    if spec.want_par:
        width = sum(spec.par_dims)
        offs = [sum(spec.par_dims[:b]) for b in range(len(spec.par_dims))]
        for k in need:
            op, args, _ = instrs[k]
            if op == "par":
                b, f = args
                w(f"tl.store(GP + pid * {width} + {offs[b] + f} + tl.full([1, 1], 0, tl.int32), "
                  f"g{k})", 1)


def _gr_width(spec):
    return sum(spec.row_dims)


def _gr_off(spec, a):
    return sum(spec.row_dims[:a])


# --------------------------------------------------------------------------------------
# Compilation cache and launches
# --------------------------------------------------------------------------------------

_MODULES: dict = {}
_LOCK = threading.Lock()


def _gen_dir():
    from .native import cache_dir
    path = cache_dir() / "triton-gen"
    path.mkdir(mode=0o700, exist_ok=True)
    return path


def _compile(spec: _Spec, interpret: bool):
    """The generated kernel of ``spec``: compiled by Triton for CUDA (autotuned), or run by
    its CPU interpreter (``interpret``). ``triton.jit`` chooses between the two when it
    decorates, from ``TRITON_INTERPRET``: the variable is set to match while the
    generated module is loaded, and the generated code calls none of triton.language's
    @jit helpers (decorated in whichever mode was on when triton was imported), so CUDA
    and interpreted kernels live in one process whatever the order of imports."""
    tune = not interpret and os.environ.get("TORCHKERN_TRITON_AUTOTUNE", "1") != "0"
    src = (f"# {'interpreted' if interpret else 'compiled'}\n"
           + generate_source(spec, tune, interpret))
    h = hashlib.sha256(src.encode()).hexdigest()[:24]
    with _LOCK:
        if h in _MODULES:
            return _MODULES[h]
        path = _gen_dir() / f"tk_{h}.py"
        if not path.exists() or path.read_text() != src:
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(src)
            os.replace(tmp, path)
        modname = f"torchkern_triton_gen_{h}"
        mspec = importlib.util.spec_from_file_location(modname, path)
        mod = importlib.util.module_from_spec(mspec)
        sys.modules[modname] = mod  # triton.jit reads the source through the module
        old = os.environ.get("TRITON_INTERPRET")
        os.environ["TRITON_INTERPRET"] = "1" if interpret else "0"
        try:
            mspec.loader.exec_module(mod)
        finally:
            if old is None:
                del os.environ["TRITON_INTERPRET"]
            else:
                os.environ["TRITON_INTERPRET"] = old
        _MODULES[h] = (mod._kernel, tune)
        return _MODULES[h]


_INTERP_TILE = 16
_UNTUNED_TILE = 32  # CUDA without autotuning: small tiles compile fast and spill little


_BN_MAX = 64  # every configuration's BN divides it (the tiles above, _INTERP_TILE ≤ 64)


def _rb(spec, r: int) -> int:
    """The chunk of V's columns a program takes (RB)."""
    return 16 if spec.r_mode == "fma" else min(64, max(16, _pow2(r)))


def _padded_v(spec, B, m: int, r: int):
    """The product's V in tl.dot mode zero-padded to whole column tiles and chunks (rows
    to a multiple of _BN_MAX, columns of RB), and its row stride / 16: the kernel then
    loads V's tiles unmasked, 16-byte vectors along a row (sm_90 SASS, RBF d = 3,
    r = 16: the masked loads' predicates and address arithmetic were ~3 of 32
    instructions a pair). O((m + 64) r) memory, one copy of V."""
    if not (spec.kind == "forward" and spec.r_mode == "dot"):
        return B, 0
    rpad = -(-r // _rb(spec, r)) * _rb(spec, r)
    Bp = B.new_zeros(-(-m // _BN_MAX) * _BN_MAX, rpad)
    Bp[:m, :r] = B
    return Bp, rpad // 16


def _launch(spec, rows, cols, ps, A, B, O, GR, GP, n, m, r):
    kern, tune = _compile(spec, interpret=rows[0].device.type == "cpu")
    RB = _rb(spec, r)
    B, rs16 = _padded_v(spec, B, m, r)
    # unused pointers get a buffer of their own: the autotuner zeroes GP between trials
    dummy = torch.zeros(1, dtype=rows[0].dtype, device=rows[0].device)
    # ‖y‖² of each wide variable once, O(m d), not per row tile: in the loop it cost a
    # cross-thread reduction and a layout change per tile (sm_90 SASS, RBF d = 64: ~14 of
    # 99 instructions a pair)
    norms = [(cols[a] * cols[a]).sum(1) for a in sorted(spec.L.matrix)]
    args = [*rows, *cols, *norms, *ps, A if A is not None else dummy, B if B is not None else dummy,
            O if O is not None else dummy, GR if GR is not None else dummy,
            GP if GP is not None else dummy, n, m, r, rs16, int(n * m >= 2 ** 26)]
    if spec.kind == "forward":
        ny = 1 if spec.r_mode == "fma" else -(-r // RB)
        grid_fn = (lambda meta: (-(-n // meta["BM"]), ny))
    elif spec.kind == "gram":
        grid_fn = (lambda meta: (-(-n // meta["BM"]), -(-m // meta["BN"])))
    else:
        grid_fn = (lambda meta: (-(-n // meta["BM"]),))
    if tune:
        kern[grid_fn](*args, RB=RB)
    else:
        t = _INTERP_TILE if rows[0].device.type == "cpu" else _UNTUNED_TILE
        kern[grid_fn({"BM": t, "BN": t})](
            *args, BM=t, BN=t, RB=RB,
            DEFER=int(_untuned_defer(spec, rows[0].device.type == "cpu")))


def _defer_applies(spec) -> bool:
    """Whether the kernel has a DEFER variant: sums over columns kept as [BM, BN] tiles
    and reduced after the loop (products with few right-hand sides; the backward in FMA
    mode, for its row and hyperparameter adjoints)."""
    return spec.r_mode == "fma" and (
        (spec.kind == "forward" and spec.r <= DEFER_MAX_R) or spec.kind == "backward")


def _defer_prod(spec) -> bool:
    return spec.r_mode == "fma" and spec.r <= DEFER_MAX_R and (
        spec.kind == "forward" or spec.want_prod)


def _untuned_defer(spec, interpret: bool) -> bool:
    """DEFER of the one configuration run without autotuning (the tests; both modes)."""
    return _defer_applies(spec)


def _tile_rows(n: int, device) -> int:
    """Programs of the backward for n rows (an upper bound on the row tiles of any
    configuration), the row count of the hyperparameter partial sums."""
    t = _INTERP_TILE if torch.device(device).type == "cpu" else 32
    return -(-n // t)


def _fast_ok(xs, ys):
    """Per variable: whether ‖x‖² + ‖y‖² − 2⟨x, y⟩ keeps its round-off ε·(max‖x‖² +
    max‖y‖²) within the dtype's bound, ``_config.fast_form_max_roundoff`` (as
    :func:`kernels._ops.fast_form_dtype`)."""
    out = []
    for x, y in zip(xs, ys):
        if x.shape[1] < MATRIX_MIN_D:
            out.append(False)
            continue
        with torch.no_grad():
            s = float((x * x).sum(1).max()) + float((y * y).sum(1).max())
        out.append(torch.finfo(x.dtype).eps * s <= fast_form_max_roundoff(x.dtype))
    return out


def _lower(fn, xs, ys, ps, swap=False, fold=False):
    row, col = (ys, xs) if swap else (xs, ys)
    try:
        root = trace(fn, [x.shape[1] for x in row], [y.shape[1] for y in col],
                     [p.numel() for p in ps], swap)
    except NotImplementedError:
        raise
    except Exception as exc:  # a formula that calls torch on its variables, ...
        raise NotImplementedError(f"the Triton engine cannot trace this formula "
                                  f"({type(exc).__name__}: {exc})") from exc
    return _Lowered(root, [x.shape[1] for x in row], [p.numel() for p in ps],
                    _fast_ok(row, col), fold)


def _prep(ts, dtype):
    return [t.detach().to(dtype).contiguous() for t in ts]


def _check(xs, ys, ps, V=None):
    dtype = xs[0].dtype
    if dtype not in (torch.float32, torch.float64):
        raise TypeError(f"the Triton engine computes in float32 or float64, got {dtype}")
    for t in (*xs, *ys, *ps, *(() if V is None else (V,))):
        if t.device != xs[0].device:
            raise ValueError(f"all tensors must be on {xs[0].device}, got one on {t.device}")


def _r_mode(r):
    return "fma" if r <= FMA_MAX_R else "dot"


def _forward(fn, xs, ys, ps, V, allow_tf32, swap=False, L=None):
    """K V (``swap``: Kᵀ V, rows the ys) with one launch."""
    rows, cols = (ys, xs) if swap else (xs, ys)
    n, m, r = rows[0].shape[0], cols[0].shape[0], V.shape[1]
    dtype = xs[0].dtype
    out = torch.zeros(n, r, dtype=dtype, device=V.device)
    if n == 0 or r == 0 or m == 0:
        return out
    L = L or _lower(fn, xs, ys, ps, swap, fold=True)
    dims = [x.shape[1] for x in rows]
    spec = _Spec(L, dims, [p.numel() for p in ps], dtype, "forward", _r_mode(r), r, False,
                 False, False, allow_tf32, _idx64(n, m + _BN_MAX, dims, r + 64))
    _launch(spec, _prep(rows, dtype), _prep(cols, dtype), _prep(ps, dtype), None,
            _prep([V], dtype)[0], out, None, None, n, m, r)
    return out


def _backward_rows(fn, xs, ys, ps, A, B, want_rows, want_par, want_prod, allow_tf32,
                   swap=False):
    """One backward launch with rows ``xs`` (``swap``: ``ys``): the gradients of
    ⟨A, K B⟩ to the row variables and the hyperparameters, and K B (``want_prod``)."""
    rows, cols = (ys, xs) if swap else (xs, ys)
    n, m, r = rows[0].shape[0], cols[0].shape[0], A.shape[1]
    dtype = xs[0].dtype
    dev = A.device
    L = _lower(fn, xs, ys, ps, swap)
    r_mode = _r_mode(r)
    fused_prod = want_prod and (r_mode == "fma" or r <= 64)
    dims = [x.shape[1] for x in rows]
    spec = _Spec(L, dims, [p.numel() for p in ps], dtype, "backward",
                 r_mode, r, want_rows, want_par, fused_prod, allow_tf32, _idx64(n, m, dims, r))
    width = sum(x.shape[1] for x in rows)
    GR = torch.zeros(n, width, dtype=dtype, device=dev) if want_rows else None
    npar = sum(p.numel() for p in ps)
    GP = (torch.zeros(_tile_rows(n, dev), max(npar, 1), dtype=dtype, device=dev)
          if want_par else None)
    O = torch.zeros(n, r, dtype=dtype, device=dev) if fused_prod else None
    if n and m and r and (want_rows or want_par or fused_prod):
        _launch(spec, _prep(rows, dtype), _prep(cols, dtype), _prep(ps, dtype),
                _prep([A], dtype)[0], _prep([B], dtype)[0], O, GR, GP, n, m, r)
    if want_prod and not fused_prod:
        O = _forward(fn, xs, ys, ps, B, allow_tf32, swap=swap)
    grow = None
    if want_rows:
        grow, s = [], 0
        for x in rows:
            grow.append(GR[:, s:s + x.shape[1]])
            s += x.shape[1]
    gpar = None
    if want_par:
        tot = GP.sum(0)
        gpar, s = [], 0
        for p in ps:
            gpar.append(tot[s:s + p.numel()].reshape(p.shape))
            s += p.numel()
    return grow, gpar, O


class _TritonMatmul(torch.autograd.Function):
    """out = K V by one generated Triton launch; backward by two (rows X: gradients to X
    and the hyperparameters; rows Y: Kᵀ G and the gradient to Y), or one for K(X, X)."""

    @staticmethod
    def forward(ctx, fn, nx, ny, allow_tf32, V, *tensors):
        xs, ys, ps = tensors[:nx], tensors[nx:nx + ny], tensors[nx + ny:]
        ctx.fn, ctx.nx, ctx.ny, ctx.allow_tf32 = fn, nx, ny, allow_tf32
        # K(X, X): the same tensors on both sides (kernels are symmetric, as
        # Formula.transpose assumes) -- the backward then needs one launch, see below
        ctx.sym = nx == ny and all(x is y for x, y in zip(xs, ys))
        ctx.save_for_backward(V, *tensors)
        return _forward(fn, xs, ys, ps, V, allow_tf32)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, G):
        V, *tensors = ctx.saved_tensors
        nx, ny, fn = ctx.nx, ctx.ny, ctx.fn
        xs, ys, ps = tensors[:nx], tensors[nx:nx + ny], tensors[nx + ny:]
        need = ctx.needs_input_grad
        need_V = need[4]
        need_x = any(need[5:5 + nx])
        need_y = any(need[5 + nx:5 + nx + ny])
        need_p = any(need[5 + nx + ny:])
        G = G.contiguous()
        gx = gp = gy = gV = None
        if ctx.sym and (need_x or need_y or need_p):
            # x_i enters row i and column i: with k symmetric its gradient is
            # Σ_j ∂₁k(x_i, x_j) (W + Wᵀ)_ij, W = G Vᵀ, and W + Wᵀ = [G V] [V G]ᵀ: one launch
            # with 2r columns; the hyperparameters' reduction against W + Wᵀ counts each
            # term twice (halved); K [V G] gives Kᵀ G = K G in its last r columns.
            r = V.shape[1]
            fuse = need_V and 2 * r <= 64
            A, B = torch.cat([G, V.to(G.dtype)], 1), torch.cat([V.to(G.dtype), G], 1)
            gx, gp, O = _backward_rows(fn, xs, ys, ps, A, B, need_x or need_y, need_p, fuse,
                                       ctx.allow_tf32)
            gp = None if gp is None else [0.5 * g for g in gp]
            if need_V:
                gV = O[:, r:] if fuse else _forward(fn, xs, ys, ps, G, ctx.allow_tf32, swap=True)
            grads = [gx[a].to(xs[a].dtype) if gx is not None and (need[5 + a] or need[5 + nx + a])
                     else None for a in range(nx)] + [None] * ny
            grads += [gp[b].to(ps[b].dtype) if gp is not None and need[5 + nx + ny + b] else None
                      for b in range(len(ps))]
            return (None, None, None, None, gV if need_V else None, *grads)
        if need_x or need_p:
            gx, gp, _ = _backward_rows(fn, xs, ys, ps, G, V, need_x, need_p, False,
                                       ctx.allow_tf32)
        if need_y or need_V:
            gy, _, gV = _backward_rows(fn, xs, ys, ps, V, G, need_y, False, need_V,
                                       ctx.allow_tf32, swap=True)
        grads = []
        for a in range(nx):
            grads.append(gx[a].to(xs[a].dtype) if gx is not None and need[5 + a] else None)
        for a in range(ny):
            grads.append(gy[a].to(ys[a].dtype) if gy is not None and need[5 + nx + a] else None)
        for b in range(len(ps)):
            grads.append(gp[b].to(ps[b].dtype) if gp is not None and need[5 + nx + ny + b]
                         else None)
        return (None, None, None, None, gV if need_V else None, *grads)


def matmul(fn, xs, ys, ps, V, allow_tf32: bool | str = False) -> torch.Tensor:
    """K V for k(x_i, y_j) = ``fn(xs, ys, ps)`` (a :class:`~torchkern.gram.Formula`'s parts),
    one generated Triton launch; differentiable in V and in every tensor of xs, ys, ps
    (gradients by two fused launches). V is (m, r). ``allow_tf32=True`` lets ``tl.dot``
    round its float32 inputs to TF32 (10-bit mantissa) in the ‖x − y‖² of wide inputs and
    in the product with V; ``"tf32x3"`` splits each input into two TF32 parts and sums
    three products (about float32's accuracy, on the tensor cores). Raises
    NotImplementedError for formulas it cannot emit."""
    if allow_tf32 not in (False, True, "tf32x3"):
        raise ValueError(f"allow_tf32 must be False, True or 'tf32x3', got {allow_tf32!r}")
    xs, ys, ps = tuple(xs), tuple(ys), tuple(p.reshape(-1) for p in ps)
    _check(xs, ys, ps, V)
    _lower(fn, xs, ys, ps)  # trace now: an unsupported op raises before autograd records
    V = V.to(xs[0].dtype)
    return _TritonMatmul.apply(fn, len(xs), len(ys), allow_tf32, V, *xs, *ys, *ps)


def gram(fn, xs, ys, ps) -> torch.Tensor:
    """The stored (n, m) block K(xs, ys) written by one generated launch (one tile per
    program) from the same code as :func:`matmul`; not differentiable (callers that need
    gradients evaluate the formula with torch)."""
    xs, ys, ps = tuple(xs), tuple(ys), tuple(p.reshape(-1) for p in ps)
    _check(xs, ys, ps)
    n, m = xs[0].shape[0], ys[0].shape[0]
    dtype = xs[0].dtype
    out = torch.empty(n, m, dtype=dtype, device=xs[0].device)
    if n == 0 or m == 0:
        return out
    L = _lower(fn, xs, ys, ps, fold=True)
    dims = [x.shape[1] for x in xs]
    spec = _Spec(L, dims, [p.numel() for p in ps], dtype, "gram",
                 "fma", 1, False, False, False, False, _idx64(n, m, dims, 1, gram=True))
    _launch(spec, _prep(xs, dtype), _prep(ys, dtype), _prep(ps, dtype), None, None, out,
            None, None, n, m, 1)
    return out
