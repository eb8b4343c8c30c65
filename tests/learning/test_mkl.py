"""active_dims, MultipleKernel and SimpleMKL against scikit-learn, numpy and grids."""
import numpy as np
import pytest
import torch
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.svm import SVC as SkSVC

import torchkern
from torchkern.learning import MultipleKernel
from torchkern.supervised import SimpleMKL

F64 = torch.float64


def _data(n=60, d=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, d, generator=g, dtype=F64) * 4, g


# -- active_dims -----------------------------------------------------------------------
def test_active_dims_reads_only_those_columns():
    X, _ = _data(20, 4)
    Y, _ = _data(7, 4, seed=1)
    k = torchkern.RBF(lengthscale=[0.5, 2.0], active_dims=[3, 1])
    cols = X[:, [3, 1]] / torch.tensor([0.5, 2.0], dtype=F64)
    ref = rbf_kernel(cols.numpy(), (Y[:, [3, 1]] / torch.tensor([0.5, 2.0], dtype=F64)).numpy(), gamma=0.5)
    np.testing.assert_allclose(k(X, Y).to_dense().detach().numpy(), ref, rtol=1e-12)
    np.testing.assert_allclose((k(X, Y, backend="blocked") @ torch.ones(7, dtype=F64)).detach().numpy(),
                               ref.sum(1), rtol=1e-12)
    np.testing.assert_allclose(k.diag(X).detach().numpy(), np.ones(20))
    # a sum over feature groups is the sum of the kernels on the sliced inputs
    s = torchkern.Linear(active_dims=[0]) + torchkern.Matern(2.5, active_dims=[2])
    ref = X[:, :1] @ X[:, :1].T + torchkern.Matern(2.5)(X[:, [2]]).to_dense()
    np.testing.assert_allclose(s(X).to_dense().detach().numpy(), ref.detach().numpy(), rtol=1e-12)
    assert "active_dims=[3, 1]" in repr(k)


def test_active_dims_rejects_bad_values():
    X, _ = _data(5, 2)
    with pytest.raises(ValueError, match="active_dims"):
        torchkern.RBF(active_dims=[0, 0])
    with pytest.raises(ValueError, match="active_dims"):
        torchkern.RBF(active_dims=[0.5])
    with pytest.raises(ValueError, match="active_dims=\\[3\\]"):
        torchkern.RBF(active_dims=[3])(X)
    with pytest.raises(TypeError, match="active_dims"):
        torchkern.FeatureKernel(torch.nn.Linear(2, 2), torchkern.RBF(), active_dims=[0])


# -- MultipleKernel --------------------------------------------------------------------
def test_multiple_kernel_is_the_weighted_sum_on_every_backend():
    X, _ = _data(30)
    ls = [0.5, 1.0, 2.0]
    mk = MultipleKernel([torchkern.RBF(l, active_dims=[i]) for i, l in enumerate(ls)],
                        init=[0.2, 0.5, 0.3])
    w = mk.weights
    assert float(w.sum()) == pytest.approx(1.0)
    ref = sum(wi * rbf_kernel(X[:, [i]].numpy(), gamma=1 / (2 * l * l))
              for i, (wi, l) in enumerate(zip([0.2, 0.5, 0.3], ls)))
    np.testing.assert_allclose(mk(X).to_dense().detach().numpy(), ref, rtol=1e-12)
    v = torch.randn(30, 2, dtype=F64)
    np.testing.assert_allclose((mk(X, backend="blocked") @ v).detach().numpy(), ref @ v.numpy(),
                               rtol=1e-10)
    # the weights stay on the simplex under gradient steps and receive gradients
    loss = (mk(X, backend="blocked") @ v).square().sum()
    loss.backward()
    assert mk.raw_weights.grad is not None and bool(mk.raw_weights.grad.abs().sum() > 0)
    nonneg = MultipleKernel([torchkern.RBF(), torchkern.Linear()], weights="nonneg", init=[2.0, 0.5])
    np.testing.assert_allclose(nonneg.weights.detach().numpy(), [2.0, 0.5])
    fixed = MultipleKernel([torchkern.RBF(), torchkern.Linear()], weights="fixed", init=[0.0, 1.0])
    np.testing.assert_allclose(fixed(X).to_dense().numpy(), (X @ X.T).numpy(), rtol=1e-12)
    with pytest.raises(ValueError, match="weights"):
        MultipleKernel([torchkern.RBF()], weights="softmax")
    with pytest.raises(ValueError, match="one weight per kernel"):
        MultipleKernel([torchkern.RBF()], init=[0.5, 0.5])


# -- SimpleMKL -------------------------------------------------------------------------
def _one_feature_target(n=80, seed=0):
    X, g = _data(n, 4, seed)
    y = torch.sin(2 * X[:, 1]) + 0.05 * torch.randn(n, generator=g, dtype=F64)
    return X, y


def _per_feature(d=4, ls=0.5):
    return [torchkern.RBF(ls, active_dims=[i]) for i in range(d)]


def test_simplemkl_krr_weight_of_the_relevant_feature_dominates_and_J_decreases():
    X, y = _one_feature_target()
    m = SimpleMKL(_per_feature(), estimator="krr", alpha=0.1, max_iter=15, tol=1e-3).fit(X, y)
    assert float(m.weights_.sum()) == pytest.approx(1.0)
    assert int(m.weights_.argmax()) == 1 and float(m.weights_[1]) > 0.9
    h = np.array(m.objective_history_)
    assert len(h) > 2 and np.all(np.diff(h) < 0)
    # J = ½ yᵀ(K_η + αI)⁻¹y, recomputed with numpy at the learned weights
    K = sum(float(w) * rbf_kernel(X[:, [i]].numpy(), gamma=2.0) for i, w in enumerate(m.weights_))
    J = 0.5 * y.numpy() @ np.linalg.solve(K + 0.1 * np.eye(80), y.numpy())
    assert h[-1] == pytest.approx(J, rel=1e-8)
    assert m.score(X, y) > 0.95


def _krr_J(K1, K2, y, alpha, t):
    A = t * K1 + (1 - t) * K2 + alpha * np.eye(len(y))
    return 0.5 * y @ np.linalg.solve(A, y)


def test_simplemkl_krr_agrees_with_a_grid_over_two_weights():
    X, g = _data(60, 2)
    y = (torch.sin(2 * X[:, 0]) + 0.5 * X[:, 1] + 0.1 * torch.randn(60, generator=g, dtype=F64)).numpy()
    ks = [torchkern.RBF(0.5, active_dims=[0]), torchkern.Laplacian(2.0, active_dims=[1])]
    K1, K2 = (k(X).to_dense().detach().numpy() for k in ks)
    grid = np.linspace(0, 1, 401)
    Js = np.array([_krr_J(K1, K2, y, 0.05, t) for t in grid])
    m = SimpleMKL(ks, estimator="krr", alpha=0.05, max_iter=30, tol=1e-5).fit(X, y)
    assert m.objective_history_[-1] <= Js.min() + 1e-6 * abs(Js.min())
    assert float(m.weights_[0]) == pytest.approx(grid[Js.argmin()], abs=0.01)


def test_simplemkl_warns_when_it_stops_short_of_the_kkt_tolerance():
    import warnings
    from torchkern.linalg import ConvergenceWarning
    X, g = _data(60, 2)
    y = (torch.sin(2 * X[:, 0]) + 0.5 * X[:, 1] + 0.1 * torch.randn(60, generator=g, dtype=F64)).numpy()
    ks = [torchkern.RBF(0.5, active_dims=[0]), torchkern.Laplacian(2.0, active_dims=[1])]
    with pytest.warns(ConvergenceWarning, match="max_iter=1 reached with relative KKT gap"):
        m = SimpleMKL(ks, estimator="krr", alpha=0.05, max_iter=1, tol=1e-8).fit(X, y)
    assert m.n_iter_ == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        SimpleMKL(ks, estimator="krr", alpha=0.05, max_iter=30, tol=1e-5).fit(X, y)


def test_simplemkl_svc_agrees_with_a_grid_of_sklearn_svms():
    X, g = _data(60, 2, seed=2)
    y = np.where(X[:, 0].numpy() + 0.3 * torch.randn(60, generator=g, dtype=F64).numpy() > 2, 1, -1)
    ks = [torchkern.RBF(0.7, active_dims=[0]), torchkern.RBF(0.7, active_dims=[1])]
    K1, K2 = (k(X).to_dense().detach().numpy() for k in ks)

    def J(t):  # SVM dual value Σα − ½γᵀKγ, from scikit-learn
        K = t * K1 + (1 - t) * K2
        sk = SkSVC(C=1.0, kernel="precomputed", tol=1e-8).fit(K, y)
        gam, sv = sk.dual_coef_[0], sk.support_
        return np.abs(gam).sum() - 0.5 * gam @ K[np.ix_(sv, sv)] @ gam

    grid = np.linspace(0, 1, 101)
    Js = np.array([J(t) for t in grid])
    m = SimpleMKL(ks, estimator="svc", C=1.0, max_iter=30, tol=1e-4).fit(X, y)
    assert m.objective_history_[-1] == pytest.approx(Js.min(), rel=1e-2)
    assert float(m.weights_[0]) == pytest.approx(grid[Js.argmin()], abs=0.03)
    assert float(m.weights_[0]) > 0.8  # the label depends on feature 0
    assert m.score(X, y) == pytest.approx(np.mean(np.asarray(m.predict(X)) == y))
    np.testing.assert_array_equal(np.sign(np.asarray(m.decision_function(X))), np.asarray(m.predict(X)))


def _alignment(K, Y):
    n = K.shape[0]
    H = np.eye(n) - 1.0 / n
    Kc, Yc = H @ K @ H, H @ Y
    T = Yc @ Yc.T
    return (Kc * T).sum() / (np.linalg.norm(Kc) * np.linalg.norm(T))


def test_alignment_mkl_maximizes_centered_alignment():
    X, y = _one_feature_target(60)
    X = X[:, :2]
    ks = [torchkern.RBF(0.5, active_dims=[0]), torchkern.RBF(0.5, active_dims=[1])]
    K1, K2 = (k(X).to_dense().detach().numpy() for k in ks)
    Y = y.numpy()[:, None]
    grid = np.linspace(0, 1, 201)
    best = max(_alignment(t * K1 + (1 - t) * K2, Y) for t in grid)
    m = SimpleMKL(ks, estimator="krr", method="alignment", alpha=0.1).fit(X, y)
    eta = m.weights_.numpy()
    assert _alignment(eta[0] * K1 + eta[1] * K2, Y) >= best - 1e-6


def test_simplemkl_rejects_bad_parameters():
    X, y = _one_feature_target(20)
    with pytest.raises(ValueError, match="estimator"):
        SimpleMKL(_per_feature(), estimator="lasso").fit(X, y)
    with pytest.raises(ValueError, match="two classes"):
        SimpleMKL(_per_feature(), estimator="svc").fit(X, np.zeros(20))
    with pytest.raises(TypeError, match="kernels"):
        SimpleMKL(["rbf"], estimator="krr").fit(X, y)
    with pytest.raises(ValueError, match="max_samples"):
        SimpleMKL(_per_feature(), estimator="krr", method="alignment", max_samples=1).fit(X, y)


def test_alignment_mkl_with_max_samples_none_uses_every_point():
    X, y = _one_feature_target(30)
    ks = [torchkern.RBF(0.5, active_dims=[0]), torchkern.RBF(0.5, active_dims=[1])]
    every = SimpleMKL(ks, estimator="krr", method="alignment", max_samples=None).fit(X, y)
    same = SimpleMKL(ks, estimator="krr", method="alignment", max_samples=30).fit(X, y)
    torch.testing.assert_close(every.weights_, same.weights_, rtol=0, atol=1e-12)


# -- SimpleMKL on more than two classes: one weighting shared by the one-vs-one pairs ----
def _three_classes(n=60, seed=3):
    X, g = _data(n, 2, seed)
    y = np.digitize(X[:, 0].numpy() + 0.3 * torch.randn(n, generator=g, dtype=F64).numpy(),
                    [4 / 3, 8 / 3])
    return X, y


def _pairwise_J(K, y, C):
    """Σ over the one-vs-one pairs of the SVM dual value Σα − ½γᵀKγ, by scikit-learn."""
    J = 0.0
    classes = np.unique(y)
    for i, a in enumerate(classes):
        for b in classes[i + 1:]:
            idx = np.nonzero((y == a) | (y == b))[0]
            sk = SkSVC(C=C, kernel="precomputed", tol=1e-10).fit(K[np.ix_(idx, idx)], y[idx])
            gam, sv = sk.dual_coef_[0], idx[sk.support_]
            J += np.abs(gam).sum() - 0.5 * gam @ K[np.ix_(sv, sv)] @ gam
    return J


def test_simplemkl_multiclass_gradient_is_the_finite_difference_of_the_pairwise_sum():
    from torchkern.supervised.mkl import _Objective
    X, y = _three_classes()
    ks = [torchkern.RBF(0.7, active_dims=[0]), torchkern.RBF(0.7, active_dims=[1]),
          torchkern.Linear()]
    Ks = [k(X).to_dense().detach().numpy() for k in ks]
    m = SimpleMKL(ks, estimator="svc", C=1.0)
    for eta in ([0.5, 0.3, 0.2], [0.2, 0.7, 0.1]):
        eta = np.array(eta)
        J, grad, _ = _Objective(m, ks, X, y)(torch.tensor(eta))
        # measured: J to 1e-7, the gradient to 1.2e-3 of the central differences (h = 1e-4)
        J_ref = _pairwise_J(sum(e * K for e, K in zip(eta, Ks)), y, 1.0)
        assert J == pytest.approx(J_ref, rel=1e-5)
        h = 1e-4
        for r in range(3):
            e = np.eye(3)[r] * h
            up, down = (_pairwise_J(sum((a + s * b) * K for a, b, K in zip(eta, e, Ks)), y, 1.0)
                        for s in (1, -1))
            fd = (up - down) / (2 * h)
            assert float(grad[r]) == pytest.approx(fd, rel=5e-3)


def test_simplemkl_multiclass_reaches_the_grid_optimum_and_predicts_as_sklearn():
    X, y = _three_classes()
    ks = [torchkern.RBF(0.7, active_dims=[0]), torchkern.RBF(0.7, active_dims=[1])]
    K1, K2 = (k(X).to_dense().detach().numpy() for k in ks)
    grid = np.linspace(0, 1, 51)
    Js = np.array([_pairwise_J(t * K1 + (1 - t) * K2, y, 1.0) for t in grid])
    m = SimpleMKL(ks, estimator="svc", C=1.0, max_iter=30, tol=1e-4).fit(X, y)
    assert m.objective_history_[-1] == pytest.approx(Js.min(), rel=1e-6)  # measured 1.6e-8
    assert float(m.weights_[0]) == pytest.approx(grid[Js.argmin()], abs=0.02)
    assert float(m.weights_[0]) > 0.8  # the classes come from feature 0
    np.testing.assert_array_equal(m.classes_, [0, 1, 2])
    # the final classifier is scikit-learn's SVC on the learned combined Gram
    Xte, _ = _data(40, 2, seed=9)
    eta = m.weights_.numpy()
    Ktr = eta[0] * K1 + eta[1] * K2
    Kte = sum(w * k(Xte, X).to_dense().detach().numpy() for w, k in zip(eta, ks))
    sk = SkSVC(C=1.0, kernel="precomputed").fit(Ktr, y)
    np.testing.assert_array_equal(np.asarray(m.predict(Xte)), sk.predict(Kte))
    np.testing.assert_array_equal(np.asarray(m.predict(X)), sk.predict(Ktr))


def test_multiple_kernel_weights_learned_by_any_objective():
    # the simplex weights are parameters like any other: fit_kernel with the centered
    # alignment, and with the LOO error of kernel ridge, against numpy grids over η
    from torchkern.learning import fit_kernel, kernel_alignment, loo_error
    X, g = _data(60, 2)
    y = torch.sin(2 * X[:, 0]) + 0.5 * X[:, 1] + 0.1 * torch.randn(60, generator=g, dtype=F64)
    ks = [torchkern.RBF(0.5, active_dims=[0]), torchkern.Laplacian(2.0, active_dims=[1])]
    K1, K2 = (k(X).to_dense().detach().numpy() for k in ks)
    Y = y.numpy()
    grid = np.linspace(0, 1, 2001)

    def loo(K, a=0.1):
        H = K @ np.linalg.inv(K + a * np.eye(len(Y)))
        return np.mean(((Y - H @ Y) / (1 - np.diag(H))) ** 2)

    for objective, ref in ((lambda mk: -kernel_alignment(mk, X, y),
                            lambda K: -_alignment(K, Y[:, None])),
                           (lambda mk: loo_error(mk, X, y, 0.1), loo)):
        mk = MultipleKernel([k.requires_grad_(False) for k in ks])
        fit_kernel(lambda: objective(mk), mk)
        vals = np.array([ref(t * K1 + (1 - t) * K2) for t in grid])
        t_best = grid[vals.argmin()]
        t = float(mk.weights[0].detach())
        assert 0.01 < t_best < 0.99  # an interior optimum
        assert t == pytest.approx(t_best, abs=1e-3)
