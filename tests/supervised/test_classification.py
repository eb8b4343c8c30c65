"""KernelLogisticRegression against scikit-learn's LogisticRegression (its linear case),
against itself on equivalent problems, and against a Nyström-feature reference."""
import warnings

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.datasets import make_circles, make_classification
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, cross_val_score

from torchkern import RBF, KernelLogisticRegression, Linear
from torchkern.linalg import ConvergenceWarning


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    # Shared 2-core test machine: two torch threads oversubscribe it (~10x slower).
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def binary():
    return make_classification(200, 5, n_informative=3, flip_y=0.1, random_state=0)


def _sk_logreg(C, **kw):
    return LogisticRegression(C=C, tol=1e-12, max_iter=100_000, **kw)


@pytest.mark.parametrize("C", [0.05, 20.0])
def test_binary_linear_matches_sklearn(binary, C):
    X, y = binary
    ours = KernelLogisticRegression(Linear(), C=C, tol=1e-10).fit(torch.tensor(X), y)
    ref = _sk_logreg(C).fit(X, y)
    Xt = torch.tensor(X)
    np.testing.assert_allclose(np.asarray(ours.decision_function(Xt)), ref.decision_function(X), atol=1e-4)
    np.testing.assert_allclose(np.asarray(ours.intercept_), ref.intercept_, atol=1e-4)
    # the primal weights w = Xᵀα
    np.testing.assert_allclose((X.T @ np.asarray(ours.dual_coef_)), ref.coef_[0], atol=1e-4)
    np.testing.assert_allclose(np.asarray(ours.predict_proba(Xt)), ref.predict_proba(X), atol=1e-5)


def test_binary_no_intercept_matches_sklearn(binary):
    X, y = binary
    ours = KernelLogisticRegression(Linear(), C=1.0, fit_intercept=False, tol=1e-10).fit(X, y)
    ref = _sk_logreg(1.0, fit_intercept=False).fit(X, y)
    np.testing.assert_allclose(np.asarray(ours.decision_function(X)), ref.decision_function(X), atol=1e-4)
    assert float(np.abs(ours.intercept_).max()) == 0.0


def test_sample_weight_matches_sklearn_and_repeated_samples(binary):
    # C Σ w_i ℓ_i: scikit-learn's LogisticRegression with the same weights (binary with
    # zero weights, and multinomial); integer weights equal repeated samples (RBF).
    X, y = binary
    w = np.random.default_rng(0).uniform(0.0, 3.0, len(y))
    w[:10] = 0.0
    ours = KernelLogisticRegression(Linear(), C=0.7, tol=1e-10).fit(X, y, sample_weight=w)
    ref = _sk_logreg(0.7).fit(X, y, sample_weight=w)
    np.testing.assert_allclose(np.asarray(ours.decision_function(X)), ref.decision_function(X),
                               atol=1e-6)
    X4, y4 = make_classification(240, 6, n_informative=4, n_classes=4, random_state=1)
    w4 = np.random.default_rng(1).uniform(0.1, 3.0, len(y4))
    ours = KernelLogisticRegression(Linear(), C=2.0, tol=1e-10).fit(X4, y4, sample_weight=w4)
    ref = _sk_logreg(2.0).fit(X4, y4, sample_weight=w4)
    np.testing.assert_allclose(np.asarray(ours.predict_proba(X4)), ref.predict_proba(X4),
                               atol=1e-6)
    a = KernelLogisticRegression(RBF(lengthscale=1.0), tol=1e-10).fit(
        X[:50], y[:50], sample_weight=np.full(50, 2.0))
    b = KernelLogisticRegression(RBF(lengthscale=1.0), tol=1e-10).fit(
        np.repeat(X[:50], 2, axis=0), np.repeat(y[:50], 2))
    np.testing.assert_allclose(np.asarray(a.predict_proba(X)), np.asarray(b.predict_proba(X)),
                               atol=1e-8)
    with pytest.raises(ValueError, match="sample_weight"):
        KernelLogisticRegression().fit(X, y, sample_weight=-w)


@pytest.mark.parametrize("C", [0.1, 10.0])
def test_multinomial_linear_matches_sklearn(C):
    X, y = make_classification(240, 6, n_informative=4, n_classes=4, random_state=1)
    ours = KernelLogisticRegression(Linear(), C=C, tol=1e-10).fit(torch.tensor(X), y)
    ref = _sk_logreg(C).fit(X, y)  # multinomial: scikit-learn's default for > 2 classes
    P = np.asarray(ours.predict_proba(torch.tensor(X)))
    np.testing.assert_allclose(P, ref.predict_proba(X), atol=1e-4)
    np.testing.assert_allclose(P.sum(1), 1.0, atol=1e-12)
    np.testing.assert_allclose((X.T @ np.asarray(ours.dual_coef_)).T, ref.coef_, atol=1e-4)
    np.testing.assert_array_equal(np.asarray(ours.predict(torch.tensor(X))), ref.predict(X))


def test_rbf_beats_linear_on_circles():
    X, y = make_circles(400, noise=0.1, factor=0.5, random_state=0)
    Xt, yt = make_circles(400, noise=0.1, factor=0.5, random_state=1)
    lin = KernelLogisticRegression(Linear(), C=1.0).fit(X, y)
    rbf = KernelLogisticRegression(RBF(lengthscale=0.5), C=1.0).fit(X, y)
    acc_lin = float((np.asarray(lin.predict(Xt)) == yt).mean())
    acc_rbf = float((np.asarray(rbf.predict(Xt)) == yt).mean())
    assert acc_rbf > 0.95 and acc_lin < 0.7
    P = rbf.predict_proba(Xt)
    np.testing.assert_allclose(np.asarray(P.sum(1)), 1.0, atol=1e-12)
    np.testing.assert_array_equal(np.asarray(P.argmax(1)), np.asarray(rbf.predict(Xt)))
    np.testing.assert_allclose(np.exp(rbf.predict_log_proba(Xt)), np.asarray(P), atol=1e-12)


def test_optimality_conditions_rbf_multinomial():
    """At the optimum, α = −C·∂loss/∂F (per class) and Σ_i α_i = 0: checked densely."""
    X, y = make_classification(150, 4, n_informative=3, n_redundant=0, n_classes=3, random_state=3)
    C = 5.0
    est = KernelLogisticRegression(RBF(lengthscale=1.0), C=C, tol=1e-10).fit(X, y)
    K = np.asarray(RBF(lengthscale=1.0)(torch.tensor(X), backend="dense").to_dense().detach())
    A = np.asarray(est.dual_coef_)
    F = K @ A + np.asarray(est.intercept_)
    P = np.exp(F - F.max(1, keepdims=True))
    P /= P.sum(1, keepdims=True)
    G = P - np.eye(3)[y]
    np.testing.assert_allclose(A, -C * G, atol=1e-7)
    np.testing.assert_allclose(A.sum(0), 0.0, atol=1e-7)


def test_blocked_backend_and_precomputed_match_dense(binary):
    X, y = binary
    k = RBF(lengthscale=1.5)
    dense = KernelLogisticRegression(k, C=3.0, tol=1e-10, backend="dense").fit(X, y)
    blocked = KernelLogisticRegression(k, C=3.0, tol=1e-10, backend="blocked").fit(X, y)
    np.testing.assert_allclose(np.asarray(blocked.decision_function(X)),
                               np.asarray(dense.decision_function(X)), atol=1e-7)
    K = k(torch.tensor(X), backend="dense").to_dense().detach()
    pre = KernelLogisticRegression("precomputed", C=3.0, tol=1e-10).fit(K, y)
    np.testing.assert_allclose(np.asarray(pre.decision_function(K[:30])),
                               np.asarray(dense.decision_function(X[:30])), atol=1e-7)


@pytest.mark.parametrize("backend", ["dense", "blocked"])
def test_float32(binary, backend):
    # Near the optimum the float32 objective cannot show Newton's decrease; the line search
    # used to cut the step to ~1e-4 of itself and that tiny step passed for convergence,
    # leaving f 1e-3 off (dense or blocked, whichever rounding hit it)
    X, y = binary
    f64 = KernelLogisticRegression(RBF(lengthscale=1.5), C=3.0).fit(X, y)
    X32 = torch.tensor(X, dtype=torch.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        f32 = KernelLogisticRegression(RBF(lengthscale=1.5), C=3.0, backend=backend).fit(X32, y)
    d32 = f32.decision_function(X32)
    assert d32.dtype == torch.float32
    np.testing.assert_allclose(np.asarray(d32), np.asarray(f64.decision_function(X)), atol=1e-4)


def test_nystrom_all_centers_is_exact(binary):
    X, y = binary
    full = KernelLogisticRegression(RBF(lengthscale=2.0), C=2.0, tol=1e-10).fit(X, y)
    nys = KernelLogisticRegression(RBF(lengthscale=2.0), C=2.0, tol=1e-10, n_centers=len(y),
                                   random_state=0).fit(X, y)
    np.testing.assert_allclose(np.asarray(nys.decision_function(X)), np.asarray(full.decision_function(X)),
                               atol=1e-5)


def test_nystrom_matches_logreg_on_nystrom_features():
    X, y = make_circles(300, noise=0.1, factor=0.5, random_state=0)
    ls, m, C = 0.5, 30, 4.0
    est = KernelLogisticRegression(RBF(lengthscale=ls), C=C, tol=1e-10, n_centers=m,
                                   random_state=0).fit(X, y)
    assert est.dual_coef_.shape == (m,)
    # Reference: features K_nm K_mm^{-1/2} built with NumPy, then linear logistic regression.
    Z = X[np.asarray(est.centers_)]

    def gram(A, B):
        return np.exp(-((A[:, None] - B[None]) ** 2).sum(-1) / (2 * ls**2))

    th, Q = np.linalg.eigh(gram(Z, Z))
    keep = th > 1e-12 * th[-1]
    T = Q[:, keep] / np.sqrt(th[keep])
    ref = _sk_logreg(C).fit(gram(X, Z) @ T, y)
    Xt = make_circles(200, noise=0.1, factor=0.5, random_state=1)[0]
    np.testing.assert_allclose(np.asarray(est.decision_function(Xt)),
                               ref.decision_function(gram(Xt, Z) @ T), atol=1e-4)
    # with sample weights: the same weights in the feature-space regression
    w = np.random.default_rng(4).uniform(0.0, 2.0, len(y))
    est = KernelLogisticRegression(RBF(lengthscale=ls), C=C, tol=1e-10, n_centers=m,
                                   random_state=0).fit(X, y, sample_weight=w)
    ref = _sk_logreg(C).fit(gram(X, Z) @ T, y, sample_weight=w)
    np.testing.assert_allclose(np.asarray(est.decision_function(Xt)),
                               ref.decision_function(gram(Xt, Z) @ T), atol=1e-4)


def test_string_labels_and_interop(binary):
    X, y = binary
    labels = np.array(["neg", "pos"])[y]
    est = KernelLogisticRegression(Linear(), C=1.0).fit(X, labels)
    assert list(est.classes_) == ["neg", "pos"]
    assert set(est.predict(X)) <= {"neg", "pos"}
    c = clone(est)
    assert c.get_params()["C"] == 1.0 and not hasattr(c, "dual_coef_")
    grid = GridSearchCV(KernelLogisticRegression(Linear()), {"C": [0.01, 1.0]}, cv=3).fit(X, y)
    ref = GridSearchCV(LogisticRegression(), {"C": [0.01, 1.0]}, cv=3).fit(X, y)
    np.testing.assert_allclose(grid.cv_results_["mean_test_score"],
                               ref.cv_results_["mean_test_score"], atol=1e-9)
    np.testing.assert_allclose(cross_val_score(KernelLogisticRegression(Linear()), X, y, cv=3),
                               cross_val_score(LogisticRegression(), X, y, cv=3), atol=1e-9)


def test_convergence_warning(binary):
    X, y = binary
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        KernelLogisticRegression(RBF(), C=100.0, max_iter=1).fit(X, y)


@pytest.mark.parametrize("make, match", [
    (lambda X, y: KernelLogisticRegression().fit(X, np.zeros(len(y))), "at least two classes"),
    (lambda X, y: KernelLogisticRegression().fit(X, y[:-1]), "labels but X has"),
    (lambda X, y: KernelLogisticRegression().fit(np.where(np.arange(X.size).reshape(X.shape) == 3, np.nan, X), y), "X contains NaN"),
    (lambda X, y: KernelLogisticRegression().fit(X, np.where(np.arange(len(y)) == 2, np.nan, y)), "y contains NaN"),
    (lambda X, y: KernelLogisticRegression(C=0.0).fit(X, y), "C must be"),
    (lambda X, y: KernelLogisticRegression(C=-2.0).fit(X, y), "C must be"),
    (lambda X, y: KernelLogisticRegression(n_centers=0).fit(X, y), "n_centers"),
    (lambda X, y: KernelLogisticRegression(solver="lbfgs").fit(X, y), "solver"),
    (lambda X, y: KernelLogisticRegression().fit(X, y).predict(X[:, :2]), "features"),
])
def test_bad_input(binary, make, match):
    X, y = binary
    with pytest.raises(ValueError, match=match):
        make(X, y.astype(float))


def test_predict_before_fit():
    with pytest.raises(NotFittedError):
        KernelLogisticRegression().predict_proba(np.zeros((2, 2)))
