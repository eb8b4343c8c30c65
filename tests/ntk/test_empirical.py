"""Empirical NTK: torch.func paths against per-sample autograd, the infinite-width limit,
and the kernel in estimators."""
import numpy as np
import pytest
import torch
from torch import nn

import torchkern
from torchkern.ntk import NTK, EmpiricalNTK, empirical_ntk

from ._nets import autograd_ntk, ntk_mlp


def _cnn():
    torch.manual_seed(1)
    return nn.Sequential(nn.Conv2d(1, 3, 3), nn.Tanh(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(3 * 3 * 3, 2)).double()


def _mlp():
    torch.manual_seed(2)
    return nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 3)).double()


@pytest.mark.parametrize("make, shape", [(_mlp, (4,)), (_cnn, (1, 8, 8))])
@pytest.mark.parametrize("method", ["jacobian", "vjp-jvp"])
def test_methods_match_the_autograd_double_loop(make, shape, method):
    net = make()
    X1 = torch.randn(5, *shape, dtype=torch.float64)
    X2 = torch.randn(4, *shape, dtype=torch.float64)
    ref = autograd_ntk(net, X1, X2)                      # (5, 4, o, o)
    o = ref.shape[-1]
    full = empirical_ntk(net, X1, X2, method=method, output="full")
    assert full.shape == (5, 4, o, o)
    torch.testing.assert_close(full, ref, rtol=1e-12, atol=1e-12)
    trace = empirical_ntk(net, X1, X2, method=method)
    torch.testing.assert_close(trace, ref.diagonal(dim1=2, dim2=3).sum(-1) / o,
                               rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(empirical_ntk(net, X1, X2, method="auto"), trace)
    # Chunked (uneven chunks) and symmetric (one triangle of chunk pairs) paths.
    ref_sym = autograd_ntk(net, X1, X1).diagonal(dim1=2, dim2=3).sum(-1) / o
    for chunk in (2, 3):
        torch.testing.assert_close(empirical_ntk(net, X1, X2, method=method, output="full",
                                                 chunk_size=chunk), ref, rtol=1e-12, atol=1e-12)
        sym = empirical_ntk(net, X1, method=method, chunk_size=chunk)
        torch.testing.assert_close(sym, ref_sym, rtol=1e-12, atol=1e-12)


def test_fixed_parameters_are_left_out_of_theta():
    net = _mlp()
    net[0].weight.requires_grad_(False)
    X = torch.randn(3, 4, dtype=torch.float64)
    ref = autograd_ntk(net, X, X)
    torch.testing.assert_close(empirical_ntk(net, X, output="full"), ref, rtol=1e-12,
                               atol=1e-12)


def test_operator_products_rows_and_diagonal_without_forming_theta():
    net = _cnn()
    X = torch.randn(9, 1, 8, 8, dtype=torch.float64)
    Y = torch.randn(6, 1, 8, 8, dtype=torch.float64)
    k = EmpiricalNTK(net, chunk_size=4)
    ref = empirical_ntk(net, X, Y, method="jacobian")
    K = k(X, Y, backend="blocked")
    assert K.backend == "operator" and K.shape == (9, 6)
    V = torch.randn(6, 3, dtype=torch.float64)
    torch.testing.assert_close(K @ V, ref @ V, rtol=1e-11, atol=1e-12)
    U = torch.randn(9, dtype=torch.float64)
    torch.testing.assert_close(K.T @ U, ref.T @ U, rtol=1e-11, atol=1e-12)
    torch.testing.assert_close(K.rows([4, 0]), ref[[4, 0]], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(K.diag(), ref.diagonal()[:6], rtol=1e-12, atol=1e-12)
    Kxx = k(X, backend="blocked")
    torch.testing.assert_close(Kxx.diag(), k.diag(X), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(Kxx.to_dense(), k(X, backend="dense").to_dense(), rtol=1e-12,
                               atol=1e-12)


def test_kernel_ridge_on_the_empirical_ntk_equals_precomputed():
    net = _cnn()
    X = torch.randn(30, 1, 8, 8, dtype=torch.float64)
    y = X.mean((1, 2, 3)) + 0.1 * torch.randn(30, dtype=torch.float64)
    Xt = torch.randn(5, 1, 8, 8, dtype=torch.float64)
    K = empirical_ntk(net, X)
    ref = torchkern.KernelRidge("precomputed", alpha=1e-2).fit(K, y)
    expected = ref.predict(empirical_ntk(net, Xt, X))
    for solver in ("cholesky", "cg"):
        model = torchkern.KernelRidge(EmpiricalNTK(net), alpha=1e-2, solver=solver, tol=1e-10,
                                      backend="blocked" if solver == "cg" else "auto")
        got = model.fit(X, y).predict(Xt)
        torch.testing.assert_close(got, expected, rtol=1e-7, atol=1e-9)


def test_wide_network_approaches_the_analytic_ntk():
    # NTK parameterization: Θ̂ → Θ as the width grows, with fluctuations O(1/√width)
    # (Jacot et al. 2018). Mean over 6 initializations per width.
    g = torch.Generator().manual_seed(0)
    X = torch.randn(8, 5, dtype=torch.float64, generator=g)
    for depth, widths in ((1, (256, 1024, 4096)), (2, (64, 256, 1024))):
        theta = NTK(depth, weight_std=1.4, bias_std=0.3)(X).to_dense().detach()
        errs = []
        for w in widths:
            e = [(empirical_ntk(ntk_mlp(5, w, depth, 1.4, 0.3, seed=s), X) - theta).norm()
                 / theta.norm() for s in range(6)]
            errs.append(float(np.mean(e)))
        assert errs[0] > errs[1] > errs[2], (depth, errs)
        # Each 4x wider net at least ~1.5x closer (2x expected), and close at the widest.
        assert errs[0] / errs[2] > 2.5, (depth, errs)
        assert errs[2] < 0.1, (depth, errs)


def test_inputs_follow_the_network_dtype_and_errors_name_the_argument():
    net = _mlp()
    X = torch.randn(3, 4)  # float32 data, float64 network
    K = EmpiricalNTK(net)(X)
    assert K.dtype == torch.float64
    torch.testing.assert_close(K.to_dense(), empirical_ntk(net, X.double()))
    with pytest.raises(ValueError, match="method"):
        empirical_ntk(net, X, method="fast")
    with pytest.raises(ValueError, match="output"):
        empirical_ntk(net, X, output="diag")
    with pytest.raises(ValueError, match="chunk_size"):
        empirical_ntk(net, X, chunk_size=0)
    with pytest.raises(ValueError, match="x1"):
        empirical_ntk(net, torch.tensor([[float("nan")] * 4]))
    with pytest.raises(ValueError, match="sample shape"):
        empirical_ntk(net, X, torch.randn(2, 5))
    with pytest.raises(ValueError, match="x1"):
        empirical_ntk(net, torch.randn(4))
    with pytest.raises(TypeError, match="model"):
        EmpiricalNTK("net")
    frozen = _mlp().requires_grad_(False)
    with pytest.raises(ValueError, match="trainable"):
        empirical_ntk(frozen, X)
    with pytest.raises(TypeError, match="formula"):
        (EmpiricalNTK(net) + torchkern.RBF())(X)
