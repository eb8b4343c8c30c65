"""The generated Triton engine (torchkern._compiled.triton) against dense torch.

On the CPU the kernels run in Triton's interpreter; on CUDA, where a GPU is present
(tests/_devices.py), compiled. Triton (3.9) reads ``TRITON_INTERPRET`` when ``triton.jit``
decorates a function: the engine sets it while it loads a generated module (interpreted
for CPU tensors, compiled for CUDA ones), and its kernels call none of triton.language's
own @jit helpers (``tl.sum``, ``tl.zeros``), which are decorated once, when triton is
imported — in a test run that happens early, by ``torch._dynamo`` — and fail in the other
mode. So the order of imports does not matter and both modes share one process. The
variable itself says that the CPU may use the engine at all (``available``): the CPU
tests set it for their own duration only (for the whole process, it would make every
other Triton user in it, torch.compile on CUDA, run interpreted). Each case compares K V, and the gradients of ⟨G, K V⟩ to X, Y, V and every
hyperparameter, with the dense Gram matrix and autograd through it. Sizes are not
multiples of the tile (16 under the interpreter). Skipped only when triton is not
installed (on Linux, where the test extra installs it, never).
"""
import math
import sys
import warnings

import pytest  # noqa: E402
import torch  # noqa: E402

if sys.platform.startswith("linux"):
    import triton  # noqa: E402,F401  (in the test extra on Linux: never skipped there)
else:
    pytest.importorskip("triton")  # triton ships wheels for Linux only

import torchkern as tk  # noqa: E402
from torchkern._compiled import triton as engine  # noqa: E402
from torchkern.gram import Formula, FormulaKernelMatrix  # noqa: E402
from torchkern.ntk import NTK  # noqa: E402

from ._devices import DEVICES  # noqa: E402

DEVS = ["cpu"] + [d for d in DEVICES if d != "cpu"]
TOL = {torch.float32: 2e-5, torch.float64: 1e-11}


@pytest.fixture(autouse=True)
def _interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # the CPU cases (CUDA kernels: compiled)
    monkeypatch.setenv("TORCHKERN_TRITON_AUTOTUNE", "0")  # CUDA: one compile per kernel


@pytest.fixture(params=DEVS)
def dev(request):
    return torch.device(request.param)


def _close(a, b, dtype, what, tol=None):
    tol = TOL[dtype] if tol is None else tol
    scale = float(b.detach().abs().max()) if b.numel() else 1.0
    err = float((a.detach() - b.detach()).abs().max()) if b.numel() else 0.0
    assert err <= tol * max(scale, 1.0), f"{what}: max error {err:.3e} (scale {scale:.3e})"


def _check(kernel, n, m, d, r, dtype, dev, seed=0, grads=True, tol=None, uniform=False):
    g = torch.Generator().manual_seed(seed)
    kernel = kernel.to(dtype=dtype, device=dev)
    draw = torch.rand if uniform else torch.randn
    X = draw(n, d, generator=g, dtype=dtype).to(dev).requires_grad_(grads)
    Y = draw(m, d, generator=g, dtype=dtype).to(dev).requires_grad_(grads)
    V = torch.randn(m, r, generator=g, dtype=dtype).to(dev).requires_grad_(grads)
    f = kernel.formula(X, Y)
    out = engine.matmul(f.fn, f.xs, f.ys, f.ps, V)
    with torch.no_grad():  # the reference: the dense Gram matrix
        Kd = kernel(X, Y, backend="dense").to_dense()
    _close(out, Kd @ V, dtype, "K V", tol)
    if not grads:
        return
    G = torch.randn(n, r, generator=g, dtype=dtype).to(dev)
    wrt = [X, Y, V] + [p for p in kernel.parameters() if p.requires_grad]
    got = torch.autograd.grad((out * G).sum(), wrt, allow_unused=True)
    Kg = kernel(X, Y, backend="dense").to_dense()
    ref = torch.autograd.grad(((Kg @ V) * G).sum(), wrt, allow_unused=True)
    names = ["X", "Y", "V"] + [nm for nm, p in kernel.named_parameters() if p.requires_grad]
    for nm, a, b in zip(names, got, ref):
        if b is None:
            assert a is None or float(a.abs().max()) == 0.0, nm
            continue
        _close(a, b, dtype, f"grad {nm}", tol)


# ---- every formula family, float32 and float64, edge tiles ---------------------------

FAMILIES = {
    "rbf": lambda: tk.RBF(lengthscale=0.7),
    "rbf_ard": lambda: tk.RBF(lengthscale=torch.tensor([0.5, 1.0, 2.0])),
    "laplacian": lambda: tk.Laplacian(lengthscale=0.8),
    "matern12": lambda: tk.Matern(nu=0.5, lengthscale=1.2),
    "matern32_ard": lambda: tk.Matern(nu=1.5, lengthscale=torch.tensor([0.5, 1.0, 2.0])),
    "matern52": lambda: tk.Matern(nu=2.5, lengthscale=0.9),
    "rq": lambda: tk.RationalQuadratic(lengthscale=0.8, alpha=0.7),
    "imq": lambda: tk.InverseMultiquadric(lengthscale=1.1, c=0.6),
    "periodic_ard": lambda: tk.Periodic(lengthscale=torch.tensor([0.5, 1.0, 2.0]), period=1.3),
    "linear": lambda: tk.Linear(),
    "poly": lambda: tk.Polynomial(degree=3, offset=0.5),
    "exponential": lambda: tk.Exponential(scale=0.4),
    "arccos0": lambda: tk.ArcCosine(order=0),
    "arccos1": lambda: tk.ArcCosine(order=1),
    "arccos2": lambda: tk.ArcCosine(order=2),
    "sum_prod_scale": lambda: 2.0 * tk.RBF(lengthscale=0.5) + tk.Matern(nu=1.5) * tk.Linear(),
    # beyond the list: histogram kernels (min through abs, elem) and the analytic
    # NTK of an MLP (arc-cosine recursions)
    "min": lambda: tk.Min(),
    "chi2": lambda: tk.Chi2(),
    "ntk": lambda: NTK(depth=2),
}
NONNEGATIVE = {"min", "chi2"}  # kernels of histograms: data in [0, 1)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_families_float64(name, dev):
    _check(FAMILIES[name](), 17, 20, 3, 3, torch.float64, dev, uniform=name in NONNEGATIVE)


@pytest.mark.parametrize("name", ["rbf_ard", "matern52", "periodic_ard", "poly", "arccos1",
                                  "sum_prod_scale"])
def test_families_float32(name, dev):
    tol = 2e-4 if name == "arccos1" else None  # ‖x‖‖y‖ sin θ: cancellation in float32
    _check(FAMILIES[name](), 17, 20, 3, 17, torch.float32, dev, tol=tol)


@pytest.mark.parametrize("r", [1, 15, 16, 65])
def test_right_hand_sides(r, dev):
    # r <= 8: one FMA reduction per column; above: tl.dot, in chunks of 64 for r = 65
    _check(tk.RBF(lengthscale=0.6), 17, 18, 2, r, torch.float64, dev)


@pytest.mark.parametrize("n,m", [(1, 1), (1, 17), (17, 1)])
def test_single_rows(n, m, dev):
    _check(tk.Matern(nu=2.5, lengthscale=0.9) + tk.Linear(), n, m, 3, 2, torch.float64, dev)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_wide_inputs_by_dot(dtype, dev):
    # d = 20: ‖x − y‖² and ⟨x, y⟩ by tl.dot (matrix mode); Matérn stays on differences
    x = 0.3 * torch.randn(4, 20, dtype=dtype)
    L = engine._lower(tk.RBF(lengthscale=3.0).formula(x).fn, [x], [x], [])
    assert L.matrix == {0}
    _check(tk.RBF(lengthscale=3.0), 33, 40, 20, 3, dtype, dev)
    _check(tk.Polynomial(degree=2, offset=1.0) + tk.Matern(nu=1.5, lengthscale=3.0),
           33, 20, 20, 20, dtype, dev, seed=1)


def test_large_one_formula(dev):
    # n = 1000 (not a multiple of any tile) for one formula; forward only under the
    # interpreter, with larger tiles there (its cost is per tile operation)
    old = engine._INTERP_TILE
    engine._INTERP_TILE = 64
    try:
        _check(tk.RBF(lengthscale=0.5), 1000, 1000, 3, 16, torch.float32, dev, grads=False)
        _check(tk.RBF(lengthscale=0.5), 1000, 300, 3, 2, torch.float64, dev, grads=True)
    finally:
        engine._INTERP_TILE = old


# ---- independent closed forms ---------------------------------------------------------

def test_closed_forms(dev):
    g = torch.Generator().manual_seed(3)
    X = torch.randn(19, 4, generator=g, dtype=torch.float64).to(dev)
    Y = torch.randn(23, 4, generator=g, dtype=torch.float64).to(dev)
    V = torch.randn(23, 2, generator=g, dtype=torch.float64).to(dev)
    D = torch.cdist(X, Y)
    refs = {
        "rbf": (tk.RBF(lengthscale=0.7), torch.exp(-D ** 2 / (2 * 0.7 ** 2))),
        "matern52": (tk.Matern(nu=2.5, lengthscale=0.9),
                     (1 + math.sqrt(5) * D / 0.9 + 5 * D ** 2 / (3 * 0.81))
                     * torch.exp(-math.sqrt(5) * D / 0.9)),
    }
    nx, ny = X.norm(dim=1)[:, None], Y.norm(dim=1)[None, :]
    theta = torch.acos(((X @ Y.T) / (nx * ny)).clamp(-1, 1))
    refs["arccos1"] = (tk.ArcCosine(order=1),
                       nx * ny * (torch.sin(theta) + (math.pi - theta) * torch.cos(theta))
                       / math.pi)
    for name, (k, K) in refs.items():
        k = k.to(dtype=torch.float64, device=dev)
        f = k.formula(X, Y)
        _close(engine.matmul(f.fn, f.xs, f.ys, f.ps, V), K @ V, torch.float64, name, 1e-10)
        _close(engine.gram(f.fn, f.xs, f.ys, f.ps), K, torch.float64, name + " gram", 1e-10)


# ---- the backend, the Gram writer, errors ----------------------------------------------

def test_backend_triton(dev):
    g = torch.Generator().manual_seed(4)
    X = torch.randn(30, 3, generator=g, dtype=torch.float32).to(dev)
    V = torch.randn(30, 2, generator=g, dtype=torch.float32).to(dev)
    k = (tk.RBF(lengthscale=0.8) + tk.Periodic(period=2.0)).to(device=dev)
    K = k(X, backend="triton")
    assert isinstance(K, FormulaKernelMatrix) and K.backend == "triton"
    Kd = k(X, backend="dense").to_dense()
    _close(K @ V, Kd @ V, torch.float32, "K @ V")
    _close(K.T @ V, Kd.T @ V, torch.float32, "K.T @ V")
    idx = torch.tensor([0, 7, 29])
    _close(K.rows(idx), Kd[idx.to(dev)], torch.float32, "rows")
    _close(K.submatrix(idx, torch.arange(5, 22)), Kd[idx.to(dev)][:, 5:22], torch.float32,
           "submatrix")


def test_unsupported_op_raises_and_backend_falls_back():
    X = torch.randn(5, 2, dtype=torch.float64)
    f = Formula((X,), (X,), (), lambda xs, ys, ps: ((xs[0] - ys[0]) ** 2).sum(-1).tanh())
    with pytest.raises(NotImplementedError, match="'tanh'"):
        engine.matmul(f.fn, f.xs, f.ys, f.ps, torch.ones(5, 1, dtype=torch.float64))
    with pytest.raises(NotImplementedError, match="x \\*\\* 1.5"):
        engine.matmul(lambda xs, ys, ps: ((xs[0] - ys[0]) ** 2).sum(-1) ** 1.5, f.xs, f.ys,
                      f.ps, torch.ones(5, 1, dtype=torch.float64))
    with pytest.raises(ValueError, match="allow_tf32"):
        engine.matmul(f.fn, f.xs, f.ys, f.ps, torch.ones(5, 1, dtype=torch.float64),
                      allow_tf32="bf16")
    with pytest.raises(TypeError, match="float32 or float64"):
        engine.matmul(f.fn, [X.half()], [X.half()], [], torch.ones(5, 1).half())


def test_auto_prefers_triton_only_on_cuda(monkeypatch):
    from torchkern.gram import _lazy_backend
    assert tk.config.triton_auto  # on by default
    monkeypatch.setattr(tk.config, "cuda_triton_min_entries", 2500)
    X = torch.randn(50, 2)
    assert _lazy_backend(tk.RBF().formula(X)) != "triton"  # the CPU: never by auto
    if torch.cuda.is_available():
        Xc = X.cuda()
        assert _lazy_backend(tk.RBF().formula(Xc)) == "triton"  # 50 · 50 entries: enough
        assert _lazy_backend(tk.RBF().formula(Xc[:49])) != "triton"  # below the threshold


def test_atan2_matches_torch(dev):
    # the in-kernel atan2 (range reduction + series) over all octants, float64
    g = torch.Generator().manual_seed(5)
    X = torch.randn(40, 2, generator=g, dtype=torch.float64).to(dev)
    X[0] = 0.0
    X[1] = torch.tensor([0.0, -1.0])
    f = lambda xs, ys, ps: xs[0].elem(0).atan2(ys[0].elem(1))  # noqa: E731
    K = engine.gram(f, [X], [X], [])
    ref = torch.atan2(X[:, :1], X[None, :, 1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _close(K, ref, torch.float64, "atan2", 1e-14)


@pytest.mark.parametrize("r", [3, 40])
def test_symmetric_backward_one_launch(r, dev):
    # K(X, X): one backward launch with [G V] [V G]^T (r = 40: K G by its own launch)
    g = torch.Generator().manual_seed(6)
    k = (tk.RBF(lengthscale=0.8) + tk.RationalQuadratic(alpha=0.5)).to(torch.float64).to(dev)
    X = torch.randn(21, 3, generator=g, dtype=torch.float64).to(dev).requires_grad_(True)
    V = torch.randn(21, r, generator=g, dtype=torch.float64).to(dev).requires_grad_(True)
    G = torch.randn(21, r, generator=g, dtype=torch.float64).to(dev)
    f = k.formula(X)
    assert all(x is y for x, y in zip(f.xs, f.ys))
    out = engine.matmul(f.fn, f.xs, f.ys, f.ps, V)
    wrt = [X, V, *k.parameters()]
    got = torch.autograd.grad((out * G).sum(), wrt)
    ref = torch.autograd.grad(((k(X, backend="dense").to_dense() @ V) * G).sum(), wrt)
    for a, b in zip(got, ref):
        _close(a, b, torch.float64, "symmetric grad")


# formulas constant in i or j or both, abs, negative powers: against dense torch
DEGENERATE = {
    "constant": (lambda xs, ys, ps: ps[0] * 2.0,
                 lambda X, Y, p: (p * 2.0).expand(X.shape[0], Y.shape[0])),
    "rows_only": (lambda xs, ys, ps: (xs[0] * xs[0]).sum(-1) * ps[0],
                  lambda X, Y, p: ((X * X).sum(1, keepdim=True) * p).expand(-1, Y.shape[0])),
    "cols_only": (lambda xs, ys, ps: (ys[0].elem(1) * ps[0]).exp(),
                  lambda X, Y, p: (Y[:, 1][None, :] * p).exp().expand(X.shape[0], -1)),
    "abs": (lambda xs, ys, ps: 5.0 - (xs[0] - ys[0]).abs().sum(-1),
            lambda X, Y, p: 5.0 - (X[:, None] - Y[None]).abs().sum(-1)),
    "neg_power": (lambda xs, ys, ps: (((xs[0] - ys[0]) ** 2).sum(-1) + 1.0) ** -2,
                  lambda X, Y, p: (torch.cdist(X, Y) ** 2 + 1) ** -2),
}


@pytest.mark.parametrize("name", sorted(DEGENERATE))
def test_degenerate_formulas(name, dev):
    fn, dense = DEGENERATE[name]
    g = torch.Generator().manual_seed(7)
    X, Y = (torch.randn(k, 3, generator=g, dtype=torch.float64).to(dev).requires_grad_(True)
            for k in (17, 20))
    p = torch.tensor([0.7], dtype=torch.float64, device=dev, requires_grad=True)
    V = torch.randn(20, 2, generator=g, dtype=torch.float64).to(dev).requires_grad_(True)
    G = torch.randn(17, 2, generator=g, dtype=torch.float64).to(dev)
    out = engine.matmul(fn, [X], [Y], [p], V)
    ref = dense(X, Y, p) @ V
    _close(out, ref, torch.float64, name)
    got = torch.autograd.grad((out * G).sum(), [X, Y, p, V], allow_unused=True)
    want = torch.autograd.grad((ref * G).sum(), [X, Y, p, V], allow_unused=True)
    for a, b in zip(got, want):
        if b is None:
            assert a is None or float(a.abs().max()) == 0.0
        else:
            _close(a, b, torch.float64, name + " grad")


def test_untraceable_formula_is_not_implemented():
    # a formula calling torch on its variables: NotImplementedError (the backend then
    # falls back for this formula only), not a TypeError from inside the trace
    X = torch.randn(4, 2, dtype=torch.float64)
    with pytest.raises(NotImplementedError, match="cannot trace"):
        engine.matmul(lambda xs, ys, ps: torch.tanh(((xs[0] - ys[0]) ** 2).sum(-1)), [X], [X],
                      [], torch.ones(4, 1, dtype=torch.float64))


def test_fast_form_only_within_its_roundoff_bound():
    # float32 rows 10 lengthscales out in d = 20 (ε·(max‖x‖² + max‖y‖²) ≈ 1e-3, above
    # FAST_FORM_MAX_ROUNDOFF): ‖x − y‖² by differences, not tl.dot; pairs 1e-2 apart keep
    # K V within 2e-5 of float64 dense torch, where the fast form would be off by ~1e-3
    g = torch.Generator().manual_seed(7)
    X = 10.0 * torch.randn(33, 20, generator=g, dtype=torch.float64)
    Y = X + 1e-2 * torch.randn(33, 20, generator=g, dtype=torch.float64)
    V = torch.randn(33, 2, generator=g, dtype=torch.float64)
    f32 = tk.RBF().formula(X.float(), Y.float())
    assert engine._lower(f32.fn, f32.xs, f32.ys, f32.ps).matrix == set()
    f64 = tk.RBF().formula(X, Y)  # float64: ε·S ≈ 2e-12, tl.dot allowed
    assert engine._lower(f64.fn, f64.xs, f64.ys, f64.ps).matrix == {0}
    ref = torch.exp(-0.5 * torch.cdist(X, Y) ** 2) @ V
    out = engine.matmul(f32.fn, f32.xs, f32.ys, f32.ps, V.float())
    assert float((out.detach().double() - ref).abs().max()) < 2e-5


def test_backend_triton_falls_back_for_an_untraceable_formula(monkeypatch):
    # backend="triton" (as 'auto' picks on CUDA) on a formula the engine cannot trace:
    # one CompiledFallbackWarning, the values of dense torch, the engine still enabled
    from torchkern import gram as gram_mod
    from torchkern.kernels._ops import fsum
    monkeypatch.setitem(gram_mod._COMPILED_STATE, "warned", False)
    # past the compiled backend's torch.compile tiles (seconds of compile) to blocked torch
    monkeypatch.setitem(gram_mod._COMPILED_STATE, "inductor", "not in this test")
    X = torch.randn(9, 2, dtype=torch.float64)
    V = torch.randn(9, 2, dtype=torch.float64)
    f = Formula((X,), (X,), (), lambda xs, ys, ps: torch.tanh(fsum((xs[0] - ys[0]) ** 2)))
    with pytest.warns(gram_mod.CompiledFallbackWarning, match="cannot trace"):
        out = FormulaKernelMatrix(f, "triton") @ V
    assert float((out - torch.tanh(torch.cdist(X, X) ** 2) @ V).abs().max()) < 1e-12
    assert gram_mod._COMPILED_STATE["triton"] is None


def test_tf32x3_inputs(dev):
    # allow_tf32="tf32x3": the wide inputs' ⟨x, y⟩ as three TF32 products, about float32's
    # accuracy (on the CPU the interpreter computes it in float32): K V against float64
    g = torch.Generator().manual_seed(9)
    X = 0.3 * torch.randn(37, 20, generator=g, dtype=torch.float64)
    V = torch.randn(37, 2, generator=g, dtype=torch.float64)
    f = tk.RBF(lengthscale=2.0).formula(X.float().to(dev))
    assert engine._lower(f.fn, f.xs, f.ys, f.ps).matrix == {0}
    out = engine.matmul(f.fn, f.xs, f.ys, f.ps, V.float().to(dev), allow_tf32="tf32x3")
    ref = tk.RBF(lengthscale=2.0)(X, backend="dense").to_dense() @ V
    _close(out.double().cpu(), ref, torch.float32, "K V (tf32x3)")


FOLD_CASES = {  # formula, dense reference, whether the exponential's scale is folded
    "rbf": (lambda xs, ys, ps: (-0.7 * ((xs[0] - ys[0]) ** 2).sum(-1)).exp(),
            lambda X, Y: torch.exp(-0.7 * torch.cdist(X, Y) ** 2), True),
    # the same distance under a square root too, or under two exponentials: not folded
    "shared_sqrt": (lambda xs, ys, ps: (((xs[0] - ys[0]) ** 2).sum(-1) * -0.5).exp()
                    + (((xs[0] - ys[0]) ** 2).sum(-1) + 1.0).sqrt(),
                    lambda X, Y: torch.exp(-0.5 * torch.cdist(X, Y) ** 2)
                    + (torch.cdist(X, Y) ** 2 + 1).sqrt(), False),
    "two_exps": (lambda xs, ys, ps: (((xs[0] - ys[0]) ** 2).sum(-1) * -0.5).exp()
                 - (((xs[0] - ys[0]) ** 2).sum(-1) * -2.0).exp(),
                 lambda X, Y: torch.exp(-0.5 * torch.cdist(X, Y) ** 2)
                 - torch.exp(-2.0 * torch.cdist(X, Y) ** 2), False),
}


@pytest.mark.parametrize("name", sorted(FOLD_CASES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_exp_scale_folded_into_the_loads(name, dtype, dev):
    # exp(c‖x − y‖²) of a variable used nowhere else is 2^(−‖σx − σy‖²), σ = √(−c log₂e),
    # in the forward and the Gram writer; K V, K and the gradients against dense torch
    fn, dense, folded = FOLD_CASES[name]
    g = torch.Generator().manual_seed(11)
    X, Y = (torch.randn(k, 3, generator=g, dtype=torch.float64) for k in (17, 20))
    V = torch.randn(20, 2, generator=g, dtype=torch.float64)
    L = engine._lower(fn, [X], [Y], [], fold=True)
    ops = [i[0] for i in L.instrs]
    assert ("exp2" in ops) == folded and ("exp" in ops) == (not folded)
    if folded:
        sig = [i[1][2] for i in L.instrs if i[0] in ("xrow", "xcol")]
        assert sig == [pytest.approx(math.sqrt(0.7 * math.log2(math.e)))] * 6
    K = dense(X, Y)
    Xd, Yd, Vd = (t.to(dtype=dtype, device=dev) for t in (X, Y, V))
    Xd.requires_grad_(True)
    out = engine.matmul(fn, [Xd], [Yd], [], Vd)
    _close(out.double().cpu(), K @ V, dtype, name)
    _close(engine.gram(fn, [Xd], [Yd], []).double().cpu(), K, dtype, name + " gram")
    X.requires_grad_(True)
    G = torch.randn(17, 2, generator=g, dtype=torch.float64)
    want = torch.autograd.grad(((dense(X, Y) @ V) * G).sum(), X)[0]
    got = torch.autograd.grad((out * G.to(dtype=dtype, device=dev)).sum(), Xd)[0]
    _close(got.double().cpu(), want, dtype, name + " grad X")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_wide_inputs_column_norms(dtype, dev):
    # d = 20 in matrix mode through ⟨x, y⟩, ‖x‖² and ‖y‖² (the column norms are computed
    # once per launch and loaded by the kernel): K V and the gradients against dense torch
    def fn(xs, ys, ps):
        return ((xs[0] * ys[0]).sum(-1) / (1.0 + (ys[0] * ys[0]).sum(-1))
                + 0.1 * (xs[0] * xs[0]).sum(-1))

    g = torch.Generator().manual_seed(12)
    X, Y = (0.3 * torch.randn(k, 20, generator=g, dtype=torch.float64) for k in (33, 40))
    V = torch.randn(40, 3, generator=g, dtype=torch.float64)
    G = torch.randn(33, 3, generator=g, dtype=torch.float64)
    assert engine._lower(fn, [X], [Y], [], fold=True).matrix == {0}
    X.requires_grad_(True), Y.requires_grad_(True)
    ref = (X @ Y.T / (1 + (Y * Y).sum(1)) + 0.1 * (X * X).sum(1)[:, None]) @ V
    want = torch.autograd.grad((ref * G).sum(), [X, Y])
    Xd, Yd = (t.detach().to(dtype=dtype, device=dev).requires_grad_(True) for t in (X, Y))
    out = engine.matmul(fn, [Xd], [Yd], [], V.to(dtype=dtype, device=dev))
    _close(out.double().cpu(), ref, dtype, "K V")
    got = torch.autograd.grad((out * G.to(dtype=dtype, device=dev)).sum(), [Xd, Yd])
    for nm, a, b in zip("XY", got, want):
        _close(a.double().cpu(), b, dtype, "grad " + nm)


def _clamped_distance(xs, ys, ps):
    # min(√max(s, ε), u) as kernels._ops.safe_sqrt(s, upper=u) writes it for formula types
    # without a clamp (u = 2.5: the bound is active on about half of the pairs below)
    s = ((xs[0] - ys[0]) ** 2).sum(-1)
    inv = 1.0 / 2.5
    r = 1.0 / ((1.0 / ((s - 1e-30).relu() + 1e-30).sqrt() - inv).relu() + inv)
    return (1.0 + r) * (-r).exp()


REWRITES = {  # formula, instructions it must not contain after lowering
    "clamped_distance": (_clamped_distance, ("relu", "div")),
    # divisions by loop-invariant values (a hyperparameter, a row-only value): one
    # reciprocal hoisted out of the loop, a product a pair
    "invariant_divisor": (lambda xs, ys, ps: ((xs[0] - ys[0]) ** 2).sum(-1) / ps[0]
                          + (xs[0] * ys[0]).sum(-1) / (1.0 + (xs[0] * xs[0]).sum(-1)), ()),
}


@pytest.mark.parametrize("name", sorted(REWRITES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_clamps_and_reciprocals_rewritten(name, dtype, dev):
    # relu(x − c) + c → max(x, c), 1/√x → rsqrt, 1/max(a, c) → min(1/a, 1/c), x / b →
    # x · (1/b) for a loop-invariant b: K V and the gradients to X, Y, the hyperparameter
    # and V against the same formula evaluated densely by torch, with autograd
    fn, absent = REWRITES[name]
    g = torch.Generator().manual_seed(13)
    X, Y = (torch.randn(k, 3, generator=g, dtype=torch.float64) for k in (17, 20))
    p = torch.tensor([0.7], dtype=torch.float64)
    V = torch.randn(20, 2, generator=g, dtype=torch.float64)
    G = torch.randn(17, 2, generator=g, dtype=torch.float64)
    L = engine._lower(fn, [X], [Y], [p])
    live = [L.instrs[k] for k in engine._needed(L)]  # (the rewritten forms stay dead)
    assert not {i[0] for i in live} & set(absent), live
    assert all(i[0] != "div" or i[2] in ("c", "i") for i in live)
    ref_in = [t.clone().requires_grad_(True) for t in (X, Y, p, V)]
    K = fn([ref_in[0][:, None]], [ref_in[1][None]], [ref_in[2]])
    ref = K @ ref_in[3]
    want = torch.autograd.grad((ref * G).sum(), ref_in, allow_unused=True)
    got_in = [t.to(dtype=dtype, device=dev).requires_grad_(True) for t in (X, Y, p, V)]
    out = engine.matmul(fn, [got_in[0]], [got_in[1]], [got_in[2]], got_in[3])
    _close(out.double().cpu(), ref, dtype, name)
    got = torch.autograd.grad((out * G.to(dtype=dtype, device=dev)).sum(), got_in,
                              allow_unused=True)
    for nm, a, b in zip(["X", "Y", "p", "V"], got, want):
        if b is None:  # the formula does not use p
            assert a is None or float(a.abs().max()) == 0.0
        else:
            _close(a.double().cpu(), b, dtype, f"{name} grad {nm}")
    if name == "clamped_distance":
        D = torch.cdist(X, Y)
        assert 0.2 < float((D > 2.5).double().mean()) < 0.8


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sin_cos_by_reduction(dtype, dev):
    # sin and cos are the engine's own (Cody-Waite reduction by π, odd series): arguments
    # in ±1000 (k up to ~318 half-turns) against float64 torch on the same values, K by
    # the Gram writer (to 1e-6 in float32, 1e-14 in float64), K V, and the gradients
    # (which use both)
    g = torch.Generator().manual_seed(14)
    X, Y = ((torch.rand(k, 2, generator=g, dtype=dtype) - 0.5) * 2000.0 for k in (33, 40))
    X[0] = torch.tensor([0.0, 1e-30])  # sin 0, cos of a tiny argument
    V = torch.randn(40, 2, generator=g, dtype=torch.float64)

    def fn(xs, ys, ps):
        return (xs[0].sin() * ys[0].cos()).sum(-1)

    Xd, Yd = (t.double().requires_grad_(True) for t in (X, Y))
    K = Xd.sin() @ Yd.cos().T
    Kg = engine.gram(fn, [X.to(dev)], [Y.to(dev)], []).double().cpu()
    assert float((Kg - K.detach()).abs().max()) < (1e-6 if dtype == torch.float32 else 1e-14)
    Xf, Yf = (t.to(dev).requires_grad_(True) for t in (X, Y))
    out = engine.matmul(fn, [Xf], [Yf], [], V.to(dtype=dtype, device=dev))
    _close(out.double().cpu(), K @ V, dtype, "K V")
    G = torch.randn(33, 2, generator=g, dtype=torch.float64)
    want = torch.autograd.grad(((K @ V) * G).sum(), [Xd, Yd])
    got = torch.autograd.grad((out * G.to(dtype=dtype, device=dev)).sum(), [Xf, Yf])
    for nm, a, b in zip("XY", got, want):
        _close(a.double().cpu(), b, dtype, "grad " + nm)


def test_product_reads_v_zero_padded(dev):
    # tl.dot mode: V padded with zeros to whole column tiles and chunks of RB columns, read
    # without masks; m = 65 (a padded tile), r = 17 (chunk 32, 15 zero columns)
    x = torch.randn(3, 2, dtype=torch.float64)
    spec = engine._Spec(engine._lower(tk.RBF().formula(x).fn, [x], [x], []), [2], [],
                        torch.float64, "forward", "dot", 17, False, False, False, False)
    V = torch.randn(65, 17, dtype=torch.float64)
    Vp, rs16 = engine._padded_v(spec, V, 65, 17)
    assert Vp.shape == (128, 32) and rs16 == 2
    assert torch.equal(Vp[:65, :17], V) and not Vp[65:].any() and not Vp[:, 17:].any()
    src = engine.generate_source(spec, False, interpret=True)
    assert "rs16 * 16" in src and "rbm[None, :], other" not in src
    _check(tk.RBF(lengthscale=0.8), 19, 65, 2, 17, torch.float32, dev, grads=False)
