"""Radial kernels keep the accuracy of the difference form ‖x − y‖² = Σ (x_k − y_k)² on
every backend, for data far from the origin (offset) and data spread over many
lengthscales, against float64 closed forms on the same (float32-exact) data."""
import json
import math
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

import torchkern as tk
from torchkern.kernels import _ops

KERNELS = {
    "rbf": lambda ell: tk.RBF(ell),
    "laplacian": lambda ell: tk.Laplacian(ell),
    "matern52": lambda ell: tk.Matern(2.5, ell),
    "rq": lambda ell: tk.RationalQuadratic(ell, alpha=1.5),
    "imq": lambda ell: tk.InverseMultiquadric(ell, c=0.8),
}
NATIVE = {"rbf", "laplacian", "matern52"}  # the compiled backend's C++ loop sums differences


def _cdist(X, Y):
    # torch.cdist's default switches to the matrix-product form beyond 25 rows
    return torch.cdist(X, Y, compute_mode="donot_use_mm_for_euclid_dist")


def _closed_form(name, d2):
    r = d2.sqrt()
    if name == "rbf":
        return torch.exp(-d2 / 2)
    if name == "laplacian":
        return torch.exp(-r)
    if name == "matern52":
        return (1 + math.sqrt(5) * r + 5 / 3 * d2) * torch.exp(-math.sqrt(5) * r)
    if name == "rq":
        return (1 + d2 / 3.0) ** -1.5
    return (d2 + 0.64) ** -0.5


def _reference(name, X, Y, ell):
    """float64 closed form from torch.cdist (a difference form) on the float64 data."""
    return _closed_form(name, _cdist(X.double() / ell, Y.double() / ell) ** 2)


def _line(R, n=120, dtype=torch.float32, seed=0):
    """n random points on [0, R], each with a neighbour 0.5 further (the pairs whose kernel
    values matter), and a second coordinate in [0, 1]."""
    g = torch.Generator().manual_seed(seed)
    p = torch.rand(n, generator=g, dtype=torch.float64) * R
    X = torch.stack([torch.cat([p, p + 0.5]), torch.rand(2 * n, generator=g, dtype=torch.float64)], 1)
    return X.to(dtype)


def _gram(k, X, backend, Y=None):
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore", tk.gram.CompiledFallbackWarning)
        K = k(X, Y, backend=backend)
        if backend == "dense":
            return K.to_dense()
        return K @ torch.eye(K.shape[1], dtype=X.dtype)


def _backends(name):
    return ["dense", "blocked"] + (["compiled"] if name in NATIVE else [])


@pytest.mark.parametrize("R", [1e3, 1e4])
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_float32_spread_data_has_difference_form_accuracy(name, R):
    # lengthscale 1: the float32 data are exact, so the error is the evaluation's alone.
    # The difference form (KeOps, the native loop, or the float64 reference rounded to
    # float32) is within ~2e-7 here; the fast form in float32 was off by 1.7e-2 (R = 1e3)
    # and 0.63 (R = 1e4) for the RBF. 1e-6 is 8 float32 epsilons.
    X = _line(R)
    ref = _reference(name, X, X, 1.0)
    k = KERNELS[name](1.0)
    for backend in _backends(name):
        err = (_gram(k, X, backend).double() - ref).abs().max().item()
        assert err < 1e-6, (backend, err)


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_float32_spread_data_with_inexact_lengthscale_as_accurate_as_differences(name):
    # With ℓ = 0.7 the float32 division x / ℓ itself rounds coordinates by ε·|x|/ℓ, which
    # every backend inherits (2e-4..3.5e-4 at R = 1e4, the same on the native loop and
    # KeOps): dense and blocked must match the error of the float32 difference form on
    # the same scaled data (computed here directly), not add the fast form's 0.6.
    X = _line(1e4, seed=1)
    ref = _reference(name, X, X, 0.7)
    x = X / torch.tensor(0.7, dtype=torch.float32)
    d2 = ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1)  # float32 differences
    diff_form = (_closed_form(name, d2.double()) - ref).abs().max().item()
    assert 1e-5 < diff_form < 1e-3
    for backend in _backends(name):
        err = (_gram(KERNELS[name](0.7), X, backend).double() - ref).abs().max().item()
        assert err < 1.5 * diff_form + 1e-6, (backend, err, diff_form)


@pytest.mark.parametrize("dtype,offset", [(torch.float32, 1e3), (torch.float32, 1e4),
                                          (torch.float64, 1e8)])
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_offset_data_loses_no_precision(name, dtype, offset):
    # Centring at the joint mean is exact for offset data (Sterbenz), so neither the
    # lengthscale division nor the fast form pays for the offset: the error is the one of
    # the same data at the origin (float32: 1e-7 by differences, up to 1.1e-6 by the fast
    # form, whose bound is _ops.FAST_FORM_MAX_ROUNDOFF = 1.5e-5). Before, x / ℓ rounded
    # the offset: 1e-3 at 1e4 in float32.
    g = torch.Generator().manual_seed(2)
    X = (offset + torch.randn(150, 3, generator=g, dtype=torch.float64)).to(dtype)
    Y = (offset + torch.randn(90, 3, generator=g, dtype=torch.float64)).to(dtype)
    X0, Y0 = X - offset, Y - offset  # exact (Sterbenz): the same differences at the origin
    ref = _reference(name, X0, Y0, 0.7)
    k = KERNELS[name](0.7)
    for backend in _backends(name):
        at_origin = (_gram(k, X0, backend, Y0).double() - ref).abs().max().item()
        err = (_gram(k, X, backend, Y).double() - ref).abs().max().item()
        assert err < 2 * at_origin + 10 * torch.finfo(dtype).eps, (backend, err, at_origin)
        assert err < (4e-6 if dtype == torch.float32 else 1e-14), (backend, err)


def test_centring_is_exact_and_only_where_it_is():
    X = torch.tensor([[1e4 + 0.1, 0.5, -3e3], [1.2e4, 800.0, -4e3], [2e4, 0.25, -1e4]],
                     dtype=torch.float32)
    Xc, none = _ops.center(X)
    c = X[0] - Xc[0]
    assert none is None
    assert c[1] == 0  # values from 0.25 to 800: centring would round the small ones
    assert c[0] != 0 and c[2] != 0  # one sign within a factor 4: Sterbenz-exact
    assert torch.equal(X.double() - c.double(), Xc.double())


def test_fast_form_precision_follows_the_spread():
    # seeded, norms well inside 8 lengthscales (unseeded randn(50, 3) * 2 exceeded the
    # float32 bound, max‖x‖ = 8, in ~5 % of runs)
    small = torch.randn(50, 3, generator=torch.Generator().manual_seed(4))
    assert small.norm(dim=1).max() < 6
    assert _ops.fast_form_dtype(small) == torch.float32
    assert _ops.fast_form_dtype(small * 100) == torch.float64
    assert _ops.fast_form_dtype(small.double() * 1e6) is None  # beyond float64: differences


def _rq_grads(X, Y, V, backend=None):
    """Gradients of ‖K V‖² to X, Y and the raw (softplus) lengthscale and alpha of
    RationalQuadratic(1.3, alpha=0.8): torchkern's on ``backend``, or (None) the float64
    closed form on torch.cdist."""
    X, Y = X.clone().requires_grad_(), Y.clone().requires_grad_()
    k = tk.RationalQuadratic(1.3, alpha=0.8)
    if backend is None:
        raw = [p.detach().clone().requires_grad_() for p in (k.raw_lengthscale, k.raw_alpha)]
        ell, alpha = (torch.nn.functional.softplus(r) for r in raw)
        K = (1 + _cdist(X, Y) ** 2 / (2 * alpha * ell ** 2)) ** -alpha
        out = K @ V
    else:
        raw = [k.raw_lengthscale, k.raw_alpha]
        out = k(X, Y, backend=backend) @ V
    (out * out).sum().backward()
    return [X.grad, Y.grad] + [r.grad for r in raw]


@pytest.mark.parametrize("dtype,scale,mode", [(torch.float32, 300.0, torch.float64),
                                              (torch.float64, 1e6, None)])
def test_gradients_in_the_accurate_modes(dtype, scale, mode):
    # float32 data spread over hundreds of lengthscales (evaluated in float64) and float64
    # data spread so far that the fast form falls back to exact differences: gradients to
    # X, Y and the hyperparameters equal those of the float64 closed form.
    g = torch.Generator().manual_seed(3)
    X = (torch.rand(40, 2, generator=g, dtype=torch.float64) * scale).to(dtype)
    Y = X[:30] + torch.randn(30, 2, generator=g, dtype=torch.float64).to(dtype)
    V = torch.randn(30, 2, generator=g, dtype=torch.float64).to(dtype)
    f = tk.RationalQuadratic(1.3, alpha=0.8).formula(X, Y)
    assert _ops.fast_form_dtype(f.xs[0], f.ys[0]) == mode
    ref = _rq_grads(X.double(), Y.double(), V.double())
    tol = 1e-4 if dtype == torch.float32 else 1e-10
    for backend in ("dense", "blocked"):
        for a, b in zip(_rq_grads(X, Y, V, backend), ref):
            assert ((a.double() - b).norm() / b.norm()).item() < tol, backend


def test_blocked_accurate_mode_allocates_no_gram_matrix():
    # float32 data spread over 10^4 lengthscales (evaluated in float64) and float64 data
    # over 10^7 (exact differences): the blocked product stays within its row blocks.
    code = textwrap.dedent("""
        import json, resource, torch, torchkern as tk
        n, m = 40_000, 1_000
        out = {}
        for dtype, R in ((torch.float32, 1e4), (torch.float64, 1e7)):
            X = torch.rand(n, 2, dtype=torch.float64).mul(R).to(dtype)
            Y, V = X[:m].clone(), torch.randn(m, 1, dtype=dtype)
            before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            r = tk.RBF(1.0)(X, Y, backend="blocked") @ V
            grow = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
            ref = torch.exp(-torch.cdist(X[:50].double(), Y.double(),
                            compute_mode="donot_use_mm_for_euclid_dist") ** 2 / 2) @ V.double()
            out[str(dtype)] = (grow, (r[:50].double() - ref).abs().max().item())
        print(json.dumps(out))
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    for dtype, (grow_mb, err) in json.loads(res.stdout.strip().splitlines()[-1]).items():
        dense_mb = 40_000 * 1_000 * 8 / 2**20  # 305 MB in float64
        assert grow_mb < dense_mb / 4, (dtype, grow_mb)
        assert err < 1e-5, (dtype, err)
