"""KernelRidge against scikit-learn's KernelRidge, dense algebra, and memory on lazy paths."""
import json
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits
from sklearn.kernel_ridge import KernelRidge as SkKernelRidge
from sklearn.metrics import r2_score
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score, train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from torchkern import RBF, KernelRidge
from torchkern.gram import KernelMatrix
from torchkern.linalg import ConvergenceWarning
from torchkern._estimator import NotFittedError

LS = 0.8
GAMMA = 1 / (2 * LS**2)


def _data(n=150, d=3, r=None, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    f = np.sin(X).sum(1)
    y = f + 0.1 * rng.normal(size=n) if r is None else \
        np.stack([f * (j + 1) + 0.1 * rng.normal(size=n) for j in range(r)], 1)
    Xt = rng.normal(size=(40, d))
    return X, y, Xt


def _rel(a, b):
    a = np.asarray(a) if isinstance(a, torch.Tensor) else a
    return np.abs(a - b).max() / np.abs(b).max()


@pytest.mark.parametrize("solver", ["cholesky", "cg", "nystrom"])
def test_predictions_equal_sklearn(solver):
    X, y, Xt = _data()
    ref = SkKernelRidge(alpha=0.1, kernel="rbf", gamma=GAMMA).fit(X, y).predict(Xt)
    # nystrom with m = n centers is exact KRR.
    m = KernelRidge(RBF(LS), alpha=0.1, solver=solver, tol=1e-10,
                    n_centers=len(X) if solver == "nystrom" else None).fit(X, y)
    pred = m.predict(Xt)
    # NumPy in, NumPy out (scikit-learn's convention)
    assert isinstance(pred, np.ndarray) and pred.dtype == np.float64 and pred.shape == (40,)
    assert _rel(pred, ref) < 1e-6
    if solver != "nystrom":
        sk = SkKernelRidge(alpha=0.1, kernel="rbf", gamma=GAMMA).fit(X, y)
        assert _rel(m.dual_coef_, sk.dual_coef_) < 1e-6


@pytest.mark.parametrize("solver", ["cholesky", "cg", "nystrom"])
def test_multi_output_and_per_target_alpha(solver):
    X, Y, Xt = _data(r=3)
    kw = dict(solver=solver, tol=1e-10, n_centers=len(X) if solver == "nystrom" else None)
    ref = SkKernelRidge(alpha=0.1, kernel="rbf", gamma=GAMMA).fit(X, Y).predict(Xt)
    pred = KernelRidge(RBF(LS), alpha=0.1, **kw).fit(X, Y).predict(Xt)
    assert pred.shape == (40, 3) and _rel(pred, ref) < 1e-6
    alphas = np.array([0.01, 0.1, 1.0])
    ref = SkKernelRidge(alpha=alphas, kernel="rbf", gamma=GAMMA).fit(X, Y).predict(Xt)
    pred = KernelRidge(RBF(LS), alpha=alphas, **kw).fit(X, Y).predict(Xt)
    assert _rel(pred, ref) < 1e-6


@pytest.mark.parametrize("solver", ["cholesky", "cg", "nystrom"])
def test_sample_weight_equals_sklearn(solver):
    X, y, Xt = _data()
    w = np.random.default_rng(1).uniform(0.1, 3.0, size=len(X))
    ref = SkKernelRidge(alpha=0.1, kernel="rbf", gamma=GAMMA).fit(X, y, sample_weight=w).predict(Xt)
    m = KernelRidge(RBF(LS), alpha=0.1, solver=solver, tol=1e-10,
                    n_centers=len(X) if solver == "nystrom" else None)
    assert _rel(m.fit(X, y, sample_weight=w).predict(Xt), ref) < 1e-6
    # A constant weight c is the same as alpha / c.
    ref_c = SkKernelRidge(alpha=0.05, kernel="rbf", gamma=GAMMA).fit(X, y).predict(Xt)
    assert _rel(m.fit(X, y, sample_weight=2.0).predict(Xt), ref_c) < 1e-6


@pytest.mark.parametrize("solver", ["cholesky", "cg", "nystrom"])
def test_precomputed_kernel(solver):
    X, y, Xt = _data()
    K, Kt = rbf_kernel(X, gamma=GAMMA), rbf_kernel(Xt, X, gamma=GAMMA)
    ref = SkKernelRidge(alpha=0.1, kernel="precomputed").fit(K, y).predict(Kt)
    m = KernelRidge("precomputed", alpha=0.1, solver=solver, tol=1e-10,
                    n_centers=len(X) if solver == "nystrom" else None).fit(K, y)
    assert m.X_fit_ is None
    assert _rel(m.predict(Kt), ref) < 1e-6
    # A lazy KernelMatrix works as the precomputed Gram matrix as well.
    Xtt, Xttt = torch.as_tensor(X), torch.as_tensor(Xt)
    m2 = KernelRidge("precomputed", alpha=0.1, solver=solver, tol=1e-10,
                     n_centers=len(X) if solver == "nystrom" else None)
    m2.fit(RBF(LS)(Xtt, backend="blocked"), y)
    assert _rel(m2.predict(RBF(LS)(Xttt, Xtt, backend="blocked")), ref) < 1e-6
    with pytest.raises(ValueError, match="X"):
        m.predict(Kt[:, :-1])


def test_nystrom_is_the_restricted_least_squares_problem():
    # m < n: β minimizes ‖K_nm β − y‖² + α βᵀ K_mm β, i.e. solves the normal equations
    # (K_mn K_nm + α K_mm) β = K_mn y (computed densely here).
    X, y, Xt = _data(n=200)
    m = KernelRidge(RBF(LS), alpha=0.1, solver="nystrom", n_centers=40, random_state=3,
                    tol=1e-12).fit(X, y)
    idx = np.asarray(m.center_indices_)
    assert len(set(idx.tolist())) == 40
    Knm, Kmm = rbf_kernel(X, X[idx], gamma=GAMMA), rbf_kernel(X[idx], gamma=GAMMA)
    beta = np.linalg.solve(Knm.T @ Knm + 0.1 * Kmm, Knm.T @ y)
    assert _rel(m.dual_coef_, beta) < 1e-6
    assert _rel(m.predict(Xt), rbf_kernel(Xt, X[idx], gamma=GAMMA) @ beta) < 1e-6
    # random_state fixes the centers.
    m2 = KernelRidge(RBF(LS), alpha=0.1, solver="nystrom", n_centers=40, random_state=3).fit(X, y)
    assert np.array_equal(m2.center_indices_, m.center_indices_)


def test_nystrom_on_digits_keeps_exact_accuracy():
    X, y = load_digits(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X / 16.0, y, test_size=0.25, random_state=0)
    Y = np.eye(10)[ytr]  # one-hot ridge regression, classify by argmax
    kw = dict(kernel=RBF(2.0), alpha=0.1)
    exact = KernelRidge(solver="cholesky", **kw).fit(Xtr, Y)
    approx = KernelRidge(solver="nystrom", n_centers=500, random_state=0, tol=1e-4, **kw).fit(Xtr, Y)
    acc_exact = (np.asarray(exact.predict(Xte).argmax(1)) == yte).mean()
    acc_approx = (np.asarray(approx.predict(Xte).argmax(1)) == yte).mean()
    assert acc_exact > 0.97
    assert acc_approx >= acc_exact - 0.01


@pytest.mark.parametrize("solver", ["cholesky", "cg"])
def test_float32(solver):
    X, y, Xt = _data()
    ref = SkKernelRidge(alpha=0.1, kernel="rbf", gamma=GAMMA).fit(X, y).predict(Xt)
    X32, y32, Xt32 = (torch.as_tensor(a, dtype=torch.float32) for a in (X, y, Xt))
    m = KernelRidge(RBF(LS), alpha=0.1, solver=solver, tol=1e-5).fit(X32, y32)
    pred = m.predict(Xt32)
    assert pred.dtype == torch.float32
    assert _rel(pred.double(), ref) < 1e-4


def test_float32_nystrom():
    # m ≪ n, the regime Nyström is for: float32 products, float64 factors and PCG scalars
    # keep the solution of the normal equations within 1e-4 of the float64 solution.
    X, y, Xt = _data()
    X32, y32, Xt32 = (torch.as_tensor(a, dtype=torch.float32) for a in (X, y, Xt))
    m = KernelRidge(RBF(LS), alpha=0.1, solver="nystrom", n_centers=40, random_state=0,
                    tol=1e-5).fit(X32, y32)
    idx = np.asarray(m.center_indices_)
    Knm, Kmm = rbf_kernel(X, X[idx], gamma=GAMMA), rbf_kernel(X[idx], gamma=GAMMA)
    beta = np.linalg.solve(Knm.T @ Knm + 0.1 * Kmm, Knm.T @ y)
    pred = m.predict(Xt32)
    assert pred.dtype == torch.float32
    assert _rel(pred.double(), rbf_kernel(Xt, X[idx], gamma=GAMMA) @ beta) < 1e-4


def test_auto_solver_rule():
    X, y, _ = _data(n=60)
    assert KernelRidge(RBF(LS)).fit(X, y).solver_ == "cholesky"
    from torchkern.supervised import ridge
    assert ridge._AUTO_CHOLESKY_MAX_N == 5_000 and ridge._AUTO_CG_MAX_N == 50_000


def test_cg_on_lazy_gram_never_materializes(monkeypatch):
    X, y, Xt = _data(n=300)
    ref = KernelRidge(RBF(LS), alpha=0.1, solver="cholesky").fit(X, y).predict(Xt)

    def forbidden(self):
        raise AssertionError("to_dense() called on the lazy path")

    monkeypatch.setattr(KernelMatrix, "to_dense", forbidden)
    m = KernelRidge(RBF(LS), alpha=0.1, solver="cg", backend="blocked", tol=1e-10).fit(X, y)
    assert _rel(m.predict(Xt), np.asarray(ref)) < 1e-6


def test_cg_warns_when_max_iter_is_reached():
    X, y, _ = _data()
    with pytest.warns(ConvergenceWarning, match="residual"):
        KernelRidge(RBF(LS), alpha=1e-6, solver="cg", n_centers=0, max_iter=2).fit(X, y)


def test_score_is_r2():
    X, y, Xt = _data()
    m = KernelRidge(RBF(LS), alpha=0.1).fit(X, y)
    yt = np.sin(Xt).sum(1)
    assert abs(m.score(Xt, yt) - r2_score(yt, np.asarray(m.predict(Xt)))) < 1e-12
    w = np.linspace(0.5, 2, 40)
    assert abs(m.score(Xt, yt, sample_weight=w)
               - r2_score(yt, np.asarray(m.predict(Xt)), sample_weight=w)) < 1e-12


def test_sklearn_interop_grid_search_cross_val_pipeline():
    from sklearn.base import clone
    X, y, _ = _data(n=90)
    est = KernelRidge(RBF(1.0), alpha=1.0)
    c = clone(est)
    assert c.kernel is not est.kernel and c.get_params()["kernel__lengthscale"] == 1.0

    cv = KFold(3, shuffle=True, random_state=0)
    ls = [0.5, 1.0, 2.0]
    ours = GridSearchCV(est, {"alpha": [0.01, 0.1], "kernel__lengthscale": ls}, cv=cv).fit(X, y)
    theirs = GridSearchCV(SkKernelRidge(kernel="rbf"),
                          {"alpha": [0.01, 0.1], "gamma": [1 / (2 * v**2) for v in ls]},
                          cv=cv).fit(X, y)
    assert np.allclose(ours.cv_results_["mean_test_score"],
                       theirs.cv_results_["mean_test_score"], atol=1e-8)
    assert ours.best_params_["alpha"] == theirs.best_params_["alpha"]

    s1 = cross_val_score(KernelRidge(RBF(1.0), alpha=0.1), X, y, cv=cv)
    s2 = cross_val_score(SkKernelRidge(alpha=0.1, kernel="rbf", gamma=0.5), X, y, cv=cv)
    assert np.allclose(s1, s2, atol=1e-8)

    p1 = make_pipeline(StandardScaler(), KernelRidge(RBF(1.0), alpha=0.1)).fit(X, y)
    p2 = make_pipeline(StandardScaler(), SkKernelRidge(alpha=0.1, kernel="rbf", gamma=0.5)).fit(X, y)
    assert np.allclose(np.asarray(p1.predict(X)), p2.predict(X), atol=1e-8)


def test_bad_input():
    X, y, Xt = _data(n=30)
    with pytest.raises(ValueError, match="y"):
        KernelRidge(RBF()).fit(X, y[:-1])
    Xn = X.copy()
    Xn[3, 1] = np.nan
    with pytest.raises(ValueError, match="X"):
        KernelRidge(RBF()).fit(Xn, y)
    yn = y.copy()
    yn[0] = np.inf
    with pytest.raises(ValueError, match="y"):
        KernelRidge(RBF()).fit(X, yn)
    with pytest.raises(NotFittedError):
        KernelRidge(RBF()).predict(Xt)
    with pytest.raises(ValueError, match="alpha"):
        KernelRidge(RBF(), alpha=-1.0).fit(X, y)
    with pytest.raises(ValueError, match="alpha"):
        KernelRidge(RBF(), alpha=0.0, solver="cg").fit(X, y)
    with pytest.raises(ValueError, match="solver"):
        KernelRidge(RBF(), solver="lu").fit(X, y)
    with pytest.raises(ValueError, match="sample_weight"):
        KernelRidge(RBF()).fit(X, y, sample_weight=-np.ones(30))
    with pytest.raises(ValueError, match="features"):
        KernelRidge(RBF()).fit(X, y).predict(Xt[:, :2])
    with pytest.raises(ValueError, match="square"):
        KernelRidge("precomputed").fit(X, y)
    with pytest.raises(TypeError, match="kernel"):
        KernelRidge(kernel=3).fit(X, y)


def test_ridgeless_singular_falls_back_to_least_squares_like_sklearn():
    X = np.repeat(np.arange(5.0)[:, None], 2, axis=0)  # duplicated points: K singular
    y = np.arange(10.0)
    ref = SkKernelRidge(alpha=0.0, kernel="rbf", gamma=GAMMA)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = ref.fit(X, y).predict(X)
    with pytest.warns(RuntimeWarning, match="least-squares"):
        pred = KernelRidge(RBF(LS), alpha=0.0, solver="cholesky").fit(X, y).predict(X)
    assert np.allclose(np.asarray(pred), ref, atol=1e-6)


_MEMORY_CODE = textwrap.dedent("""
    import json, math, resource, warnings, torch, torchkern as tk
    from torchkern.gram import FeatureKernelMatrix
    torch.manual_seed(0)
    n, d = 100_000, 5
    X = torch.randn(n, d)
    y = torch.sin(X).sum(1)
    W, b = torch.randn(d, 200), 2 * math.pi * torch.rand(200)
    K = FeatureKernelMatrix(math.sqrt(2 / 200) * torch.cos(X @ W + b))
    out = {}
    for name, model, data in [
            ("cg", tk.KernelRidge("precomputed", alpha=1e3, solver="cg", n_centers=20,
                                  tol=1e-3, max_iter=30), K),
            ("nystrom", tk.KernelRidge(tk.RBF(1.0), alpha=1e3, solver="nystrom", n_centers=200,
                                       tol=1e-3, max_iter=30, random_state=0), X)]:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model.fit(data, y)
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        out[name] = dict(growth_mb=(after - before) / 1024, solver=model.solver_,
                         finite=bool(torch.isfinite(model.dual_coef_).all()),
                         warnings=[w.category.__name__ for w in caught])
    print(json.dumps(out))
""")


def test_lazy_solvers_at_100k_points_stay_far_below_n_squared_bytes():
    # n = 100,000 points, float32, d = 5: a dense Gram matrix would take n² · 4 bytes = 40 GB.
    # "cg": an RBF formula matrix costs n² kernel evaluations per CG step (minutes on a
    # 2-core CPU), so its Gram matrix here is the lazy product Φ Φᵀ of 200 random Fourier
    # features of an RBF kernel — the solver path (pivoted-Cholesky preconditioner from
    # K.diag()/K.cols(), CG on the lazy K + αI) is the same for every lazy K; that no
    # dense n × n piece is taken from a formula matrix is checked above with to_dense
    # forbidden. "nystrom": the RBF formula with m = 200 centers; K_nm (20M entries,
    # 80 MB in float32) is stored once (under config.materialize_max_bytes), a small
    # fraction of the 40 GB n × n Gram. α = 10³ (λ = α/n = 10⁻²)
    # keeps both solves to a few iterations.
    res = subprocess.run([sys.executable, "-c", _MEMORY_CODE], capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    n = 100_000
    for name, r in out.items():
        assert r["finite"] and r["solver"] == name, r
        assert "ConvergenceWarning" not in r["warnings"], r
        assert r["growth_mb"] < 400, (name, r)
        assert r["growth_mb"] * 2**20 < n * n / 25, (name, r)


def test_nystrom_with_numerically_singular_center_gram_matches_sklearn_features():
    # A smooth kernel on many close centers: K_mm has eigenvalues down to round-off, so
    # the β-form normal equations are only semi-definite. The fit must still equal ridge
    # regression on scikit-learn's Nystroem features built from the same centers.
    from sklearn.kernel_approximation import Nystroem as SkNystroem
    from sklearn.linear_model import Ridge

    g = torch.Generator().manual_seed(3)
    X = torch.rand(800, 2, generator=g, dtype=torch.float64) * 4 - 2
    y = torch.sin(2 * X[:, 0]) * torch.cos(X[:, 1])
    Xt = torch.rand(200, 2, generator=g, dtype=torch.float64) * 4 - 2
    ls = 1.2
    est = KernelRidge(RBF(lengthscale=ls), alpha=1e-2, solver="nystrom", n_centers=400,
                      tol=1e-10, random_state=0).fit(X, y)
    Z = np.asarray(X[est.center_indices_])
    assert np.linalg.eigvalsh(rbf_kernel(Z, gamma=1 / (2 * ls ** 2))).min() < 1e-12
    feats = SkNystroem(gamma=1 / (2 * ls ** 2), n_components=len(Z)).fit(Z)
    ridge = Ridge(alpha=1e-2, fit_intercept=False, solver="svd")
    ridge.fit(feats.transform(np.asarray(X)), np.asarray(y))
    ref = ridge.predict(feats.transform(np.asarray(Xt)))
    np.testing.assert_allclose(np.asarray(est.predict(Xt)), ref, rtol=1e-6, atol=1e-6)
