"""Sweep s18b of the supervised estimators: a support vector machine pickled before one of
its constructor parameters existed unpickles with that parameter's default."""
import copy
import pickle

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.svm import SVC as SkSVC

import torchkern as tk
from torchkern.supervised import SVC, SVR


def _data():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(60, 2, dtype=torch.float64, generator=g)
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).long() + (X[:, 1] > 1).long()   # three classes
    return X, y


@pytest.mark.parametrize("restore", [pickle.loads, copy.deepcopy])
def test_svc_pickled_before_break_ties_gets_its_default(restore):
    X, y = _data()
    clf = SVC(kernel=tk.RBF(lengthscale=1.0), C=2.0).fit(X, y)
    expected, text = clf.predict(X), repr(clf)
    del clf.__dict__["break_ties"]          # as pickled by a version without it
    blob = pickle.dumps(clf) if restore is pickle.loads else clf
    old = restore(blob)
    assert repr(old) == text
    assert old.get_params()["break_ties"] is False
    assert clone(old).get_params()["break_ties"] is False
    torch.testing.assert_close(old.predict(X), expected)
    # the same machine as scikit-learn's (RBF with gamma = 1/(2ℓ²) = 0.5)
    ref = SkSVC(kernel="rbf", gamma=0.5, C=2.0).fit(X.numpy(), y.numpy()).predict(X.numpy())
    np.testing.assert_array_equal(old.predict(X).numpy(), ref)


def test_svr_pickled_without_a_parameter_gets_its_default():
    X, y = _data()
    reg = SVR(kernel=tk.RBF(lengthscale=1.0), epsilon=0.2).fit(X, y.double())
    expected = reg.predict(X)
    del reg.__dict__["working_set_size"]
    old = pickle.loads(pickle.dumps(reg))
    assert old.get_params()["working_set_size"] == 256
    repr(clone(old))
    torch.testing.assert_close(old.predict(X), expected)


def test_any_estimator_pickled_without_a_parameter_gets_its_default():
    # the default is filled by the shared Estimator base, not only by the SVMs
    rng = np.random.RandomState(2)
    X, y = rng.randn(30, 2), rng.randn(30)
    ridge = tk.KernelRidge(tk.RBF(1.0), alpha=0.3).fit(X, y)
    ref = ridge.predict(X)
    del ridge.__dict__["solver"]  # a parameter the pickling version did not have
    back = pickle.loads(pickle.dumps(ridge))
    assert back.get_params()["solver"] == tk.KernelRidge().solver
    assert "KernelRidge" in repr(back)
    np.testing.assert_allclose(back.predict(X), ref, rtol=1e-12)
    assert clone(back).get_params()["alpha"] == 0.3
    pca = tk.KernelPCA(n_components=2)
    del pca.__dict__["n_components"]
    assert copy.deepcopy(pca).n_components is None


@pytest.mark.parametrize("make", [lambda: (tk.KernelRidge(tk.RBF(1.0)), "predict"),
                                  lambda: (tk.KernelPCA(tk.RBF(1.0), 2), "transform")])
def test_feature_names_checked_at_predict_as_sklearn(make):
    # feature_names_in_ was set at fit but never compared: a DataFrame with the columns
    # swapped was silently read in the wrong order
    import warnings
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(20, 2)), columns=["a", "b"])
    est, method = make()
    est.fit(X, rng.normal(size=20))
    with pytest.raises(ValueError, match="feature names should match"):
        getattr(est, method)(X[["b", "a"]])
    with pytest.warns(UserWarning, match="does not have valid feature names"):
        getattr(est, method)(X.to_numpy())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        getattr(est, method)(X)  # the same names: no warning
