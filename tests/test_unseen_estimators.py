"""Differential checks of the estimators' answers on awkward but valid data, each against
an independent reference (scikit-learn, brute force, closed forms).

The permutation tests' p-values come first: with discrete data (or duplicate points)
many relabellings give the observed statistic exactly, and rounding in the batched
products put some of those ties a unit below it; the exact ``>=`` then left them out and
the p-value came out too small (0.27 instead of 0.39 for one case below), silently. The
references here compute each distinct statistic once from the labelling's counts, so ties
are exact in them.
"""
import warnings

import numpy as np
import pytest
import torch
from sklearn import svm as sk_svm
from sklearn.gaussian_process import GaussianProcessRegressor as SkGP
from sklearn.gaussian_process.kernels import RBF as SkRBF, ConstantKernel as SkConst
from sklearn.linear_model import LogisticRegression

import torchkern as tk
from torchkern.stats import HSICTest, MMDTest


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """One torch thread (tests/conftest.py): the small eigh and matmul calls of these
    fits slow down 10-20x with two spinning threads on the shared CI CPUs."""


def _rbf(A, B, ls=1.0):
    d2 = ((np.asarray(A, float)[:, None, :] - np.asarray(B, float)[None, :, :]) ** 2).sum(-1)
    return np.exp(-d2 / (2 * ls * ls))


# --------------------------------------------------------------------------------------
# Permutation tests: ties in the null distribution
# --------------------------------------------------------------------------------------

_VX = np.array([0.0, 1.0, 3.0])  # no symmetry: equal statistics <=> equal counts
_VY = np.array([0.0, 2.0])


def _mmd_reference_p(x, y, P, seed, estimator):
    """Brute-force p-value of MMDTest's permutations (replayed from its generator) on
    samples of the values _VX[x], _VX[y]: each labelling's statistic from the counts of
    each value in the two samples, computed once per distinct count vector. Returns the
    p-value and the smallest gap between distinct statistics (the reference is exact
    when that gap is far above rounding)."""
    n, m = len(x), len(y)
    z = np.r_[x, y]
    K = _rbf(_VX[:, None], _VX[:, None])
    cache = {}

    def statistic(first):
        cx = np.bincount(z[first], minlength=3).astype(float)
        cy = np.bincount(z[~first], minlength=3).astype(float)
        key = tuple(cx)
        if key not in cache:
            sxx, syy, sxy = cx @ K @ cx, cy @ K @ cy, cx @ K @ cy
            if estimator == "biased":
                cache[key] = sxx / n**2 + syy / m**2 - 2 * sxy / (n * m)
            else:  # k(z, z) = 1
                cache[key] = ((sxx - n) / (n * (n - 1)) + (syy - m) / (m * (m - 1))
                              - 2 * sxy / (n * m))
        return key, cache[key]

    observed = np.zeros(n + m, bool)
    observed[:n] = True
    key0, s0 = statistic(observed)
    gen = torch.Generator().manual_seed(seed)
    count = 0
    for _ in range(P):
        first = np.zeros(n + m, bool)
        first[torch.randperm(n + m, generator=gen)[:n].numpy()] = True
        key, s = statistic(first)
        count += key == key0 or s > s0
    return (1 + count) / (1 + P), np.diff(np.sort(list(cache.values()))).min()


def _hsic_reference_p(x, y, P, seed, estimator):
    """Brute-force p-value of HSICTest's permutations of y on the values _VX[x], _VY[y]:
    each statistic (tr(KHLH)/n², or Song et al.'s U-statistic by its dense formula) once
    per distinct contingency table of (x, permuted y)."""
    n = len(x)
    Kx, Ky = _rbf(_VX[:, None], _VX[:, None]), _rbf(_VY[:, None], _VY[:, None])
    H = np.eye(n) - 1.0 / n
    one = np.ones(n)
    cache = {}

    def statistic(yp):
        T = np.zeros((3, 2))
        np.add.at(T, (x, yp), 1)
        key = tuple(T.ravel())
        if key not in cache:
            K, L = Kx[np.ix_(x, x)], Ky[np.ix_(yp, yp)]
            if estimator == "biased":
                cache[key] = np.trace(K @ H @ L @ H) / n**2
            else:
                K, L = K - np.eye(n), L - np.eye(n)  # zero diagonals (k(z, z) = 1)
                cache[key] = (np.trace(K @ L) + (one @ K @ one) * (one @ L @ one)
                              / ((n - 1) * (n - 2)) - 2 / (n - 2) * one @ K @ L @ one
                              ) / (n * (n - 3))
        return key, cache[key]

    key0, s0 = statistic(y)
    gen = torch.Generator().manual_seed(seed)
    count = 0
    for _ in range(P):
        key, s = statistic(y[torch.randperm(n, generator=gen).numpy()])
        count += key == key0 or s > s0
    return (1 + count) / (1 + P), np.diff(np.sort(list(cache.values()))).min()


@pytest.mark.parametrize("seed", [8, 10])
@pytest.mark.parametrize("estimator", ["biased", "unbiased"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_mmd_test_counts_ties_of_discrete_data(seed, estimator, dtype):
    rng = np.random.default_rng(seed)
    x, y = rng.integers(0, 3, 7), rng.integers(0, 3, 10)
    res = MMDTest(tk.RBF(1.0), n_permutations=100, estimator=estimator,
                  random_state=seed).test(torch.tensor(_VX[x][:, None], dtype=dtype),
                                          torch.tensor(_VX[y][:, None], dtype=dtype))
    p, gap = _mmd_reference_p(x, y, 100, seed, estimator)
    assert gap > 1e-9  # distinct statistics are far apart: the reference is exact
    assert res.p_value == pytest.approx(p, abs=1e-12)


@pytest.mark.parametrize("seed", [3, 7])
@pytest.mark.parametrize("estimator", ["biased", "unbiased"])
@pytest.mark.parametrize("method,dtype", [("exact", torch.float64),
                                          ("nystrom", torch.float64),
                                          ("nystrom", torch.float32)])
def test_hsic_test_counts_ties_of_discrete_data(seed, estimator, method, dtype):
    rng = np.random.default_rng(seed)
    x, y = rng.integers(0, 3, 12), rng.integers(0, 2, 12)
    # n_features = n: the Nyström features are exact up to rounding
    res = HSICTest(tk.RBF(1.0), tk.RBF(1.0), n_permutations=100, estimator=estimator,
                   random_state=seed, method=method, n_features=12).test(
        torch.tensor(_VX[x][:, None], dtype=dtype), torch.tensor(_VY[y][:, None], dtype=dtype))
    p, gap = _hsic_reference_p(x, y, 100, seed, estimator)
    assert gap > 1e-9
    assert res.p_value == pytest.approx(p, abs=1e-12)


def test_permutation_p_value_keeps_distinct_statistics_apart():
    """The tie tolerance is rounding-sized: on continuous data (no ties) the p-value is
    the plain count of permuted statistics >= the observed one, from the brute-force
    statistics of the same permutations."""
    rng = np.random.default_rng(3)
    X, Y = rng.normal(size=(12, 2)), rng.normal(size=(9, 2)) + 0.4
    res = MMDTest(tk.RBF(1.0), n_permutations=200, estimator="biased",
                  random_state=2).test(torch.tensor(X), torch.tensor(Y))
    Z = np.vstack([X, Y])
    K = _rbf(Z, Z)
    gen = torch.Generator().manual_seed(2)
    null = []
    for _ in range(200):
        s = np.full(21, -1 / 9)
        s[torch.randperm(21, generator=gen)[:12].numpy()] = 1 / 12
        null.append(s @ K @ s)
    s = np.r_[np.full(12, 1 / 12), np.full(9, -1 / 9)]
    stat = s @ K @ s
    assert float(res.statistic) == pytest.approx(stat, rel=1e-12)
    np.testing.assert_allclose(res.null_distribution.numpy(), null, rtol=1e-10)
    assert np.abs(np.array(null) - stat).min() > 1e-10  # no ties here
    assert res.p_value == pytest.approx((1 + (np.array(null) >= stat).sum()) / 201)


# --------------------------------------------------------------------------------------
# Gaussian processes: one target given as a column
# --------------------------------------------------------------------------------------

def test_gp_single_column_target_predicts_1d_as_sklearn():
    """y of shape (n, 1): mean, std and cov come back for one target, (m,), (m,) and
    (m, m), as scikit-learn's; they were (m, 1) and (m, m, 1), so ``mean - y_test``
    broadcast to (m, m) silently."""
    rng = np.random.default_rng(0)
    X, Xt = rng.normal(size=(15, 2)), rng.normal(size=(4, 2))
    y = (np.sin(X[:, 0]) + 2.0)[:, None]
    for normalize in (False, True):
        ours = tk.GaussianProcessRegressor(tk.RBF(1.0), noise=0.1,
                                           normalize_y=normalize).fit(X, y)
        ref = SkGP(SkConst(1.0, "fixed") * SkRBF(1.0, "fixed"), alpha=0.1, optimizer=None,
                   normalize_y=normalize).fit(X, y)
        mean, std = ours.predict(Xt, return_std=True)
        rmean, rstd = ref.predict(Xt, return_std=True)
        assert mean.shape == rmean.shape == (4,) and std.shape == rstd.shape == (4,)
        np.testing.assert_allclose(mean, rmean, rtol=1e-10)
        np.testing.assert_allclose(std, rstd, rtol=1e-8)
        _, cov = ours.predict(Xt, return_cov=True)
        np.testing.assert_allclose(cov, ref.predict(Xt, return_cov=True)[1], rtol=1e-8,
                                   atol=1e-12)
        assert ours.sample_y(Xt, 3, random_state=0).shape == ref.sample_y(Xt, 3).shape
        assert ours.score(Xt, rmean[:, None]) == pytest.approx(1.0)


# --------------------------------------------------------------------------------------
# Nadaraya–Watson: score's sample_weight and a constant target
# --------------------------------------------------------------------------------------

def test_nadaraya_watson_score_is_sklearn_r2():
    """``score(X, y, sample_weight)`` is scikit-learn's weighted R² of the brute-force
    predictions Σ k y / Σ k; the weights were ignored (R² 1.4 off here) and a constant y
    gave -inf."""
    from sklearn.metrics import r2_score
    rng = np.random.default_rng(1)
    X, Xt = rng.normal(size=(25, 2)), rng.normal(size=(8, 2))
    y, yt = np.sin(X[:, 0]), np.cos(Xt[:, 0])
    K = _rbf(Xt, X)
    pred = K @ y / K.sum(1)
    model = tk.NadarayaWatson(tk.RBF(1.0)).fit(X, y)
    np.testing.assert_allclose(model.predict(Xt), pred, rtol=1e-12)
    w = rng.uniform(0.1, 2.0, 8)
    assert model.score(Xt, yt) == pytest.approx(r2_score(yt, pred), rel=1e-12)
    assert model.score(Xt, yt, sample_weight=w) == pytest.approx(
        r2_score(yt, pred, sample_weight=w), rel=1e-12)
    assert model.score(Xt, np.ones(8)) == r2_score(np.ones(8), pred) == 0.0
    with pytest.raises(ValueError, match="sample_weight"):
        model.score(Xt, yt, sample_weight=np.ones(3))


# --------------------------------------------------------------------------------------
# AverageMKL with the ridge classifier on NumPy data
# --------------------------------------------------------------------------------------

def test_average_mkl_ridge_on_numpy_against_sklearn():
    """AverageMKL(estimator="krr") on NumPy X: the ridge outputs and labels of
    scikit-learn's KernelRidge on the averaged Gram matrix (predict raised
    AttributeError: the ridge returns NumPy for NumPy X); labels come back as NumPy, as
    the SVC path gives them."""
    from sklearn.kernel_ridge import KernelRidge as SkKRR
    rng = np.random.default_rng(2)
    X, Xt = rng.normal(size=(30, 2)), rng.normal(size=(10, 2))
    labels = np.array(["no", "yes"])[(X[:, 0] + 0.3 * X[:, 1] > 0).astype(int)]
    model = tk.supervised.AverageMKL([tk.RBF(0.5), tk.RBF(2.0)], estimator="krr").fit(X, labels)
    K = (_rbf(X, X, 0.5) + _rbf(X, X, 2.0)) / 2
    Kt = (_rbf(Xt, X, 0.5) + _rbf(Xt, X, 2.0)) / 2
    ref = SkKRR(alpha=1.0, kernel="precomputed").fit(K, np.where(labels == "yes", 1.0, -1.0))
    f = ref.predict(Kt)
    np.testing.assert_allclose(model.decision_function(Xt), f, rtol=1e-10)
    pred = model.predict(Xt)
    assert isinstance(pred, np.ndarray)
    np.testing.assert_array_equal(pred, np.where(f > 0, "yes", "no"))
    assert len(set(pred)) == 2


# --------------------------------------------------------------------------------------
# KernelRidge: float32 data with a small ridge on the CG solver
# --------------------------------------------------------------------------------------

def test_krr_cg_float32_small_alpha_matches_float64():
    """float32 data, solver="cg" (the "auto" choice above 5,000 points), α = 1e-5: the
    predictions of scikit-learn's float64 KernelRidge on the same float32 points, to
    float32 accuracy and without a warning; the float32 coefficients of the
    ill-conditioned system cancelled in float32 products, 1.8e-2 off, silently."""
    from sklearn.kernel_ridge import KernelRidge as SkKRR
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1000, 3)).astype(np.float32)
    y = (np.sin(X).sum(1) + 0.1 * rng.normal(size=1000)).astype(np.float32)
    Xt = rng.normal(size=(200, 3)).astype(np.float32)
    ref = SkKRR(alpha=1e-5, kernel="rbf", gamma=0.5).fit(X.astype(float), y.astype(float))
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = tk.KernelRidge(tk.RBF(1.0), alpha=1e-5, solver="cg").fit(X, y)
        pred = model.predict(Xt)
    assert pred.dtype == np.float32
    expected = ref.predict(Xt.astype(float))
    assert np.linalg.norm(pred - expected) / np.linalg.norm(expected) < 1e-5


# --------------------------------------------------------------------------------------
# Guards from the sweep: awkward inputs that agree with the references today
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("solver", ["auto", "smo"])
def test_svm_zero_sample_weights_and_string_labels_against_sklearn(solver):
    """Weights of 0 leave samples out, string labels with a one-sample class: the
    decision values and labels of scikit-learn's SVC with its own RBF kernel (its
    kernel="precomputed" path mis-indexes the support vectors when weights drop samples,
    so it is no reference here), and SVR likewise."""
    rng = np.random.default_rng(4)
    X, Xt = rng.normal(size=(30, 2)), rng.normal(size=(9, 2))
    y = np.array(["a", "b", "c"])[np.digitize(X[:, 0], [-0.4, 0.4])]
    y[0] = "d"
    w = np.r_[np.zeros(3), rng.uniform(0.5, 2.0, 27)]
    w[0] = 1.0
    ours = tk.SVC(tk.RBF(1.0), tol=1e-8, solver=solver).fit(X, y, sample_weight=w)
    ref = sk_svm.SVC(gamma=0.5, tol=1e-8).fit(X, y, sample_weight=w)
    np.testing.assert_allclose(ours.decision_function(Xt), ref.decision_function(Xt),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(ours.predict(Xt), ref.predict(Xt))
    z = np.sin(X[:, 0])
    reg = tk.SVR(tk.RBF(1.0), tol=1e-8).fit(X, z, sample_weight=w)
    np.testing.assert_allclose(reg.predict(Xt), sk_svm.SVR(gamma=0.5, tol=1e-8).fit(
        X, z, sample_weight=w).predict(Xt), rtol=1e-5, atol=1e-6)


def test_klr_multinomial_weighted_against_penalized_logistic_regression():
    """Multinomial kernel logistic regression with sample weights and string labels is
    scikit-learn's LogisticRegression (the same C-weighted loss and ½‖f‖² penalty) on
    the features K = ΦΦᵀ; probabilities agree and argmax(proba) is predict."""
    rng = np.random.default_rng(5)
    X, Xt = rng.normal(size=(30, 2)), rng.normal(size=(9, 2))
    y = np.array(["x", "y", "z"])[np.digitize(X[:, 0] + 0.3 * rng.normal(size=30),
                                                [-0.4, 0.4])]
    w = rng.uniform(0.1, 3.0, 30)
    lam, U = np.linalg.eigh(_rbf(X, X))
    keep = lam > 1e-10 * lam.max()
    U, lam = U[:, keep], lam[keep]
    F, Ft = U * np.sqrt(lam), _rbf(Xt, X) @ U / np.sqrt(lam)
    ref = LogisticRegression(C=2.0, tol=1e-12, max_iter=100000).fit(F, y, sample_weight=w)
    ours = tk.KernelLogisticRegression(tk.RBF(1.0), C=2.0).fit(X, y, sample_weight=w)
    proba = ours.predict_proba(Xt)
    np.testing.assert_allclose(proba, ref.predict_proba(Ft), atol=1e-5)
    np.testing.assert_array_equal(ours.predict(Xt), ours.classes_[np.asarray(proba).argmax(1)])


def test_gp_normalized_single_sample_and_kpca_rank_deficient_against_sklearn():
    """n = 1 with normalize_y (the target's std is 0: scikit-learn scales by 1) and a
    kernel PCA asked for as many components as points (the centered Gram has rank n - 1):
    scikit-learn's numbers."""
    from sklearn.decomposition import KernelPCA as SkKPCA
    rng = np.random.default_rng(6)
    X, Xt = rng.normal(size=(3, 2)), rng.normal(size=(4, 2))
    gp = tk.GaussianProcessRegressor(tk.RBF(1.0), noise=0.1, normalize_y=True).fit(X[:1], [2.5])
    ref = SkGP(SkConst(1.0, "fixed") * SkRBF(1.0, "fixed"), alpha=0.1, optimizer=None,
               normalize_y=True).fit(X[:1], [2.5])
    for a, b in zip(gp.predict(Xt, return_std=True), ref.predict(Xt, return_std=True)):
        np.testing.assert_allclose(a, b, rtol=1e-10)
    ours = tk.KernelPCA(tk.RBF(1.0), n_components=3).fit(X)
    skp = SkKPCA(3, kernel="rbf", gamma=0.5, eigen_solver="dense").fit(X)
    np.testing.assert_allclose(ours.eigenvalues_, skp.eigenvalues_, atol=1e-12)
    Z, R = np.asarray(ours.transform(Xt)), skp.transform(Xt)
    signs = np.sign((Z * R).sum(0))
    signs[signs == 0] = 1
    np.testing.assert_allclose(Z * signs, R, atol=1e-10)


@pytest.mark.parametrize("solver", ["cholesky", "cg"])
def test_krr_precomputed_float32_gram_small_alpha(solver):
    """A float32 precomputed Gram matrix with α = 1e-5: the predictions of scikit-learn's
    float64 KernelRidge on the same float32 values (the coefficients were kept in
    float64 but multiplied in float32 at predict time: 1.5e-2 off, silently)."""
    from sklearn.kernel_ridge import KernelRidge as SkKRR
    rng = np.random.default_rng(7)
    X, Xt = rng.normal(size=(800, 3)), rng.normal(size=(100, 3))
    y = np.sin(X).sum(1) + 0.1 * rng.normal(size=800)
    K, Kt = _rbf(X, X).astype(np.float32), _rbf(Xt, X).astype(np.float32)
    expected = SkKRR(alpha=1e-5, kernel="precomputed").fit(K.astype(float), y).predict(
        Kt.astype(float))
    model = tk.KernelRidge("precomputed", alpha=1e-5, solver=solver).fit(K, y.astype(np.float32))
    pred = model.predict(Kt)
    assert pred.dtype == np.float32
    assert np.linalg.norm(pred - expected) / np.linalg.norm(expected) < 1e-5


def test_kernel_ridge_refit_with_another_solver_keeps_no_nystrom_state():
    g = torch.Generator().manual_seed(5)
    X = torch.randn(60, 2, generator=g, dtype=torch.float64)
    y = torch.sin(X[:, 0])
    m = tk.KernelRidge(tk.RBF(1.0), alpha=0.1, solver="nystrom", n_centers=10).fit(X, y)
    assert m.center_indices_.shape == (10,)
    m.set_params(solver="cholesky").fit(X, y)
    assert not hasattr(m, "center_indices_")
    fresh = tk.KernelRidge(tk.RBF(1.0), alpha=0.1, solver="cholesky").fit(X, y)
    torch.testing.assert_close(m.predict(X), fresh.predict(X), rtol=0, atol=0)


def test_nadaraya_watson_warns_where_the_weights_are_subnormal():
    X = torch.tensor([[0.0], [1.0]], dtype=torch.float64)
    y = torch.tensor([1.0, 2.0], dtype=torch.float64)
    m = tk.NadarayaWatson(tk.RBF(1.0)).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        near = m.predict(torch.tensor([[0.5]], dtype=torch.float64))  # no warning
    assert float(near) == pytest.approx(1.5, abs=1e-12)
    # at 38 the weights are exp(-722) (subnormal) and exp(-684.5): a total ~3e-298, below
    # tiny/eps = 1e-292
    q = torch.tensor([[38.0]], dtype=torch.float64)
    k = torch.exp(-0.5 * (q - X.T) ** 2)[0]
    assert 0 < float(k.sum()) < torch.finfo(torch.float64).tiny / torch.finfo(torch.float64).eps
    with pytest.warns(RuntimeWarning, match="subnormal"):
        far = m.predict(q)
    assert float(far) == pytest.approx(float((k * y).sum() / k.sum()), rel=1e-6)
