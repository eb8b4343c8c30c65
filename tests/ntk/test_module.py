"""infinite_width(module): analytic NNGP/NTK of torch networks with convolutions against
stored neural-tangents 0.6.5 references (make_conv_references.py), the blocked lazy
matrix against its dense form, and the layers it refuses."""
import os

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits
from torch import nn

import torchkern
from torchkern.ntk import NNGP, NTK, Erf, Residual, empirical_ntk, infinite_width, parameterize

from ._conv_cases import CASES, SELF_CASES, torch_net

REF = np.load(os.path.join(os.path.dirname(__file__), "conv_references.npz"))
W_STD, B_STD = float(REF["W_STD"]), float(REF["B_STD"])
DIGITS = torch.tensor(load_digits().data[:15] / 16.0)
IMG = DIGITS.reshape(-1, 1, 8, 8)
SEQ = DIGITS.reshape(-1, 2, 32)


def _kernels(name, **kw):
    spec, param, kind = CASES[name]
    X = IMG if kind == "img" else SEQ
    net = torch_net(spec, tuple(X.shape[1:]))
    return X, {g: infinite_width(net, param, kind=g, weight_std=W_STD, bias_std=B_STD, **kw)
               for g in ("nngp", "ntk")}


def _rel(a, b):
    return float(np.abs(np.asarray(a) - b).max() / np.abs(b).max())


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_neural_tangents(name):
    X, ks = _kernels(name)
    for g, k in ks.items():
        K = k(X[:4], X[4:7]).to_dense().detach().numpy()
        ref = REF[f"{name}_{g}"]
        assert K.shape == ref.shape == (4, 3)
        # Measured: at most 4e-15 for the closed forms, 3.4e-12 for the quadratures; on the
        # diagonal of a symmetric Gram 2.2e-9 (c3_mixed_flat NTK), where neural-tangents
        # takes the ReLU angle of an image with itself as arccos of a rounded cosine ≈ 1
        # and loses half the digits, while here c = q exactly gives θ = 0.
        assert _rel(K, ref) < 1e-8, (name, g, _rel(K, ref))
        if name in SELF_CASES:
            S = k(X[:4]).to_dense().detach().numpy()
            assert _rel(S, REF[f"{name}_self_{g}"]) < 1e-8
            np.testing.assert_allclose(k.diag(X[:4]).detach().numpy(), np.diag(S),
                                       rtol=1e-12)


def test_blocked_matrix_equals_dense_and_fits_estimators():
    X, ks = _kernels("c2_relu_gap", block_pairs=5)
    k = ks["ntk"]
    Xa, Xb = X[:9], X[9:15]
    D = k(Xa, Xb, backend="dense").to_dense()
    L = k(Xa, Xb, backend="blocked")
    assert L.backend == "blocked" and L.shape == (9, 6)
    # The dense matrix itself, from blocks of 5 image pairs, against one block of all.
    full = infinite_width(k.module, weight_std=W_STD, bias_std=B_STD, block_pairs=100)
    torch.testing.assert_close(D, full(Xa, Xb, backend="dense").to_dense(), rtol=1e-13,
                               atol=0)
    V = torch.randn(6, 2, dtype=torch.float64)
    torch.testing.assert_close(L @ V, D @ V, rtol=1e-12, atol=1e-14)
    U = torch.randn(9, dtype=torch.float64)
    torch.testing.assert_close(L.T @ U, D.T @ U, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(L.rows([3, 0]), D[[3, 0]], rtol=1e-12, atol=0)
    S = k(Xa, backend="blocked")
    torch.testing.assert_close(S.diag(), k(Xa, backend="dense").to_dense().diagonal(),
                               rtol=1e-12, atol=0)
    torch.testing.assert_close(k.pairs(Xa[:3], Xb[:3]), D[:3, :3].diagonal(), rtol=1e-12,
                               atol=0)
    # In an estimator: the same fit as on the precomputed Gram matrix.
    y = torch.tensor(load_digits().target[:9], dtype=torch.float64)
    ref = torchkern.KernelRidge("precomputed", alpha=1e-2).fit(
        k(Xa, backend="dense").to_dense(), y).predict(D.T)
    got = torchkern.KernelRidge(k, alpha=1e-2).fit(Xa, y).predict(Xb)
    torch.testing.assert_close(got, ref, rtol=1e-9, atol=1e-9)


def test_fully_connected_module_equals_the_mlp_kernels():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(6, 5, dtype=torch.float64, generator=g)
    Y = torch.randn(4, 5, dtype=torch.float64, generator=g)
    net = nn.Sequential(nn.Linear(5, 7), nn.ReLU(), nn.Sequential(nn.Dropout(0.3),
                        nn.Linear(7, 7), nn.Identity()), nn.ReLU(), nn.Linear(7, 2))
    for kind, Ref in (("ntk", NTK), ("nngp", NNGP)):
        for param in ("ntk", "standard"):
            k = infinite_width(net, param, kind=kind, weight_std=1.3, bias_std=0.4)
            ref = Ref(2, weight_std=1.3, bias_std=0.4, parameterization=param, width=7)
            torch.testing.assert_close(k(X, Y).to_dense(), ref(X, Y).to_dense(),
                                       rtol=1e-12, atol=1e-13)


def test_gradients_reach_the_variances():
    X, ks = _kernels("c1_erf_gap")
    k = ks["ntk"]
    k(X[:3], X[3:5]).to_dense().sum().backward()
    assert float(k.raw_weight_std.grad.abs()) > 0 and float(k.raw_bias_std.grad.abs()) > 0


def test_unmappable_layers_and_bad_input_are_named():
    with pytest.raises(ValueError, match=r"0 \(MaxPool2d\)"):
        infinite_width(nn.Sequential(nn.MaxPool2d(2), nn.Flatten(), nn.Linear(16, 1)))
    with pytest.raises(ValueError, match=r"1.0 \(BatchNorm2d\)"):
        infinite_width(nn.Sequential(nn.Conv2d(1, 2, 3), nn.Sequential(nn.BatchNorm2d(2))))
    with pytest.raises(ValueError, match="groups"):
        infinite_width(nn.Sequential(nn.Conv2d(2, 2, 3, groups=2)))
    with pytest.raises(ValueError, match="padding_mode"):
        infinite_width(nn.Sequential(nn.Conv2d(1, 2, 3, padding_mode="circular")))
    with pytest.raises(ValueError, match="size 1"):
        infinite_width(nn.Sequential(nn.Conv2d(1, 2, 3), nn.AdaptiveAvgPool2d(2)))
    with pytest.raises(ValueError, match="no Linear or Conv"):
        infinite_width(nn.Sequential(nn.ReLU()))
    with pytest.raises(ValueError, match="parameterization"):
        infinite_width(nn.Linear(3, 1), "mup")
    with pytest.raises(ValueError, match="kind"):
        infinite_width(nn.Linear(3, 1), kind="nngp-ntk")
    X = IMG[:3]
    net = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.Flatten(), nn.Linear(72, 1))
    with pytest.raises(ValueError, match=r"expects 72 features, gets 32"):
        infinite_width(net)(torch.randn(3, 1, 6, 6))
    with pytest.raises(ValueError, match=r"expects inputs of shape \(1, H, W\)"):
        infinite_width(net)(torch.randn(3, 2, 8, 8))
    with pytest.raises(ValueError, match="X contains NaN"):
        infinite_width(net)(X * float("nan"))
    with pytest.raises(ValueError, match="output has shape"):
        infinite_width(nn.Sequential(nn.Conv2d(1, 2, 3)))(X)
    with pytest.raises(ValueError, match=r"0 \(ReLU\) acts on inputs that are not Gaussian"):
        infinite_width(nn.Sequential(nn.ReLU(), nn.Flatten(), nn.Linear(64, 1)))(X)
    with pytest.raises(ValueError, match="must keep"):
        infinite_width(nn.Sequential(nn.Conv2d(1, 2, 3), Residual(nn.Conv2d(2, 2, 3)),
                                     nn.Flatten(), nn.Linear(8, 1)))(X)
    with pytest.raises(ValueError, match="end with a Linear or Conv"):
        infinite_width(nn.Sequential(nn.Conv2d(1, 2, 3), Residual(nn.ReLU()),
                                     nn.Flatten(), nn.Linear(72, 1)))(X)
    with pytest.raises(TypeError, match="module"):
        infinite_width("net")


def test_dilation_is_the_mean_over_polyphase_components():
    # A dilation-2 convolution (padding 2) acts on each of the four sub-images x[a::2, b::2]
    # separately as a plain 3 × 3 convolution (padding 1); after pointwise layers and
    # Flatten the kernel is the mean over the four: an identity independent of the code.
    dil = nn.Sequential(nn.Conv2d(1, 2, 3, padding=2, dilation=2), Erf(), nn.Flatten(),
                        nn.Linear(128, 1))
    plain = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), Erf(), nn.Flatten(),
                          nn.Linear(32, 1))
    X, Y = IMG[:3], IMG[3:5]
    for kind in ("nngp", "ntk"):
        kd = infinite_width(dil, kind=kind, weight_std=1.2, bias_std=0.2)
        kp = infinite_width(plain, kind=kind, weight_std=1.2, bias_std=0.2)
        ref = sum(kp(X[..., a::2, b::2], Y[..., a::2, b::2]).to_dense()
                  for a in (0, 1) for b in (0, 1)) / 4
        torch.testing.assert_close(kd(X, Y).to_dense(), ref, rtol=1e-13, atol=1e-15)


def test_wide_torch_network_approaches_the_analytic_ntk():
    # The empirical NTK (torch.func Jacobians) of the torch module itself, initialized in
    # the NTK parameterization by torchkern.ntk.parameterize, tends to infinite_width's
    # kernel with fluctuations O(1/√width) (Jacot et al. 2018). Mean over 3 seeds; float32.
    X = IMG[:5].float()

    def net(w):
        return nn.Sequential(nn.Conv2d(1, w, 3, padding=1), nn.ReLU(), nn.Flatten(),
                             nn.Linear(64 * w, 1))

    theta = infinite_width(net(1), weight_std=1.4, bias_std=0.3)(IMG[:5]).to_dense().detach()
    errs = []
    for w in (64, 256, 1024):
        e = [(empirical_ntk(parameterize(net(w), "ntk", 1.4, 0.3, random_state=s), X)
              .double() - theta).norm() / theta.norm() for s in range(3)]
        errs.append(float(sum(e) / 3))
    # Measured 0.14, 0.05, 0.03 (a 4x wider network ~1.7-2.8x closer).
    assert errs[0] > errs[1] > errs[2], errs
    assert errs[0] / errs[2] > 2.5 and errs[2] < 0.06, errs


def test_kernel_pickles_and_clones():
    import pickle

    from sklearn.base import clone
    net = nn.Sequential(nn.Conv2d(1, 2, 3), nn.Tanh(), nn.Conv2d(2, 2, 3), nn.LeakyReLU(0.2),
                        nn.Flatten(), nn.Linear(32, 1))
    k = infinite_width(net, kind="nngp", weight_std=1.1, quadrature_order=16)
    X = IMG[:3]
    K = k(X).to_dense()
    torch.testing.assert_close(pickle.loads(pickle.dumps(k))(X).to_dense(), K)
    model = clone(torchkern.KernelRidge(kernel=k, alpha=0.1))
    assert model.kernel.get_params()["weight_std"] == pytest.approx(1.1)
    torch.testing.assert_close(model.kernel(X).to_dense(), K)


def test_gradients_of_the_symmetric_gram_are_finite_and_right():
    # On the diagonal of k(X) the two inputs coincide (q_x q_y − c² = 0): ReLU's angle and
    # the quadrature's second coordinate took √0, whose infinite derivative made every
    # gradient NaN. Against the analytic NTK class (fully connected) and central finite
    # differences (convolutional, tanh).
    g = torch.Generator().manual_seed(1)
    X = torch.randn(5, 4, dtype=torch.float64, generator=g)
    net = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 3), nn.ReLU(),
                        nn.Linear(3, 1))
    k = infinite_width(net, weight_std=1.3, bias_std=0.4)
    ref = NTK(2, weight_std=1.3, bias_std=0.4)
    for kern in (k, ref):
        kern(X).to_dense().sum().backward()
    for name in ("raw_weight_std", "raw_bias_std"):
        got, want = getattr(k, name).grad, getattr(ref, name).grad
        torch.testing.assert_close(got, want, rtol=1e-8, atol=0)
    conv = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.Conv2d(2, 2, 3), nn.Tanh(),
                         nn.Flatten(), nn.Linear(32, 1))
    k = infinite_width(conv, weight_std=1.3, bias_std=0.4)
    Xc = IMG[:3]
    k(Xc).to_dense().sum().backward()
    h = 1e-6
    for name in ("raw_weight_std", "raw_bias_std"):
        p = getattr(k, name)
        grad = p.grad.clone()
        with torch.no_grad():
            p += h
            up = k(Xc).to_dense().sum()
            p -= 2 * h
            down = k(Xc).to_dense().sum()
            p += h
        torch.testing.assert_close(grad, (up - down) / (2 * h), rtol=1e-6, atol=0)


def test_per_image_pass_and_diagonal_are_blocked(monkeypatch):
    # The per-image pass holds at most block_pairs images' pixel-pair covariances at once
    # (it held all n: n·P² values), and the diagonal of k(X, Y) evaluates min(n, m) image
    # pairs (it evaluated whole rows: min(n, m)·m pairs); values against the dense matrix.
    from torchkern.ntk import module as M

    net = torch_net(CASES["c2_relu_gap"][0], (1, 8, 8))
    k = infinite_width(net, kind="ntk", weight_std=W_STD, bias_std=B_STD, block_pairs=4)
    Xa, Xb = IMG[:11], IMG[11:15]
    ref = infinite_width(net, kind="ntk", weight_std=W_STD, bias_std=B_STD)
    D = ref(Xa, Xb, backend="dense").to_dense()
    S = ref(Xa, backend="dense").to_dense()
    sizes, pairs = [], []
    cov, block = M._input_cov, M.InfiniteWidthKernel._block
    monkeypatch.setattr(M, "_input_cov", lambda X, Y, *a: sizes.append(X.shape[0])
                        or cov(X, Y, *a))
    monkeypatch.setattr(M.InfiniteWidthKernel, "_block", lambda self, X, Y, *a:
                        pairs.append(X.shape[0] * Y.shape[0]) or block(self, X, Y, *a))
    L = k(Xa, Xb, backend="blocked")
    assert max(sizes) <= 4, sizes
    torch.testing.assert_close(k.diag(Xa), S.diagonal(), rtol=1e-12, atol=0)
    assert max(sizes) <= 4, sizes
    pairs.clear()
    torch.testing.assert_close(L.diag(), D.diagonal(), rtol=1e-12, atol=0)
    assert sum(pairs) == 4, pairs
    torch.testing.assert_close(L.to_dense(), D, rtol=1e-12, atol=0)


def test_unreadable_variants_of_known_layers_are_refused():
    # An AvgPool with divisor_override divides by another count (its kernel would be
    # silently wrong); an nn.Sequential subclass with its own forward is not a chain.
    with pytest.raises(ValueError, match=r"1 \(AvgPool2d\).*divisor_override"):
        infinite_width(nn.Sequential(nn.Conv2d(1, 2, 3), nn.AvgPool2d(2, divisor_override=1),
                                     nn.Flatten(), nn.Linear(18, 1)))

    class Skip(nn.Sequential):
        def forward(self, x):
            return x + super().forward(x)

    with pytest.raises(ValueError, match=r"1 \(Skip\).*forward"):
        infinite_width(nn.Sequential(nn.Linear(3, 3), Skip(nn.ReLU(), nn.Linear(3, 3)),
                                     nn.Linear(3, 1)))

    # a subclass of a mapped layer is read as that layer only when it keeps its forward
    class ScaledReLU(nn.ReLU):
        def forward(self, x):
            return 2 * super().forward(x)

    class WideInit(nn.Linear):  # a custom initialization computes the same function
        pass

    with pytest.raises(ValueError, match=r"1 \(ScaledReLU\).*subclass of ReLU.*forward"):
        infinite_width(nn.Sequential(nn.Linear(3, 3), ScaledReLU(), nn.Linear(3, 1)))
    X = torch.randn(4, 3, dtype=torch.float64)
    torch.testing.assert_close(
        infinite_width(nn.Sequential(WideInit(3, 3), nn.ReLU(), nn.Linear(3, 1)))(X).to_dense(),
        infinite_width(nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 1)))(X).to_dense(),
        rtol=0, atol=0)
