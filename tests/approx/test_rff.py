"""Random Fourier features: Φ Φᵀ against the exact Gram matrix, gradients, API and errors."""
import copy

import pytest
import torch

import torchkern as tk
from torchkern.approx import RandomFourierFeatures
from torchkern.gram import FeatureKernelMatrix


def _data(n=500, d=3, seed=0, dtype=torch.float64):
    return torch.randn(n, d, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def _rel_err(P, K):
    return float((P @ P.T - K).norm() / K.norm())


@pytest.mark.parametrize("variant", ["paired", "offset"])
def test_rbf_4000_features_frobenius_error(variant):
    X = _data()
    k = tk.RBF(lengthscale=1.5)
    K = k(X).to_dense().detach()
    P = RandomFourierFeatures(k, 4000, variant=variant, random_state=0)(X).detach()
    assert P.shape == (500, 4000)
    assert _rel_err(P, K) < 0.05


@pytest.mark.parametrize("kernel", [
    tk.Laplacian(lengthscale=1.5),
    tk.Matern(nu=0.5, lengthscale=2.0),
    tk.Matern(nu=1.5, lengthscale=1.5),
    tk.Matern(nu=2.5, lengthscale=1.5),
    tk.RationalQuadratic(lengthscale=1.2, alpha=0.8),
    tk.InverseMultiquadric(lengthscale=1.0, c=1.0),
    tk.RBF(lengthscale=torch.tensor([0.5, 1.0, 2.0])),
    3.0 * tk.RBF(lengthscale=1.3),
    tk.RBF(lengthscale=2.0) * tk.Matern(nu=2.5, lengthscale=3.0),
], ids=["laplacian", "matern12", "matern32", "matern52", "rq", "imq", "rbf_ard", "scaled", "product"])
def test_every_shift_invariant_kernel(kernel):
    X = _data(300)
    K = kernel(X).to_dense().detach()
    P = RandomFourierFeatures(kernel, 4000, random_state=1)(X).detach()
    # Entry-wise error O(1/√p): with p = 4000 the relative Frobenius error is a few percent.
    assert _rel_err(P, K) < 0.07


def _new_kernels():
    return {
        "sum_of_products": 2.0 * tk.RBF(lengthscale=1.5) * tk.Matern(nu=1.5, lengthscale=2.0)
                           + tk.RationalQuadratic(lengthscale=1.5, alpha=1.0),
        "sum_with_scales": tk.RBF(lengthscale=1.5) + 0.3 * tk.Laplacian(lengthscale=2.0),
        "periodic": tk.Periodic(lengthscale=1.5, period=3.0),
        "periodic_ard": tk.Periodic(lengthscale=torch.tensor([1.5, 2.0, 3.0]), period=3.0),
        "periodic_times_rbf": tk.Periodic(lengthscale=1.5, period=3.0) * tk.RBF(lengthscale=4.0),
        "product_of_sum": (tk.RBF(lengthscale=1.5) + tk.Periodic(lengthscale=1.5, period=3.0))
                          * tk.Matern(nu=2.5, lengthscale=3.0),
    }


# Relative Frobenius errors at 4000 features on these 500 points (seed 1): 0.035, 0.025,
# 0.024, 0.018, 0.035, 0.041.
@pytest.mark.parametrize("name", list(_new_kernels()))
def test_sums_and_periodic_4000_features_frobenius_error(name):
    kernel = _new_kernels()[name]
    X = _data()
    K = kernel(X).to_dense().detach()
    P = RandomFourierFeatures(kernel, 4000, random_state=1)(X).detach()
    assert _rel_err(P, K) < 0.05


@pytest.mark.parametrize("name", ["sum_of_products", "periodic_ard"])
def test_sums_and_periodic_error_decreases_with_features(name):
    kernel = _new_kernels()[name]
    X = _data(150)
    K = kernel(X).to_dense().detach()
    errs = [sum(_rel_err(RandomFourierFeatures(kernel, p, random_state=s)(X).detach(), K)
                for s in range(4)) / 4 for p in (64, 256, 1024)]
    assert errs[1] < 0.7 * errs[0] and errs[2] < 0.7 * errs[1], errs


def test_sum_stays_unbiased_when_output_scales_move():
    # Term i's D_i features are weighted by √(a_i/D_i) at the *current* scales: after a
    # change of the scales the average of independent maps still converges to the new K.
    # (Frequencies drawn at weights 1:1 and reused at 8:0.5 — plain mixture weights a/D
    # would give (8.5/2)·(k₁ + k₂) here, 40% off.)
    X = _data(150)
    k = 1.0 * tk.RBF(lengthscale=1.2) + 1.0 * tk.Periodic(lengthscale=1.0, period=2.0)
    maps = [RandomFourierFeatures(k, 512, in_features=3, random_state=s) for s in range(16)]
    k.kernels[0].outputscale = 8.0
    k.kernels[1].outputscale = 0.5
    K = k(X).to_dense().detach()
    Ps = [m(X).detach() for m in maps]
    G = sum(P @ P.T for P in Ps) / len(Ps)
    # One map is ~0.15 off, the mean of 16 ~0.15/4.
    assert float((G - K).norm() / K.norm()) < 0.06
    torch.testing.assert_close((Ps[0] * Ps[0]).sum(1), torch.full((150,), 8.5, dtype=torch.float64))
    counts = maps[0].term_counts
    assert counts.sum() == 256 and counts.min() >= 1


def test_sum_gradients_match_finite_differences():
    X = _data(30)
    k = (1.7 * tk.RBF(lengthscale=torch.tensor([0.8, 1.3, 2.0]))
         + 0.6 * tk.Periodic(lengthscale=1.2, period=torch.tensor([1.0, 2.0, 3.0])) * tk.Matern(nu=2.5))
    rff = RandomFourierFeatures(k, 200, random_state=0)
    G = torch.randn(30, 30, generator=torch.Generator().manual_seed(5), dtype=torch.float64)

    def loss():
        P = rff(X)
        return (G * (P @ P.T)).sum()

    scaled_rbf, (scaled_per, matern) = k.kernels[0], k.kernels[1].kernels
    params = [scaled_rbf.base.raw_lengthscale, scaled_rbf.raw_outputscale,
              scaled_per.raw_outputscale, scaled_per.base.raw_period, matern.raw_lengthscale]
    grads = torch.autograd.grad(loss(), params)
    h = 1e-6
    for p, g in zip(params, grads):
        for i in range(p.numel()):
            with torch.no_grad():
                p.view(-1)[i] += h
                up = loss()
                p.view(-1)[i] -= 2 * h
                down = loss()
                p.view(-1)[i] += h
            assert float(g.view(-1)[i]) == pytest.approx(float((up - down) / (2 * h)), rel=1e-5, abs=1e-7)
    # ΦΦᵀ is exactly linear in each term's output scale (ΦΦᵀ = c·G₁ + G₂).
    S = []
    for c in (0.5, 1.7, 4.0):
        scaled_rbf.outputscale = c
        S.append(float(loss().detach()))
    assert (S[2] - S[0]) / 3.5 == pytest.approx((S[1] - S[0]) / 1.2, rel=1e-10)


def test_periodic_lengthscale_is_fixed_by_the_draw_period_is_not():
    X = _data(40)
    per = tk.Periodic(lengthscale=1.5, period=2.0)
    rff = RandomFourierFeatures(per, 4000, random_state=0)
    per.period = 3.0  # a rescaling of the frequencies: fine
    K = per(X).to_dense().detach()
    assert _rel_err(rff(X).detach(), K) < 0.05
    per.lengthscale = 2.0  # shapes the Bessel law: needs new draws
    with pytest.raises(RuntimeError, match="Periodic.lengthscale"):
        rff(X)
    rff.resample()
    assert _rel_err(rff(X).detach(), per(X).to_dense().detach()) < 0.1
    with pytest.raises(ValueError, match="lengthscale"):
        RandomFourierFeatures(tk.Periodic(lengthscale=1e-5), 10, in_features=1)


def test_sum_state_dict_and_reproducibility():
    X = _data(20)

    def kern():
        return 2.0 * tk.RBF() + tk.Periodic(lengthscale=torch.ones(3)) * tk.Laplacian()

    a = RandomFourierFeatures(kern(), 100, random_state=3)  # ARD: drawn at construction
    b = RandomFourierFeatures(kern(), 100, random_state=3)
    torch.testing.assert_close(a(X), b(X), rtol=0, atol=0)
    c = RandomFourierFeatures(2.0 * tk.RBF() + tk.Laplacian(), 100, variant="offset", random_state=9)
    c(X)
    d = RandomFourierFeatures(2.0 * tk.RBF() + tk.Laplacian(), 100, variant="offset", random_state=1)
    d.load_state_dict(c.state_dict())
    torch.testing.assert_close(c(X), d(X), rtol=0, atol=0)
    assert torch.equal(c.term_counts, d.term_counts)
    with pytest.raises(ValueError, match="terms"):
        RandomFourierFeatures(tk.RBF() + tk.Laplacian() + tk.Matern(), 4)


def test_paired_features_exact_on_the_diagonal():
    X = _data(50)
    P = RandomFourierFeatures(2.5 * tk.Matern(nu=1.5), 64, random_state=0)(X).detach()
    torch.testing.assert_close((P * P).sum(1), torch.full((50,), 2.5, dtype=torch.float64))


def test_error_decreases_with_features():
    X = _data(200)
    k = tk.RBF(lengthscale=1.0)
    K = k(X).to_dense().detach()
    errs = [sum(_rel_err(RandomFourierFeatures(k, p, random_state=s)(X).detach(), K)
                for s in range(4)) / 4 for p in (64, 256, 1024)]
    # Monte-Carlo rate 1/√p: each 4× more features should halve the error.
    assert errs[1] < 0.7 * errs[0] and errs[2] < 0.7 * errs[1], errs


def test_orthogonal_features_beat_iid():
    d = 8
    X = _data(300, d, seed=2)
    k = tk.RBF(lengthscale=d ** 0.5)
    K = k(X).to_dense().detach()

    def mean_err(orth):
        return sum(_rel_err(RandomFourierFeatures(k, 4 * d, orthogonal=orth, random_state=s)(X).detach(), K)
                   for s in range(8)) / 8

    iid, orf = mean_err(False), mean_err(True)
    assert orf < 0.8 * iid, (orf, iid)


def test_gradient_matches_finite_differences():
    X = _data(40)
    k = 1.7 * tk.RBF(lengthscale=torch.tensor([0.8, 1.3, 2.0]))
    rff = RandomFourierFeatures(k, 200, random_state=0)
    G = torch.randn(40, 40, generator=torch.Generator().manual_seed(5), dtype=torch.float64)

    def loss():
        P = rff(X)
        return (G * (P @ P.T)).sum()

    params = [k.base.raw_lengthscale, k.raw_outputscale]
    grads = torch.autograd.grad(loss(), params)
    h = 1e-6
    for p, g in zip(params, grads):
        for i in range(p.numel()):
            with torch.no_grad():
                p.view(-1)[i] += h
                up = loss()
                p.view(-1)[i] -= 2 * h
                down = loss()
                p.view(-1)[i] += h
            assert float(g.view(-1)[i]) == pytest.approx(float((up - down) / (2 * h)), rel=1e-5, abs=1e-7)


def test_gradient_approximates_dense_gradient():
    # The frequencies are standardized draws divided by ℓ, so ∂(ΦΦᵀ)/∂ℓ is an unbiased
    # estimate of ∂K/∂ℓ: the mean over independent maps matches the dense gradient within
    # its Monte-Carlo standard error.
    X = _data(200)
    y = torch.sin(X @ torch.tensor([1.0, -0.5, 0.3], dtype=torch.float64))
    G = torch.outer(y, y)  # the loss yᵀ K y of a smooth target, as in kernel alignment
    k = tk.RBF(lengthscale=torch.tensor([0.8, 1.3, 2.0]))
    dense = torch.autograd.grad((G * k(X).to_dense()).sum(), k.raw_lengthscale)[0]
    draws = []
    for seed in range(16):
        P = RandomFourierFeatures(k, 2000, random_state=seed)(X)
        draws.append(torch.autograd.grad((G * (P @ P.T)).sum(), k.raw_lengthscale)[0])
    draws = torch.stack(draws)
    assert torch.isfinite(draws).all()
    mean, se = draws.mean(0), draws.std(0) / 4.0
    assert torch.all((mean - dense).abs() < 4.5 * se), (mean, dense, se)
    assert float((mean - dense).norm() / dense.norm()) < 0.1
    # Entry-wise: ∂(ΦΦᵀ)/∂ℓ against ∂K/∂ℓ for a scalar lengthscale (central differences).
    ks = tk.RBF(lengthscale=1.2)
    rff = RandomFourierFeatures(ks, 4000, random_state=4)

    def gram(raw, fn):
        with torch.no_grad():
            ks.raw_lengthscale.copy_(raw)
        return fn()

    raw0 = ks.raw_lengthscale.detach().clone()
    h = 1e-5
    dK = (gram(raw0 + h, lambda: ks(X).to_dense()) - gram(raw0 - h, lambda: ks(X).to_dense())) / (2 * h)
    dP = (gram(raw0 + h, lambda: rff(X) @ rff(X).T) - gram(raw0 - h, lambda: rff(X) @ rff(X).T)) / (2 * h)
    gram(raw0, lambda: None)
    corr = torch.corrcoef(torch.stack([dK.detach().flatten(), dP.detach().flatten()]))[0, 1]
    assert corr > 0.95


def test_outputscale_gradient_is_exact():
    X = _data(30)
    k = 2.0 * tk.Laplacian()
    P = RandomFourierFeatures(k, 100, random_state=0)(X)
    s = (P @ P.T).sum()
    (g,) = torch.autograd.grad(s, k.raw_outputscale)
    # ΦΦᵀ is linear in c: ∂S/∂c = S/c, and ∂c/∂raw = sigmoid(raw).
    assert float(g.detach()) == pytest.approx(float(s.detach() / 2.0 * torch.sigmoid(k.raw_outputscale.detach())), rel=1e-10)


def test_lazy_draw_reproducibility_and_state_dict():
    X = _data(20)
    a = RandomFourierFeatures(tk.RBF(), 50 * 2, random_state=3)
    assert a.omega_0 is None
    Pa = a(X)
    assert a.in_features == 3 and a.omega_0.shape == (50, 3)
    b = RandomFourierFeatures(tk.RBF(), 100, in_features=3, random_state=torch.Generator().manual_seed(3))
    torch.testing.assert_close(Pa, b(X), rtol=0, atol=0)
    c = RandomFourierFeatures(tk.RBF(), 100, variant="offset", random_state=9)
    c(X)
    d = RandomFourierFeatures(tk.RBF(), 100, variant="offset", random_state=1)
    d.load_state_dict(c.state_dict())
    torch.testing.assert_close(c(X), d(X), rtol=0, atol=0)
    e = copy.deepcopy(c)
    torch.testing.assert_close(c(X), e(X), rtol=0, atol=0)
    assert not torch.equal(a.resample()(X), Pa)


def test_float32_and_kernel_matrix():
    X = _data(100)
    k = tk.RBF(lengthscale=1.0)
    rff = RandomFourierFeatures(k, 512, random_state=0)
    P64 = rff(X).detach()
    P32 = rff(X.float()).detach()
    assert P32.dtype == torch.float32
    torch.testing.assert_close(P32.double(), P64, rtol=0, atol=1e-5)
    Y = _data(30, seed=1)
    Km = rff.kernel_matrix(X, Y)
    assert isinstance(Km, FeatureKernelMatrix) and Km.shape == (100, 30)
    v = torch.randn(30, dtype=torch.float64)
    torch.testing.assert_close(Km @ v, P64 @ (rff(Y).detach().T @ v))
    assert rff.kernel_matrix(X).shape == (100, 100)
    # The kernel's hyperparameters are the module's parameters (no copy).
    assert any(p is k.raw_lengthscale for p in rff.parameters())


def test_bad_inputs():
    with pytest.raises(TypeError, match="shift-invariant"):
        RandomFourierFeatures(tk.Linear(), 10)
    with pytest.raises(TypeError, match="shift-invariant"):
        RandomFourierFeatures(tk.RBF() + tk.Min(), 10)
    with pytest.raises(TypeError, match="shift-invariant"):
        RandomFourierFeatures((tk.Periodic() + tk.Linear()) * tk.RBF(), 10)
    with pytest.raises(TypeError, match="Kernel"):
        RandomFourierFeatures("rbf", 10)
    for bad in (0, -2, 2.0, True):
        with pytest.raises(ValueError, match="n_features"):
            RandomFourierFeatures(tk.RBF(), bad)
    with pytest.raises(ValueError, match="even"):
        RandomFourierFeatures(tk.RBF(), 11)
    RandomFourierFeatures(tk.RBF(), 11, variant="offset")
    with pytest.raises(ValueError, match="variant"):
        RandomFourierFeatures(tk.RBF(), 10, variant="sin")
    with pytest.raises(TypeError, match="orthogonal"):
        RandomFourierFeatures(tk.RBF(), 10, orthogonal="yes")
    with pytest.raises(ValueError, match="ard_dims"):
        RandomFourierFeatures(tk.RBF(lengthscale=torch.ones(3)), 10, in_features=2)
    with pytest.raises(TypeError, match="random_state"):
        RandomFourierFeatures(tk.RBF(), 10, random_state="0")
    rff = RandomFourierFeatures(tk.RBF(), 10, in_features=3)
    with pytest.raises(ValueError, match="X has 2 features"):
        rff(torch.randn(5, 2))
    with pytest.raises(ValueError, match="NaN"):
        rff(torch.tensor([[0.0, float("nan"), 1.0]]))
    rq = tk.RationalQuadratic(alpha=2.0)
    rff = RandomFourierFeatures(rq, 10, in_features=2)
    rq.alpha = 3.0
    with pytest.raises(RuntimeError, match="alpha"):
        rff(torch.randn(4, 2))
