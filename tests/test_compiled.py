"""backend="compiled" (torchkern._compiled) against dense evaluation of the same kernels."""
import warnings

import pytest
import torch

import torchkern as tk
from torchkern import gram
from torchkern._compiled import inductor, native

D64, D32 = torch.float64, torch.float32
TOL = {D64: 1e-10, D32: 2e-5}


def _rel(a, b):
    return ((a - b).norm() / b.norm().clamp_min(1e-300)).item()


def _product_and_grads(kernel, X, Y, V, backend):
    """K(X, Y) V and the gradients of a scalar of it to X, Y, V and the kernel's
    parameters."""
    X, Y, V = (t.detach().clone().requires_grad_(True) for t in (X, Y, V))
    K = kernel(X, Y, backend=backend)
    out = K @ V
    loss = (out * torch.cos(out)).sum()  # a non-linear read-out: G is not all ones
    params = [p for p in kernel.parameters() if p.requires_grad]
    grads = torch.autograd.grad(loss, [X, Y, V, *params], allow_unused=True)
    return K, out.detach(), grads


def _check_equal(kernel, X, Y, V, engine):
    K, out, grads = _product_and_grads(kernel, X, Y, V, "compiled")
    assert K.backend == "compiled"
    _, ref, ref_grads = _product_and_grads(kernel, X, Y, V, "dense")
    tol = TOL[X.dtype]
    assert _rel(out, ref) < tol, engine
    for g, r in zip(grads, ref_grads):
        if r is None:
            continue
        assert g is not None and _rel(g, r) < 10 * tol, engine


@pytest.mark.parametrize("dtype", [D64, D32])
@pytest.mark.parametrize("kernel", [tk.RBF([0.7, 1.3, 0.9]), tk.Laplacian(1.4),
                                    tk.Matern(0.5, 0.8), tk.Matern(1.5, 1.1),
                                    tk.Matern(2.5, [0.6, 1.2, 2.0])],
                         ids=["rbf-ard", "laplacian", "matern12", "matern32", "matern52"])
def test_native_radial_kernels_equal_dense_with_gradients(kernel, dtype):
    # The hand-written C++ loop (exp by a polynomial, gradients by a second fused loop)
    # against torch's dense evaluation of the kernels' own _k. 300 × 250 products are
    # split over threads; the X = Y case puts exact zero distances on the diagonal.
    kernel = kernel.to(dtype)
    assert kernel.formula(torch.zeros(2, 3, dtype=dtype)).profile in native.PROFILES
    g = torch.Generator().manual_seed(1)
    X = torch.randn(300, 3, generator=g, dtype=dtype)
    Y = torch.randn(250, 3, generator=g, dtype=dtype)
    V = torch.randn(250, 2, generator=g, dtype=dtype)
    _check_equal(kernel, X, Y, V, "native")
    # K(X, X): one input on both sides; r = 1 takes the fully fused loop
    _check_equal(kernel, X, X, torch.randn(300, 1, generator=g, dtype=dtype), "native")
    # wide inputs (d = 7) take the loop over a run-time feature count
    Xw = torch.randn(60, 7, generator=g, dtype=dtype)
    k7 = type(kernel)(**({"nu": kernel.nu} if isinstance(kernel, tk.Matern) else {}))
    _check_equal(k7.to(dtype), Xw, Xw[:45] + 0.1, torch.randn(45, 3, generator=g, dtype=dtype),
                 "native")


@pytest.mark.parametrize("dtype", [D64, D32])
def test_scaled_radial_kernels_stay_native(monkeypatch, dtype):
    # c · φ (ScaleKernel of a radial kernel, GPyTorch's usual ScaleKernel(RBF)): the C++
    # loop computes φ and the scale multiplies after — products, gradients (to the
    # outputscale too) and the stored Gram equal torch's dense evaluation; never the
    # torch.compile engine.
    from torchkern._compiled import inductor
    monkeypatch.setattr(inductor, "tiled_matmul", None)  # would raise if it were used
    g = torch.Generator().manual_seed(6)
    X = torch.randn(200, 3, generator=g, dtype=dtype)
    for kernel in (1.7 * tk.RBF([0.7, 1.3, 0.9]), 0.6 * tk.Matern(2.5, 1.2)):
        kernel = kernel.to(dtype)
        assert kernel.formula(X).profile in native.PROFILES
        _check_equal(kernel, X, X[:150] + 0.05, torch.randn(150, 2, generator=g, dtype=dtype),
                     "native")
        assert (2.0 * kernel).formula(X).profile is None  # c₁ · c₂ · φ: not a native form
        monkeypatch.setattr(gram, "_NATIVE_GRAM_MIN_ENTRIES", 0)
        with torch.no_grad():
            K = kernel(X, backend="dense").to_dense()
            ref = kernel(X.double(), backend="blocked").to_dense()
        assert _rel(K.double(), ref) < TOL[dtype]


def test_sums_with_native_terms_split_into_their_terms(monkeypatch):
    # RBF + c·Matern + c·Linear on the CPU: the radial terms on the C++ loop, Linear
    # factored (X Yᵀ);
    # products and gradients (inputs, every hyperparameter) equal the dense evaluation of
    # the whole formula. (Under "compiled" Linear would take the torch.compile tiles: the
    # split only, not its products — each new formula compiles for seconds.)
    backend = "auto"
    monkeypatch.setattr(tk.config, "dense_max_entries", 100)
    monkeypatch.setattr(tk.config, "compiled_min_entries", 100)
    calls = []
    real = native.radial_matmul
    monkeypatch.setattr(native, "radial_matmul", lambda *a: calls.append(a[0]) or real(*a))
    g = torch.Generator().manual_seed(8)
    X = torch.randn(90, 3, generator=g, dtype=D64)
    V = torch.randn(70, 2, generator=g, dtype=D64)
    kernel = (tk.RBF(0.8) + 0.5 * tk.Matern(2.5, 1.3) + 0.2 * tk.Linear()).to(D64)
    K, out, grads = _product_and_grads(kernel, X, X[:70] + 0.1, V, backend)
    assert isinstance(K, tk.gram.SumKernelMatrix) and K.backend == "compiled+features"
    assert calls == ["gauss", "matern52"]
    Kc = kernel(X, backend="compiled")
    assert isinstance(Kc, tk.gram.SumKernelMatrix) and Kc.backend == "compiled"
    _, ref, ref_grads = _product_and_grads(kernel, X, X[:70] + 0.1, V, "dense")
    assert _rel(out, ref) < 1e-10
    for gr, r in zip(grads, ref_grads):
        assert gr is not None and _rel(gr, r) < 1e-9


def _zoo():
    """Every kernel on vectors in one formula: one compile per dtype (compiles cost
    seconds each; a test per kernel would cost minutes)."""
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Softplus())
    torch.manual_seed(3)
    return (tk.RBF(0.9) + 0.7 * tk.Laplacian(1.3) + tk.Matern(1.5, 1.1) * tk.Periodic(1.2, 2.5)
            + tk.Matern(2.5, [0.8, 1.0, 1.5]) + tk.Matern(0.5, 2.0)
            + tk.RationalQuadratic(1.1, 0.7) + tk.InverseMultiquadric(0.9, 1.3)
            + 0.3 * tk.Linear() + 0.1 * tk.Polynomial(3, 0.5) + tk.Exponential(0.2)
            + tk.ArcCosine(0) + tk.ArcCosine(1) + 0.5 * tk.ArcCosine(2)
            + tk.Min() + tk.HistogramIntersection() + tk.Chi2(0.8)
            + tk.FeatureKernel(net, tk.RBF(1.5)))


@pytest.mark.parametrize("dtype", [D64, D32])
def test_torch_compile_tiles_equal_dense_on_the_whole_zoo(dtype):
    # A sum has no native profile: it goes through the torch.compile tiles. Gradients to
    # inputs, V, every hyperparameter and the feature network's weights. n = 40 rows and
    # m = 70 columns are padded to one 64 × 128 tile.
    kernel = _zoo().to(dtype)
    assert kernel.formula(torch.ones(2, 3, dtype=dtype)).profile is None
    g = torch.Generator().manual_seed(2)
    X = torch.rand(40, 3, generator=g, dtype=dtype) + 0.05  # Min, Chi2: non-negative data
    Y = torch.rand(70, 3, generator=g, dtype=dtype) + 0.05
    V = torch.randn(70, 2, generator=g, dtype=dtype)
    _check_equal(kernel, X, Y, V, "inductor")


def test_recompiles_at_most_once_per_shape_bucket():
    from torch._dynamo.utils import counters

    def graphs():
        return counters["stats"]["unique_graphs"]

    def product(kernel, n, m, r=1):
        X, Y = torch.randn(n, 2, dtype=D64), torch.randn(m, 2, dtype=D64)
        V = torch.randn(m, r, dtype=D64)
        out = kernel(X, Y, backend="compiled") @ V
        torch.testing.assert_close(out, kernel(X, Y, backend="dense").to_dense() @ V)

    k = tk.RBF(0.8) + tk.Linear()  # a sum: the torch.compile engine
    before = graphs()
    product(k, 20, 100)
    assert graphs() == before + 1  # the bucket (32 rows, 128 columns, r = 1)
    product(k, 30, 128)
    product(k, 17, 65)
    product(tk.RBF(1.7) + tk.Linear(), 25, 90)  # another instance, other hyperparameters
    assert graphs() == before + 1
    product(k, 30, 130)  # 130 columns: the next bucket
    product(k, 31, 250)
    assert graphs() == before + 2
    product(k, 30, 130, r=2)  # r rounds up to powers of two: r = 2 is a bucket of its own
    product(k, 30, 130, r=2)
    assert graphs() == before + 3
    assert inductor.tile_shape(10**6, 10**6, 3, "cpu") == (256, 4096, 4)


def test_falls_back_once_with_a_warning_when_nothing_compiles(monkeypatch, tmp_path):
    # No C++ compiler (an empty cache directory and a compiler that does not exist) and
    # a torch.compile that fails: one CompiledFallbackWarning, then the blocked products,
    # with the same values and gradients.
    monkeypatch.setenv("TORCHKERN_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-compiler"))
    monkeypatch.setattr(native, "_STATE", {"lib": None, "error": None, "seconds": None})
    monkeypatch.setattr(gram, "_COMPILED_STATE", {"native": None, "inductor": None,
                                                  "warned": False})

    def broken(name, *args):
        raise RuntimeError("simulated: InvalidCxxCompiler")

    monkeypatch.setattr(inductor, "_call", broken)
    X = torch.randn(50, 3, dtype=D64)
    V = torch.randn(50, 2, dtype=D64)
    with pytest.warns(gram.CompiledFallbackWarning, match="no-such-compiler") as rec:
        _check_equal(tk.RBF(0.8), X, X, V, "fallback")
    assert len(rec) == 1 and "native" in str(rec[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # silent from now on
        _check_equal(tk.RBF(0.8) + tk.Linear(), X, X, V, "fallback")
        _check_equal(tk.Matern(2.5), X, X, V, "fallback")
    assert "InvalidCxxCompiler" in gram._COMPILED_STATE["inductor"]
    assert "no-such-compiler" in native._STATE["error"]
    # and "auto" no longer picks the backend that cannot compile
    monkeypatch.setattr(tk.config, "dense_max_entries", 100)
    monkeypatch.setattr(tk.config, "compiled_min_entries", 100)
    assert tk.RBF()(X).backend == "blocked"


def test_auto_picks_compiled_for_large_radial_products_on_the_cpu(monkeypatch):
    X = torch.randn(120, 3)
    monkeypatch.setattr(tk.config, "dense_max_entries", 100)
    assert tk.RBF()(X).backend == "blocked"  # below config.compiled_min_entries
    monkeypatch.setattr(tk.config, "compiled_min_entries", 120 * 120)
    K = tk.RBF(0.6)(X)
    assert K.backend == "compiled"
    v = torch.randn(120)
    torch.testing.assert_close(K @ v, tk.RBF(0.6)(X, backend="dense").to_dense() @ v)
    assert tk.Matern(2.5)(X).backend == "compiled"
    # measured slower than blocked on the CPU: the torch.compile engine (others)
    assert tk.RationalQuadratic()(X).backend == "blocked"
    assert (tk.RationalQuadratic() + tk.Linear())(X).backend == "blocked"
    # a sum with a native term: that term fused, the others blocked
    assert (tk.RBF() + tk.Matern(1.5) * tk.Linear())(X).backend == "blocked+compiled"
    monkeypatch.setattr(tk.config, "compiled_auto", False)
    assert tk.RBF()(X).backend == "blocked"
    with pytest.raises(ValueError, match="compiled"):
        tk.set_backend("compile")


def test_auto_on_cuda_picks_compiled_from_its_own_threshold(monkeypatch):
    # Without KeOps, CUDA products use the Triton tiles from config.cuda_compiled_min_entries
    # on (any formula), blocked torch below; the CPU threshold does not apply there.
    from types import SimpleNamespace
    monkeypatch.setattr(gram, "keops_available", lambda device: False)
    monkeypatch.setattr(gram, "_triton_usable", lambda formula: False)  # (it comes first)
    monkeypatch.setattr(tk.config, "compiled_min_entries", 1)
    cuda = torch.device("cuda")
    f = lambda n: SimpleNamespace(shape=(n, n), device=cuda, needs_float64=None)  # noqa: E731
    limit = tk.config.cuda_compiled_min_entries
    assert gram._lazy_backend(f(int(limit**0.5) - 1)) == "blocked"
    assert gram._lazy_backend(f(int(limit**0.5) + 1)) == "compiled"
    monkeypatch.setattr(tk.config, "compiled_auto", False)
    assert gram._lazy_backend(f(int(limit**0.5) + 1)) == "blocked"


def test_keops_cuda_verdict_is_cached_on_disk(monkeypatch, tmp_path):
    # The child-process KeOps check runs once per machine and versions, not per process.
    monkeypatch.setenv("TORCHKERN_CACHE_DIR", str(tmp_path))
    calls = []
    key = {"k": "pykeops 2.3 | torch 2.13 | cuda 13.0 | driver 580 | NVIDIA H200"}
    monkeypatch.setattr(gram, "_cuda_probe_key", lambda device: key["k"])
    monkeypatch.setattr(gram, "_probe_keops_cuda",
                        lambda: calls.append(1) or "a test KeOps CUDA reduction failed")
    assert gram._keops_cuda_verdict("cuda") == "a test KeOps CUDA reduction failed"
    assert gram._keops_cuda_verdict("cuda") == "a test KeOps CUDA reduction failed"
    assert len(calls) == 1 and (tmp_path / "keops-cuda-probe.json").exists()
    key["k"] = key["k"].replace("driver 580", "driver 590")  # a new driver: check again
    monkeypatch.setattr(gram, "_probe_keops_cuda", lambda: calls.append(1) or None)
    assert gram._keops_cuda_verdict("cuda") is None
    assert gram._keops_cuda_verdict("cuda") is None and len(calls) == 2


@pytest.mark.parametrize("dtype", [D64, D32])
def test_stored_gram_of_radial_kernels_is_written_by_the_native_loop(monkeypatch, dtype):
    # Above gram._NATIVE_GRAM_MIN_ENTRIES a stored Gram matrix (outside autograd) of a
    # native radial kernel is written by the C++ loop; it must equal the float64 torch
    # evaluation to the dtype's rounding. A blocked matrix's to_dense in float32 stays with
    # the torch evaluation: entry for entry the matrix its lazy products use.
    calls = []
    real = native.radial_gram
    monkeypatch.setattr(native, "radial_gram", lambda *a: calls.append(a[0]) or real(*a))
    monkeypatch.setattr(gram, "_NATIVE_GRAM_MIN_ENTRIES", 0)
    g = torch.Generator().manual_seed(3)
    for d in (3, 8, 11):  # unrolled widths and the generic loop
        X = torch.randn(130, d, generator=g, dtype=D64)
        Y = torch.randn(70, d, generator=g, dtype=D64)
        for kernel in (tk.RBF(1.3), tk.Laplacian(0.9), tk.Matern(1.5, lengthscale=1.1),
                       tk.Matern(2.5, lengthscale=0.7)):
            with torch.no_grad():
                K = kernel(X.to(dtype), Y.to(dtype), backend="dense").to_dense()
                Kb = kernel(X.to(dtype), Y.to(dtype), backend="blocked").to_dense()
            f = kernel.formula(X, Y)
            ref = gram._eval_torch(f.fn, f.xs, f.ys, f.ps).detach()
            assert K.dtype == dtype and _rel(K.double(), ref) < TOL[dtype], (kernel, d)
            f32 = kernel.formula(X.to(dtype), Y.to(dtype))
            if dtype == D32:  # float64: the blocked to_dense may take the C++ loop too
                assert torch.equal(Kb, gram._eval_torch(f32.fn, f32.xs, f32.ys, f32.ps)), (
                    kernel, d)
    names = ["gauss", "laplace", "matern32", "matern52"] * 3
    assert calls == ([n for n in names for _ in (0, 1)] if dtype == D64 else names)


def test_native_float32_gram_is_more_accurate_than_the_torch_evaluation(monkeypatch):
    # The C++ loop sums squared differences; torch's float32 evaluation expands
    # ‖x‖² + ‖y‖² − 2xᵀy and loses digits to cancellation on points far from the origin.
    monkeypatch.setattr(gram, "_NATIVE_GRAM_MIN_ENTRIES", 0)
    g = torch.Generator().manual_seed(5)
    X = 30 + torch.randn(300, 4, generator=g, dtype=D64)
    with torch.no_grad():
        K32 = tk.RBF(1.0)(X.float(), backend="dense").to_dense()
        Kb32 = tk.RBF(1.0)(X.float(), backend="blocked").to_dense()
    # entries of the float32 inputs: the float64 Gram of the rounded points
    ref = tk.RBF(1.0)(X.float().double(), backend="dense").to_dense()
    err_native = (K32.double() - ref).abs().max().item()
    err_torch = (Kb32.double() - ref).abs().max().item()
    assert err_native < 1e-6 and err_native < err_torch / 4, (err_native, err_torch)
