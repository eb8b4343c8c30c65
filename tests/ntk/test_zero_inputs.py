"""Units of variance 0 — a zero input (or a blank image region) without bias — against
neural-tangents 0.6.5 (make_zero_references.py), whose ReLU takes the angle between a
zero-variance unit and any other as π/2: slope E φ'(u)φ'(v) = 1/4, E φ(u)φ(v) = 0."""
import os

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits
from torch import nn

from torchkern.ntk import NNGP, NTK, Erf, infinite_width

from ._conv_cases import CASES, torch_net

REF = np.load(os.path.join(os.path.dirname(__file__), "zero_references.npz"))
X1, X2 = torch.tensor(REF["X1"]), torch.tensor(REF["X2"])
W_STD, WIDTH = float(REF["W_STD"]), int(REF["WIDTH"])
BIASES = {"0": 0.0, "None": None, "0.4": 0.4}
ACTS = {"relu": nn.ReLU, "leaky": lambda: nn.LeakyReLU(0.1), "erf": Erf, "gelu": nn.GELU}
CONV_CASES = ("c2_relu_gap", "c2_relu_gap_std", "c3_mixed_flat", "c1_leaky_flat",
              "c1_gelu_flat")
# Measured 2.2e-15 (1.8e-13 for c2_relu_gap_std); before the fix 2.4e-2 (analytic NTK,
# standard, b = 0, depth 2), 0.18 (infinite_width, depth 3) and 1.1e-8 (NNGPs, where
# the zero input got a spurious variance 1.6e-16 and correlation 1e-8 after one layer).
TOL = 1e-12


def _rel(a, b):
    return float(np.abs(a.detach().numpy() - b).max() / np.abs(b).max())


def _mlp(act, depth, bias):
    layers, d = [], X1.shape[1]
    for _ in range(depth):
        layers += [nn.Linear(d, WIDTH, bias=bias), ACTS[act]()]
        d = WIDTH
    return nn.Sequential(*layers, nn.Linear(d, 1, bias=bias))


@pytest.mark.parametrize("param", ["ntk", "standard"])
@pytest.mark.parametrize("b", sorted(BIASES))
@pytest.mark.parametrize("act", ["relu", "erf"])
def test_analytic_kernels_match_neural_tangents(act, b, param):
    for depth in (1, 2, 3):
        for kind, cls in (("ntk", NTK), ("nngp", NNGP)):
            k = cls(depth, act, weight_std=W_STD, bias_std=BIASES[b], parameterization=param,
                    width=WIDTH)
            key = f"fc_{act}_{param}_b{b}_d{depth}"
            for backend in ("dense", "blocked"):
                K = k(X1, X2, backend=backend).to_dense()
                assert _rel(K, REF[f"{key}_{kind}"]) < TOL, (key, kind, backend)
            S = REF[f"{key}_self_{kind}"]
            assert _rel(k(X1).to_dense(), S) < TOL, (key, kind)
            assert _rel(k.diag(X1), np.diag(S)) < TOL, (key, kind)


@pytest.mark.parametrize("param", ["ntk", "standard"])
@pytest.mark.parametrize("act", sorted(ACTS))
def test_infinite_width_matches_neural_tangents(act, param):
    for b, b_std in BIASES.items():
        for depth in (1, 2, 3):
            net = _mlp(act, depth, bias=b_std is not None)
            key = f"fc_{act}_{param}_b{b}_d{depth}"
            for kind in ("ntk", "nngp"):
                k = infinite_width(net, param, kind=kind, weight_std=W_STD,
                                   bias_std=b_std or 0.0)
                assert _rel(k(X1, X2).to_dense(), REF[f"{key}_{kind}"]) < TOL, (key, kind)
                assert _rel(k(X1).to_dense(), REF[f"{key}_self_{kind}"]) < TOL, (key, kind)


@pytest.mark.parametrize("name", CONV_CASES)
def test_convolutions_without_bias_match_neural_tangents(name):
    # Digits have blank borders: without bias those pixels have variance 0 in every layer.
    img = torch.tensor(load_digits().data[:7] / 16.0).reshape(-1, 1, 8, 8)
    D1, D2 = torch.cat([img[:3], torch.zeros_like(img[:1])]), img[4:7]
    spec, param, _ = CASES[name]
    net = torch_net(spec, (1, 8, 8))
    for kind in ("ntk", "nngp"):
        k = infinite_width(net, param, kind=kind, weight_std=W_STD, bias_std=0.0)
        assert _rel(k(D1, D2).to_dense(), REF[f"conv_{name}_b0_{kind}"]) < TOL, kind


@pytest.mark.parametrize("slope", [0.0, 0.1])
def test_zero_input_standard_ntk_closed_form(slope):
    # x = 0, b_std = 0, standard parameterization: every hidden unit of x is 0, so
    # Θ⁰ = 1 (the bias) and Θ^l = 1 + σ_w² E[φ'(0)φ'(v)] Θ^{l−1} with the slope at 0 read
    # as the mean of the two sides, E φ'(0)φ'(v) = ((1 + a)/2)² for every v (Θ(0, 0) too);
    # E φ(0)φ(v) = 0, so the NNGP row is 0.
    dot = ((1 + slope) / 2) ** 2
    for depth in (1, 2, 3, 6):
        theta = 1.0
        for _ in range(depth):
            theta = 1.0 + W_STD ** 2 * dot * theta
        layers, d = [], X1.shape[1]
        for _ in range(depth):
            layers += [nn.Linear(d, WIDTH), nn.LeakyReLU(slope) if slope else nn.ReLU()]
            d = WIDTH
        net = nn.Sequential(*layers, nn.Linear(d, 1))
        kernels = [infinite_width(net, "standard", weight_std=W_STD, bias_std=0.0)]
        if slope == 0.0:
            kernels.append(NTK(depth, weight_std=W_STD, bias_std=0.0,
                               parameterization="standard", width=WIDTH))
        for k in kernels:
            row = k(X1[:1], torch.cat([X1, X2])).to_dense()
            assert torch.allclose(row, torch.full_like(row, theta), rtol=1e-14, atol=0)
        nngp = NNGP(depth, weight_std=W_STD, bias_std=0.0)(X1[:1], X2).to_dense()
        assert torch.equal(nngp, torch.zeros_like(nngp))


def test_zero_input_gradients_are_finite_and_match_finite_differences():
    # The pairs with the zero input have s = c = 0: θ = π/2 must keep a finite gradient.
    X = torch.cat([X1, X2])
    v = torch.linspace(-1, 1, X.shape[0], dtype=torch.float64)
    for param in ("ntk", "standard"):
        k = NTK(3, weight_std=1.2, bias_std=0.0, parameterization=param, width=WIDTH)
        loss = lambda: v @ (k(X, backend="blocked") @ v)  # noqa: E731
        loss().backward()
        g = k.raw_weight_std.grad.item()
        assert np.isfinite(g)
        h = 1e-6
        with torch.no_grad():
            k.raw_weight_std += h
            up = loss().item()
            k.raw_weight_std -= 2 * h
            down = loss().item()
            k.raw_weight_std += h
        assert abs(g - (up - down) / (2 * h)) < 1e-6 * max(1.0, abs(g)), param


@pytest.mark.parametrize("cls", [NTK, NNGP])
def test_relu_kernels_without_bias_are_positively_homogeneous(cls):
    # Without bias a ReLU network is positively homogeneous in its input, so are its
    # gradients: K(a·x, y) = a·K(x, y). The pairs (a·y, y) are parallel with norms a
    # apart, where s² = qx·qy − c² from e(2(qx + qy) − e) − (qx − qy)² cancelled to
    # ε·qy²: the NTK was 3e-3 off at a = 1e-6, 4e-6 at a = 1e-3 and 1e3 (now ≤ 1e-8,
    # the √ε angle resolution of parallel inputs; the NNGP, flat in θ there, to 5e-16).
    Y = torch.cat([X1[1:], X2])
    k = cls(3, weight_std=W_STD, bias_std=None)
    ref = k(Y).to_dense()
    tol = 5e-8 if cls is NTK else 1e-14
    for a in (1e-6, 1e-3, 1e3):
        K = k(a * Y, Y, backend="blocked").to_dense()
        assert (K / a - ref).abs().max() / ref.abs().max() < tol, a
