"""Legitimate but unusual inputs a scikit-learn user passes: torchkern's regressors and
SVMs give scikit-learn's numbers, shapes, dtypes and attributes."""
import numpy as np
import pytest
import torch
from sklearn import gaussian_process as skgp
from sklearn import svm as sksvm
from sklearn.gaussian_process.kernels import RBF as SkRBF
from sklearn.gaussian_process.kernels import ConstantKernel

import torchkern as tk


def _data(n=30, d=3, seed=0):
    rng = np.random.RandomState(seed)
    return rng.randn(n, d), rng.randn(n)


def test_gp_accepts_optimizer_none_as_sklearn():
    X, y = _data()
    ours = tk.GaussianProcessRegressor(tk.RBF(lengthscale=0.8), noise=0.1, optimizer=None)
    ref = skgp.GaussianProcessRegressor(SkRBF(0.8), alpha=0.1, optimizer=None)
    mean, std = ours.fit(X, y).predict(X[:7], return_std=True)
    rmean, rstd = ref.fit(X, y).predict(X[:7], return_std=True)
    np.testing.assert_allclose(mean, rmean, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(std, rstd, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(float(ours.log_marginal_likelihood_value_),
                               ref.log_marginal_likelihood_value_, rtol=1e-10)
    with pytest.raises(ValueError, match="optimizer"):
        ours.fit(X, y, optimize=True)


@pytest.mark.parametrize("kw", [{}, {"return_std": True}, {"return_cov": True}])
def test_gp_predicts_the_prior_before_fit(kw):
    X, _ = _data(n=6, d=2)
    ours = tk.GaussianProcessRegressor(2.0 * tk.RBF(lengthscale=0.7))
    ref = skgp.GaussianProcessRegressor(ConstantKernel(2.0) * SkRBF(0.7))
    got, want = ours.predict(X, **kw), ref.predict(X, **kw)
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    for g, w in zip(got, want):
        assert isinstance(g, np.ndarray) and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)
    assert ours.sample_y(X, 3, random_state=0).shape == ref.sample_y(X, 3).shape


def test_svm_precomputed_n_features_in_and_support_dtype():
    X, y = _data()
    K = np.exp(-0.5 * ((X[:, None] - X[None]) ** 2).sum(-1))
    labels = np.where(X[:, 0] > 0, "pos", "neg")
    for ours, ref, target in [(tk.SVC("precomputed"), sksvm.SVC(kernel="precomputed"), labels),
                              (tk.SVR("precomputed"), sksvm.SVR(kernel="precomputed"), y)]:
        ours.fit(K, target)
        ref.fit(K, target)
        assert ours.n_features_in_ == ref.n_features_in_ == 30
        assert ours.fit_status_ == ref.fit_status_ == 0
        assert ours.support_.dtype == ref.support_.dtype == np.int32
        np.testing.assert_array_equal(ours.support_, ref.support_)
        if isinstance(ours, tk.SVC):
            np.testing.assert_array_equal(ours.predict(K[:5]), ref.predict(K[:5]))
        else:
            np.testing.assert_allclose(ours.predict(K[:5]), ref.predict(K[:5]), rtol=1e-3)
    # torch in: the indices are an int32 tensor, and prediction still reads its columns
    svc = tk.SVC("precomputed").fit(torch.as_tensor(K), torch.as_tensor(X[:, 0] > 0))
    assert svc.support_.dtype == torch.int32
    ref = sksvm.SVC(kernel="precomputed").fit(K, X[:, 0] > 0)
    np.testing.assert_allclose(svc.decision_function(torch.as_tensor(K[:4])).numpy(),
                               ref.decision_function(K[:4]), rtol=1e-6, atol=1e-9)


def test_dataframe_columns_give_feature_names_in_as_sklearn():
    pd = pytest.importorskip("pandas")
    from sklearn.kernel_ridge import KernelRidge as SkKernelRidge
    X, y = _data()
    df = pd.DataFrame(X, columns=["a", "b", "c"])
    labels = np.where(X[:, 0] > 0, "pos", "neg")
    for ours, ref, target in [(tk.SVC(tk.RBF()), sksvm.SVC(gamma=0.5), labels),
                              (tk.KernelRidge(tk.RBF()), SkKernelRidge(kernel="rbf", gamma=0.5), y),
                              (tk.GaussianProcessRegressor(tk.RBF()), skgp.GaussianProcessRegressor(
                                  SkRBF(1.0), alpha=1e-2, optimizer=None), y)]:
        ours.fit(df, target)
        ref.fit(df, target)
        np.testing.assert_array_equal(ours.feature_names_in_, ref.feature_names_in_)
        assert ours.feature_names_in_.dtype == object
        # a refit on an array forgets them, as scikit-learn's does
        ours.fit(X, target)
        ref.fit(X, target)
        assert not hasattr(ours, "feature_names_in_") and not hasattr(ref, "feature_names_in_")


@pytest.mark.parametrize("class_weight", ["balanced", {"a": 3.0, "c": 0.5}])
@pytest.mark.parametrize("weighted", [False, True])
def test_klr_class_weight_as_sklearn_logistic_regression(class_weight, weighted):
    from sklearn.linear_model import LogisticRegression
    rng = np.random.RandomState(0)
    X = rng.randn(40, 3)
    y = np.array(["a", "b", "c"])[rng.randint(0, 3, 40)]
    sw = None
    if weighted:
        sw = rng.rand(40)
        sw[:3] = 0
    ours = tk.KernelLogisticRegression(tk.Linear(), class_weight=class_weight).fit(X, y, sample_weight=sw)
    ref = LogisticRegression(class_weight=class_weight, tol=1e-12, max_iter=10000).fit(X, y, sample_weight=sw)
    np.testing.assert_allclose(ours.predict_proba(X), ref.predict_proba(X), rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(ours.predict(X), ref.predict(X))
