import math

import numpy as np
import pytest
import torch
from sklearn.neighbors import KernelDensity as SkKernelDensity

import torchkern
from torchkern import KernelDensity, NadarayaWatson


@pytest.mark.parametrize("d", [1, 3])
@pytest.mark.parametrize("kernel,sk_kernel", [("gaussian", "gaussian"),
                                              ("laplacian", "exponential"),
                                              ("exponential", "exponential")])
def test_equals_sklearn(d, kernel, sk_kernel):
    rng = np.random.default_rng(d)
    X = rng.normal(size=(150, d))
    w = rng.uniform(0.1, 1.0, size=150)
    # a few queries far away: their densities underflow unless computed in the log domain
    Q = np.r_[rng.normal(size=(30, d)), 25 + rng.normal(size=(3, d))]
    ours = KernelDensity(kernel, bandwidth=0.6).fit(X, sample_weight=w).score_samples(Q)
    ref = SkKernelDensity(kernel=sk_kernel, bandwidth=0.6).fit(X, sample_weight=w).score_samples(Q)
    np.testing.assert_allclose(np.asarray(ours), ref, rtol=1e-10, atol=1e-6)
    assert np.isfinite(np.asarray(ours)).all()
    kde = KernelDensity(kernel, bandwidth=0.6).fit(X)
    assert kde.score(Q) == pytest.approx(
        SkKernelDensity(kernel=sk_kernel, bandwidth=0.6).fit(X).score(Q), rel=1e-10)


@pytest.mark.parametrize("kernel", ["gaussian", "exponential"])  # all of sklearn's we have
@pytest.mark.parametrize("dtype,offset", [(np.float32, 1e3), (np.float32, 1e4),
                                          (np.float64, 1e8), (np.int64, 1e15)])
def test_offset_data_equal_sklearn(kernel, dtype, offset):
    # scikit-learn's trees use exact differences. Before the data were centred, the
    # expanded ||q||^2 + ||x||^2 - 2 q.x lost everything: log-density errors of 0.2 / 3.5
    # (float32 at 1e3 / 1e4), 3.6 (float64 at 1e8), 8.2 (int64 near 1e15).
    rng = np.random.default_rng(7)
    if dtype == np.int64:
        X = int(offset) + rng.integers(-3, 4, size=(200, 2))
        Q = int(offset) + rng.integers(-4, 5, size=(40, 2))
    else:
        X = (offset + rng.normal(size=(200, 2))).astype(dtype)
        Q = (offset + rng.normal(size=(40, 2))).astype(dtype)
    ours = np.asarray(KernelDensity(kernel, bandwidth=0.5).fit(X).score_samples(Q), np.float64)
    ref = SkKernelDensity(kernel=kernel, bandwidth=0.5).fit(X.astype(np.float64)).score_samples(
        Q.astype(np.float64))
    # float32: the result is rounded to float32 (|log p| < 10 here: 1e-6 is ~1.5 ulp)
    np.testing.assert_allclose(ours, ref, rtol=1e-12 if dtype != np.float32 else 1e-6, atol=0)


@pytest.mark.parametrize("kernel", ["gaussian", "exponential"])
@pytest.mark.parametrize("dtype,spread", [(np.float32, 1e3), (np.float64, 1e5)])
def test_spread_data_equal_sklearn(kernel, dtype, spread):
    # points over [0, spread] with close pairs, queries among them: compared by exact
    # differences (the fast form's round-off, even in float64, would be 1e-5 at 1e5)
    rng = np.random.default_rng(8)
    p = rng.uniform(0, spread, size=(100, 1))
    X = np.c_[np.r_[p, p + 0.3], rng.uniform(size=(200, 1))].astype(dtype)
    Q = (X[::5] + rng.normal(scale=0.2, size=(40, 2))).astype(dtype)
    ours = np.asarray(KernelDensity(kernel, bandwidth=0.5).fit(X).score_samples(Q), np.float64)
    ref = SkKernelDensity(kernel=kernel, bandwidth=0.5).fit(X.astype(np.float64)).score_samples(
        Q.astype(np.float64))
    np.testing.assert_allclose(ours, ref, rtol=1e-12 if dtype == np.float64 else 1e-6, atol=0)


def test_ard_kernel_instance_is_a_product_of_bandwidths():
    rng = np.random.default_rng(0)
    X, Q = rng.normal(size=(40, 2)), rng.normal(size=(10, 2))
    h = np.array([0.5, 2.0])
    kde = KernelDensity(torchkern.RBF(lengthscale=torch.tensor(h))).fit(X)
    # brute force: average of products of 1-D normal densities
    dens = np.prod(np.exp(-0.5 * ((Q[:, None, :] - X[None]) / h) ** 2)
                   / (np.sqrt(2 * np.pi) * h), axis=2).mean(1)
    np.testing.assert_allclose(np.asarray(kde.score_samples(Q)), np.log(dens), rtol=1e-12)


@pytest.mark.parametrize("kernel", ["gaussian", "laplacian"])
def test_density_integrates_to_one_in_2d(kernel):
    X = np.array([[0.0, 0.0], [1.0, -0.5]])
    kde = KernelDensity(kernel, bandwidth=0.4).fit(X)
    g = np.linspace(-12, 12, 1201)
    G = np.stack(np.meshgrid(g, g), -1).reshape(-1, 2)
    mass = np.exp(np.asarray(kde.score_samples(G))).sum() * (g[1] - g[0]) ** 2
    assert mass == pytest.approx(1.0, abs=2e-3)


def test_sampling_moments():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(50, 3))
    S = np.asarray(KernelDensity(bandwidth=0.5).fit(X).sample(40000, random_state=0))
    # mixture of N(x_i, h^2 I): mean = mean(X), covariance = Cov_pop(X) + h^2 I
    np.testing.assert_allclose(S.mean(0), X.mean(0), atol=0.03)
    np.testing.assert_allclose(np.cov(S.T), np.cov(X.T, bias=True) + 0.25 * np.eye(3), atol=0.05)
    # Laplacian: ||noise|| ~ Gamma(d, h), mean d h
    S = np.asarray(KernelDensity("laplacian", bandwidth=0.5).fit(np.zeros((1, 3))).sample(
        40000, random_state=0))
    assert np.linalg.norm(S, axis=1).mean() == pytest.approx(1.5, rel=0.02)


def test_nadaraya_watson_brute_force():
    rng = np.random.default_rng(2)
    X, Q = rng.uniform(-1, 1, size=(80, 2)), rng.uniform(-1, 1, size=(20, 2))
    y = np.c_[np.sin(3 * X[:, 0]), X[:, 1] ** 2]
    ls = 0.3
    W = np.exp(-((Q[:, None, :] - X[None]) ** 2).sum(-1) / (2 * ls**2))
    ref = W @ y / W.sum(1, keepdims=True)
    nw = NadarayaWatson(torchkern.RBF(ls)).fit(X, y)
    np.testing.assert_allclose(np.asarray(nw.predict(Q)), ref, rtol=1e-12)
    one = NadarayaWatson(torchkern.RBF(ls), backend="blocked").fit(X, y[:, 0])
    out = one.predict(Q)
    assert out.shape == (20,)
    np.testing.assert_allclose(np.asarray(out), ref[:, 0], rtol=1e-12)
    r2 = 1 - ((ref[:, 0] - np.sin(3 * Q[:, 0])) ** 2).sum() / (
        (np.sin(3 * Q[:, 0]) - np.sin(3 * Q[:, 0]).mean()) ** 2).sum()
    assert one.score(Q, np.sin(3 * Q[:, 0])) == pytest.approx(r2, rel=1e-10)


def test_nadaraya_watson_zero_weight_gets_mean():
    X = np.array([[0.0], [1.0]])
    nw = NadarayaWatson(torchkern.RBF(0.01)).fit(X, np.array([1.0, 3.0]))
    with pytest.warns(RuntimeWarning, match="zero total kernel weight"):
        out = nw.predict(np.array([[100.0], [0.0]]))
    np.testing.assert_allclose(np.asarray(out), [2.0, 1.0])


def test_bad_input():
    X = np.zeros((5, 2))
    with pytest.raises(ValueError, match="bandwidth"):
        KernelDensity(bandwidth=0.0).fit(X)
    with pytest.raises(ValueError, match="kernel"):
        KernelDensity("triangle").fit(X)
    with pytest.raises(TypeError, match="kernel"):
        KernelDensity(torchkern.Linear()).fit(X)
    with pytest.raises(ValueError, match="features"):
        KernelDensity().fit(X).score_samples(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="sample_weight"):
        KernelDensity().fit(X, sample_weight=-np.ones(5))
    with pytest.raises(ValueError, match="y"):
        NadarayaWatson().fit(X, np.zeros(4))
    assert math.isfinite(KernelDensity().fit(X).score(X))
