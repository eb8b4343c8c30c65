"""Analytic NTK / NNGP against neural-tangents 0.6.5 (tests/ntk/make_references.py)."""
import os

import numpy as np
import pytest
import torch

import torchkern
from torchkern.ntk import NNGP, NTK

REF = np.load(os.path.join(os.path.dirname(__file__), "references.npz"))
X1, X2 = torch.tensor(REF["X1"]), torch.tensor(REF["X2"])
W_STD, B_STD, WIDTH = float(REF["W_STD"]), float(REF["B_STD"]), int(REF["WIDTH"])
CLASSES = {"ntk": NTK, "nngp": NNGP}


def _rel(a, b):
    a = a.detach().numpy() if isinstance(a, torch.Tensor) else a
    return np.abs(a - b).max() / np.abs(b).max()


@pytest.mark.parametrize("param", ["ntk", "standard"])
@pytest.mark.parametrize("act", ["relu", "erf"])
@pytest.mark.parametrize("kind", ["ntk", "nngp"])
def test_matches_neural_tangents(kind, act, param):
    for depth in (1, 2, 3):
        k = CLASSES[kind](depth, act, weight_std=W_STD, bias_std=B_STD,
                          parameterization=param, width=WIDTH)
        ref = REF[f"{kind}_{act}_{param}_d{depth}"]
        for backend in ("dense", "blocked"):
            assert _rel(k(X1, X2, backend=backend).to_dense(), ref) < 1e-6, (depth, backend)


@pytest.mark.parametrize("act", ["relu", "erf"])
def test_symmetric_gram_and_diagonal_match_neural_tangents(act):
    for kind in ("ntk", "nngp"):
        k = CLASSES[kind](3, act, weight_std=W_STD, bias_std=B_STD)
        ref = REF[f"{kind}_{act}_ntk_d3_self"]
        assert _rel(k(X1).to_dense(), ref) < 1e-6
        # The diagonal (θ = 0 for ReLU) to full precision, from the pairwise path.
        assert _rel(k.diag(X1), np.diag(ref)) < 1e-12


def test_no_bias_matches_neural_tangents_b_std_none():
    for kind in ("ntk", "nngp"):
        k = CLASSES[kind](2, "relu", weight_std=W_STD, bias_std=None)
        assert _rel(k(X1, X2).to_dense(), REF[f"{kind}_relu_ntk_d2_nobias"]) < 1e-6
        assert "bias_std" not in dict(k.named_parameters()) and "raw_bias_std" not in \
            dict(k.named_parameters())


def test_depth_zero_is_the_scaled_linear_kernel():
    k = NTK(0, weight_std=1.5, bias_std=0.5)
    expected = 2.25 * X1 @ X2.T / 4 + 0.25
    assert torch.allclose(k(X1, X2).to_dense(), expected, rtol=1e-14, atol=0)


def test_relu_depth_one_nngp_is_the_arc_cosine_kernel():
    # Without bias, σ_w = 1 and unit-variance inputs: K¹(x, y) = k₁(x, y) / (2 d) with
    # Cho & Saul's order-1 arc-cosine kernel k₁ (Cho and Saul 2009).
    k = NNGP(1, weight_std=1.0, bias_std=None)
    ref = torchkern.ArcCosine(order=1)(X1, X2).to_dense() / (2 * 4)
    assert torch.allclose(k(X1, X2).to_dense(), ref, rtol=1e-13, atol=0)


@pytest.mark.parametrize("act", ["relu", "erf"])
def test_hyperparameter_gradients_match_finite_differences(act):
    # Diagonal pairs included: the ReLU angle θ = 0 there must not produce NaN gradients.
    X = torch.cat([X1, X1[:2]])
    k = NTK(2, act, weight_std=1.2, bias_std=0.3)
    v = torch.linspace(-1, 1, X.shape[0], dtype=torch.float64)
    loss = lambda: v @ (k(X, backend="blocked") @ v)  # noqa: E731
    val = loss()
    val.backward()
    for name in ("weight_std", "bias_std"):
        raw = getattr(k, "raw_" + name)
        g = raw.grad.item()
        assert np.isfinite(g)
        h = 1e-6
        with torch.no_grad():
            raw += h
            up = loss().item()
            raw -= 2 * h
            down = loss().item()
            raw += h
        assert abs(g - (up - down) / (2 * h)) < 1e-6 * max(1.0, abs(g)), name


def test_lazy_at_50k_points_matches_dense_rows():
    # The recursion is one formula: blocked rows and products of a 50,000-point Gram
    # (20 GB dense in float64) agree with the dense evaluation of the same rows.
    g = torch.Generator().manual_seed(0)
    X = torch.randn(50_000, 3, generator=g, dtype=torch.float64)
    k = NTK(2, weight_std=1.1, bias_std=0.2)
    K = k(X)
    assert K.backend == "blocked"
    idx = torch.tensor([0, 17, 49_999])
    dense_rows = k(X[idx], X, backend="dense").to_dense()
    assert torch.allclose(K.rows(idx), dense_rows, rtol=1e-12, atol=0)
    Z = X[:40]
    v = torch.randn(40, dtype=torch.float64, generator=g)
    Kxz = k(X, Z, backend="blocked")
    ref = k(X[:1000], Z, backend="dense").to_dense() @ v
    assert torch.allclose((Kxz @ v)[:1000], ref, rtol=1e-10, atol=1e-10)


def test_kernel_ridge_runs_on_the_ntk():
    X = torch.randn(40, 3, dtype=torch.float64)
    y = torch.sin(X[:, 0])
    k = NTK(2)
    model = torchkern.KernelRidge(k, alpha=1e-3).fit(X, y)
    ref = torchkern.KernelRidge("precomputed", alpha=1e-3).fit(k(X).to_dense().detach(), y)
    Xt = torch.randn(7, 3, dtype=torch.float64)
    assert torch.allclose(model.predict(Xt), ref.predict(k(Xt, X).to_dense().detach()),
                          rtol=1e-10, atol=1e-12)


def test_bad_arguments():
    with pytest.raises(ValueError, match="depth"):
        NTK(-1)
    with pytest.raises(ValueError, match="activation"):
        NTK(1, activation="tanh")
    with pytest.raises(ValueError, match="parameterization"):
        NNGP(1, parameterization="mup")
    with pytest.raises(ValueError, match="width"):
        NTK(2, parameterization="standard")
    with pytest.raises(ValueError, match="weight_std"):
        NTK(1, weight_std=0.0)
    with pytest.raises(ValueError, match="bias_std"):
        NNGP(1, bias_std=-1.0)
    NNGP(2, parameterization="standard")  # the NNGP does not depend on the width
    assert "depth=2" in repr(NTK(2))
