"""EasyMKL and the heuristic combiners against MKLpy 0.6's weights on its own examples.

The reference weights are in mkl_references.npz, written by make_mkl_references.py with
MKLpy 0.6 (a local test peer, not installed in CI) from MKLpy's own Gram matrices; here
the Gram matrices are rebuilt with torchkern's kernels.
"""
import os

import numpy as np
import pytest
import torch
from sklearn.datasets import load_breast_cancer, load_iris
from sklearn.svm import SVC as SkSVC

import torchkern
from torchkern.learning import (MultipleKernel, cka_weights, easymkl_weights,
                                fheuristic_weights)
from torchkern.supervised import CKA, AverageMKL, EasyMKL, FHeuristic

F64 = torch.float64
REF = np.load(os.path.join(os.path.dirname(__file__), "mkl_references.npz"))


def _breast_cancer():
    # MKLpy's example: features rescaled to [0, 1], then each sample to unit norm;
    # homogeneous polynomial kernels of degree 1..10 (MKLpy's rescale_01, normalization)
    X, y = load_breast_cancer(return_X_y=True)
    X = (X - X.min(0)) / (X.max(0) - X.min(0))
    X = X / np.linalg.norm(X, axis=1, keepdims=True)
    tr = REF["breast_cancer_train"]
    return torch.tensor(X[tr]), y[tr], [torchkern.Polynomial(d, offset=0.0) for d in range(1, 11)]


def _iris():
    X, y = load_iris(return_X_y=True)
    keep = y > 0
    X, y = X[keep], y[keep]
    X = (X - X.mean(0)) / X.std(0)
    tr = REF["iris_train"]
    ks = [torchkern.RBF(1 / np.sqrt(2 * g)) for g in REF["rbf_gammas"]] + [torchkern.Linear()]
    return torch.tensor(X[tr]), y[tr], ks


DATA = {"breast_cancer": _breast_cancer, "iris": _iris}


@pytest.fixture(scope="module", params=sorted(DATA))
def problem(request):
    X, y, ks = DATA[request.param]()
    with torch.no_grad():
        grams = [k(X, backend="dense").to_dense() for k in ks]
    return request.param, X, y, ks, grams


def test_easymkl_weights_equal_mklpy(problem):
    name, X, y, ks, grams = problem
    for lam in (0.1, 0.5):
        w = easymkl_weights(grams, y, lam=lam).numpy()
        # measured: max |Δ| 2.6e-8 (breast cancer), 4.1e-8 (iris); MKLpy solves by LIBSVM
        np.testing.assert_allclose(w, REF[f"{name}_easymkl_{lam}"], atol=1e-6, rtol=0)
        assert w.sum() == pytest.approx(1.0, abs=1e-12)


def test_heuristic_weights_equal_mklpy(problem):
    name, X, y, ks, grams = problem
    # MKLpy stores these weights in float32: max |Δ| 6e-9 (breast cancer), 1.1e-8 (iris)
    np.testing.assert_allclose(fheuristic_weights(grams, y).numpy(), REF[f"{name}_fheuristic"],
                               atol=1e-6, rtol=0)
    if name == "iris":  # (the fit is the cost: the weights are 1/p)
        np.testing.assert_allclose(AverageMKL(ks).fit(X, y).weights_.numpy(),
                                   REF[f"{name}_average"], atol=1e-12)
    # CKA: M^{-1}a / ||M^{-1}a||, checked against numpy's centering HKH
    Kc = [K - K.mean(0) - K.mean(1)[:, None] + K.mean() for K in (K.numpy() for K in grams)]
    yy = np.where(y == y[0], 1.0, -1.0)
    M = np.array([[(A * B).sum() for B in Kc] for A in Kc])
    a = np.array([yy @ A @ yy for A in Kc])
    w = cka_weights(grams, y).numpy()
    if np.linalg.cond(M) < 1e8:  # iris (cond(M) = 3.5e6): measured max |Δ| 2.5e-13
        np.testing.assert_allclose(w, REF[f"{name}_cka"], atol=1e-6, rtol=0)
    else:
        # breast cancer's homogeneous polynomials of degree 1..10 are nearly collinear
        # (cond(M) = 3.8e17): M^{-1}a is not determined to any digit, ours or MKLpy's, so
        # check the defining equation instead: M w is parallel to a
        r = M @ w
        np.testing.assert_allclose(r / np.linalg.norm(r), a / np.linalg.norm(a), atol=1e-6)
    assert np.linalg.norm(w) == pytest.approx(1.0)


def test_easymkl_on_lazy_gram_matrices_equals_dense():
    X, y, ks, = _iris()
    dense = easymkl_weights([k(X, backend="dense").to_dense() for k in ks], y)
    lazy = easymkl_weights([k(X, backend="blocked") for k in ks], y)
    np.testing.assert_allclose(lazy.numpy(), dense.numpy(), atol=1e-10)
    np.testing.assert_allclose(
        fheuristic_weights([k(X, backend="blocked") for k in ks], y).numpy(),
        fheuristic_weights([k(X).to_dense() for k in ks], y).numpy(), atol=1e-12)


@pytest.mark.parametrize("cls", [EasyMKL, FHeuristic, AverageMKL])
def test_combiner_predicts_as_sklearn_svc_on_the_combined_gram(cls):
    X, y, ks = _iris()
    Xtr, ytr, Xte = X[:50], y[:50], X[50:]
    m = cls(MultipleKernel(ks), C=10.0).fit(Xtr, ytr)
    eta = m.weights_.numpy()
    with torch.no_grad():
        Ktr = sum(w * k(Xtr).to_dense().numpy() for w, k in zip(eta, ks))
        Kte = sum(w * k(Xte, Xtr).to_dense().numpy() for w, k in zip(eta, ks))
    sk = SkSVC(C=10.0, kernel="precomputed").fit(Ktr, ytr)
    np.testing.assert_array_equal(np.asarray(m.predict(Xte)), sk.predict(Kte))
    np.testing.assert_allclose(np.asarray(m.decision_function(Xte)), sk.decision_function(Kte),
                               rtol=1e-6, atol=1e-6)
    assert m.score(Xte, y[50:]) == pytest.approx(np.mean(sk.predict(Kte) == y[50:]))
    if cls is EasyMKL:
        np.testing.assert_allclose(eta, easymkl_weights([K[:50, :50] for K in (
            k(X).to_dense() for k in ks)], ytr).numpy(), atol=1e-12)


def test_combiner_ridge_classifier_and_subsample():
    X, y, ks = _iris()
    m = EasyMKL(ks, estimator="krr", alpha=0.5, max_samples=40, random_state=0).fit(X, y)
    idx = torch.randperm(len(y), generator=torch.Generator().manual_seed(0))[:40].numpy()
    with torch.no_grad():
        ref = easymkl_weights([k(X[idx]).to_dense() for k in ks], y[idx])
    np.testing.assert_allclose(m.weights_.numpy(), ref.numpy(), atol=1e-12)
    # the ridge on ±1 targets, by numpy: sign of K(K + αI)^{-1}t
    with torch.no_grad():
        K = sum(float(w) * k(X).to_dense().numpy() for w, k in zip(m.weights_, ks))
    t = np.where(y == 2, 1.0, -1.0)
    f = K @ np.linalg.solve(K + 0.5 * np.eye(len(y)), t)
    np.testing.assert_allclose(np.asarray(m.decision_function(X)), f, rtol=1e-6, atol=1e-8)
    np.testing.assert_array_equal(np.asarray(m.predict(X)), np.where(f > 0, 2, 1))


def test_combiners_reject_bad_input():
    X, y, ks = _iris()
    grams = [k(X).to_dense() for k in ks]
    with pytest.raises(ValueError, match="lam"):
        easymkl_weights(grams, y, lam=1.5)
    with pytest.raises(ValueError, match="exactly 2 classes"):
        fheuristic_weights(grams, np.arange(len(y)) % 3)
    with pytest.raises(ValueError, match=r"grams\[1\]"):
        cka_weights([grams[0], grams[1][:5, :5]], y)
    with pytest.raises(ValueError, match="one label per row"):
        easymkl_weights(grams, y[:-1])
    with pytest.raises(TypeError, match="grams"):
        easymkl_weights(ks[0](X), y)
    with pytest.raises(ValueError, match="binary labels"):
        EasyMKL(ks).fit(X, np.arange(len(y)) % 3)
    with pytest.raises(ValueError, match="negative weights"):
        CKA(ks).fit(X, y)  # iris' CKA weights (MKLpy's too) have negative entries
    with pytest.raises(ValueError, match="estimator"):
        FHeuristic(ks, estimator="lasso").fit(X, y)
    with pytest.raises(TypeError, match="kernels"):
        AverageMKL(ks[0]).fit(X, y)
