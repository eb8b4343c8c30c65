"""Regression tests for what a new user met in the first hour (issue 15, defects 1-3, 5-7).

Each test compares with an independent reference: scikit-learn, NumPy dense algebra or a
closed form.
"""
import re
import warnings

import numpy as np
import pytest
import torch
from sklearn.datasets import load_diabetes
from sklearn.gaussian_process import GaussianProcessRegressor as SkGPR
from sklearn.gaussian_process.kernels import RBF as SkRBF
from sklearn.gaussian_process.kernels import ConstantKernel, WhiteKernel
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.svm import SVC as SkSVC

import torchkern as tk
from torchkern.linalg import ConvergenceWarning


# -- 1. float32 solves reach the requested tolerance ----------------------------------------
def test_readme_float32_cg_converges_at_n5000_without_warning():
    g = torch.Generator().manual_seed(0)
    X, y = torch.randn(5000, 3, generator=g), torch.randn(5000, generator=g)
    K = tk.RBF(0.5)(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        with torch.no_grad():
            alpha, info = tk.linalg.cg(K.add_diag(1.0), y, return_info=True)
    assert alpha.dtype == torch.float32 and info.converged
    # float64 checks: against the float32 Gram the solver was given (tol = 1e-6) ...
    a64, y64 = alpha.double().numpy(), y.double().numpy()
    with torch.no_grad():
        A32 = K.to_dense().double().numpy()
    A32[np.diag_indices(5000)] += 1.0
    assert np.linalg.norm(y64 - A32 @ a64) / np.linalg.norm(y64) <= 1e-6
    # ... and against scikit-learn's float64 Gram of the same points (float32 entries
    # carry ~1e-6 relative rounding, so the residual there is a few 1e-6).
    A64 = rbf_kernel(X.double().numpy(), gamma=1 / (2 * 0.5**2)) + np.eye(5000)
    assert np.linalg.norm(y64 - A64 @ a64) / np.linalg.norm(y64) <= 1e-5


# -- 2. integer and boolean inputs are float64 -------------------------------------------------
def test_integer_and_boolean_inputs_become_float64():
    X = np.array([[2**40 + 1], [2**40], [2**40 + 3]])  # float32 would merge these
    K = tk.RBF(1.0)(X, backend="dense").to_dense().detach()
    assert K.dtype == torch.float64
    d2 = np.array([[0, 1, 4], [1, 0, 9], [4, 9, 0]], dtype=np.float64)
    np.testing.assert_allclose(K.numpy(), np.exp(-d2 / 2), rtol=1e-15)
    y = np.array([1.0, 2.0, 4.0])
    est = tk.KernelRidge(tk.RBF(1.0), alpha=0.1).fit(X, y)
    ref = tk.KernelRidge(tk.RBF(1.0), alpha=0.1).fit(X.astype(np.float64), y)
    assert np.array_equal(np.asarray(est.predict(X)), np.asarray(ref.predict(X.astype(np.float64))))
    B = np.array([[True, False], [False, False], [True, True]])
    Kb = tk.Linear()(B, backend="dense").to_dense().detach()
    assert Kb.dtype == torch.float64
    np.testing.assert_array_equal(Kb.numpy(), B.astype(float) @ B.astype(float).T)


# -- 3. classifiers refuse continuous targets, as scikit-learn -----------------------------
@pytest.mark.parametrize("make", [lambda: tk.SVC(), lambda: tk.KernelLogisticRegression()])
def test_classifiers_refuse_continuous_targets(make):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(35, 2))
    with pytest.raises(ValueError, match="Unknown label type") as ours:
        make().fit(X, X[:, 0])
    with pytest.raises(ValueError, match="Unknown label type") as theirs:
        SkSVC().fit(X, X[:, 0])
    kind = re.search(r"Unknown label type: '?(\w+)", str(theirs.value)).group(1)
    assert f"Unknown label type: {kind}" in str(ours.value)
    # Integral floats are class labels, as in scikit-learn.
    y = (X[:, 0] > 0).astype(np.float64) * 2.0
    np.testing.assert_array_equal(np.asarray(make().fit(X, y).classes_),
                                  SkSVC().fit(X, y).classes_)


# -- 5. GP hyperparameter learning converges ------------------------------------------------
def test_gp_learning_matches_sklearn_on_diabetes():
    X, y = load_diabetes(return_X_y=True)
    n = len(y)
    sk = SkGPR(ConstantKernel(1.0) * SkRBF(1.0) + WhiteKernel(1.0), normalize_y=True,
               random_state=0).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        gp = tk.GaussianProcessRegressor(1.0 * tk.RBF(1.0), noise=1.0, normalize_y=True)
        gp.fit(X, y, optimize=True)
    ours = -float(gp.log_marginal_likelihood()) / n
    theirs = -sk.log_marginal_likelihood_value_ / n
    assert ours <= theirs + 1e-7 * abs(theirs)  # as good or better, per sample
    assert abs(gp.score(X, y) - sk.score(X, y)) < 1e-4
    assert gp.n_iter_ < 100 and gp.loss_history_[-1] == pytest.approx(ours, rel=1e-9)
    ell = sk.kernel_.k1.k2.length_scale
    assert float(gp.kernel_.base.lengthscale.detach()) == pytest.approx(ell, rel=1e-3)
    assert gp.noise_ == pytest.approx(sk.kernel_.k2.noise_level, rel=1e-3)


def test_gp_warns_when_learning_stops_early():
    X, y = load_diabetes(return_X_y=True)
    gp = tk.GaussianProcessRegressor(1.0 * tk.RBF(1.0), noise=1.0, normalize_y=True)
    with pytest.warns(ConvergenceWarning, match="stopped after 2 iterations.*raise n_iter"):
        gp.fit(X[:200], y[:200], optimize=True, n_iter=2)
    assert gp.n_iter_ == 2 and len(gp.loss_history_) == 3


def test_gp_progress_bar_stays_and_counts_iterations(capsys):
    X, y = load_diabetes(return_X_y=True)
    gp = tk.GaussianProcessRegressor(1.0 * tk.RBF(1.0), noise=1.0, normalize_y=True,
                                     verbose=True).fit(X[:150], y[:150], optimize=True)
    last = capsys.readouterr().err.replace("\r", "\n").strip().splitlines()[-1]
    assert last.startswith("GaussianProcessRegressor (L-BFGS)")
    assert f"{gp.n_iter_}/100" in last and f"loss={gp.loss_history_[-1]:.6g}" in last


# -- 7. kernel algebra and statistics a user prints ------------------------------------------
def test_builtin_sum_repr_and_readable_parameter_names():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(30, 3))
    k = sum([tk.RBF(0.5), tk.Linear()])
    K = k(X, backend="dense").to_dense().detach().numpy()
    np.testing.assert_allclose(K, rbf_kernel(X, gamma=2.0) + X @ X.T, rtol=1e-12, atol=1e-12)
    assert repr(k) == "RBF(lengthscale=0.5) + Linear()"
    assert repr(2.0 * (tk.RBF(1.0) + tk.Linear())) == "2 * (RBF(lengthscale=1) + Linear())"

    est = tk.KernelRidge(k)
    params = est.get_params()
    assert params["kernel__k1__lengthscale"] == 0.5 and "kernel__k2" in params
    assert not any("kernels__" in name for name in params)
    est.set_params(kernel__k1__lengthscale=2.0)
    K2 = est.kernel(X, backend="dense").to_dense().detach().numpy()
    np.testing.assert_allclose(K2, rbf_kernel(X, gamma=1 / 8) + X @ X.T, rtol=1e-12, atol=1e-12)
    est.set_params(kernel__kernels__0__lengthscale=0.5)  # the older name still works
    assert est.get_params()["kernel__k1__lengthscale"] == pytest.approx(0.5)


def test_float_of_mmd2_is_clean_and_gradients_still_flow():
    rng = np.random.default_rng(2)
    X, Y = rng.normal(size=(40, 2)), rng.normal(size=(50, 2)) + 0.5

    def u_stat(ell):  # the unbiased estimate by brute force in NumPy
        g = 1 / (2 * ell**2)
        Kxx, Kyy, Kxy = rbf_kernel(X, gamma=g), rbf_kernel(Y, gamma=g), rbf_kernel(X, Y, gamma=g)
        n, m = len(X), len(Y)
        return ((Kxx.sum() - n) / (n * (n - 1)) + (Kyy.sum() - m) / (m * (m - 1))
                - 2 * Kxy.mean())

    k = tk.RBF(0.8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        value = tk.stats.mmd2(X, Y, k)
        assert float(value) == pytest.approx(u_stat(0.8), rel=1e-12)
    (g,) = torch.autograd.grad(value, k.raw_lengthscale)
    h = 1e-6
    fd = (u_stat(0.8 + h) - u_stat(0.8 - h)) / (2 * h)
    dl_draw = float(torch.sigmoid(k.raw_lengthscale.detach()))  # d softplus(r) / dr
    assert float(g) == pytest.approx(fd * dl_draw, rel=1e-6)


def test_kernel_cca_and_klr_progress_bars_stay_and_show_progress(capsys):
    X, y = load_diabetes(return_X_y=True)
    cca = tk.KernelCCA(tk.RBF(3.0), tk.RBF(1.0), n_components=1, verbose=True)
    cca.fit(X[:120], y[:120])
    last = capsys.readouterr().err.replace("\r", "\n").strip().splitlines()[-1]
    assert last.startswith("KernelCCA") and "3/3" in last
    assert f"ρ₁ = {float(cca.canonical_correlations_[0]):.4g}" in last
    labels = (y[:200] > np.median(y[:200])).astype(int)
    klr = tk.KernelLogisticRegression(tk.RBF(3.0), C=1.0, tol=1e-8, verbose=True)
    klr.fit(X[:200], labels)
    last = capsys.readouterr().err.replace("\r", "\n").strip().splitlines()[-1]
    # a full bar: the relative Newton step went below tol = 1e-8, 8 digits
    assert last.startswith("KernelLogisticRegression (Newton): 100%") and "8.0/8.0" in last
    assert f"{klr.n_iter_} it" in last


# -- NumPy scalars as hyperparameters (grids built with np.arange / np.logspace) ------------
@pytest.mark.parametrize("make, params, target", [
    (lambda **p: tk.KernelPCA(eigen_solver="randomized", random_state=0, **p),
     dict(n_components=3, max_iter=50), None),
    (lambda **p: tk.KernelKMeans(random_state=0, **p), dict(n_clusters=3, n_init=2), None),
    (lambda **p: tk.SpectralClustering(random_state=0, **p), dict(n_clusters=2), None),
    (lambda **p: tk.KernelRidge(solver="nystrom", random_state=0, **p),
     dict(n_centers=20, tol=1e-8), "regression"),
    (lambda **p: tk.SVC(**p), dict(max_iter=1000, working_set_size=4), "classification"),
    (lambda **p: tk.KernelLogisticRegression(**p), dict(max_iter=50), "classification"),
    (lambda **p: tk.approx.Nystroem(random_state=0, **p), dict(n_components=20), None),
])
def test_numpy_scalar_hyperparameters_are_accepted(make, params, target):
    # np.int64 / np.float32 from a parameter grid fit exactly as the Python numbers do.
    g = np.random.default_rng(0)
    X = g.normal(size=(80, 3))
    y = {"regression": X[:, 0] + 0.1 * g.normal(size=80),
         "classification": (X[:, 0] > 0).astype(int), None: None}[target]
    as_numpy = {k: (np.int64(v) if isinstance(v, int) else np.float32(v))
                for k, v in params.items()}
    ref, est = make(**params).fit(X, y), make(**as_numpy).fit(X, y)
    out = (lambda m: m.predict(X)) if target else (
        lambda m: m.labels_ if hasattr(m, "labels_") else m.transform(X))
    np.testing.assert_allclose(np.asarray(out(est)), np.asarray(out(ref)), rtol=1e-6,
                               atol=1e-6 if target == "regression" else 0)
    with pytest.raises(ValueError, match=next(iter(params))):
        make(**{next(iter(params)): True}).fit(X, y)  # a bool is not an int


# -- set_output and read-only arrays ------------------------------------------------------
def test_transformers_name_their_features_and_set_output_pandas():
    import pandas as pd
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    g = np.random.default_rng(0)
    X = pd.DataFrame(g.normal(size=(60, 3)), columns=["a", "b", "c"])
    pipe = make_pipeline(StandardScaler(), tk.KernelPCA(n_components=3)).set_output(
        transform="pandas")
    Z = pipe.fit_transform(X)
    assert isinstance(Z, pd.DataFrame) and list(Z.columns) == ["kernelpca0", "kernelpca1",
                                                               "kernelpca2"]
    ref = tk.KernelPCA(n_components=3).fit_transform(StandardScaler().fit_transform(X))
    np.testing.assert_allclose(Z.to_numpy(), np.asarray(ref), rtol=1e-10, atol=1e-12)
    ny = tk.approx.Nystroem(n_components=4, random_state=0).fit(X)
    assert list(ny.get_feature_names_out()) == [f"nystroem{i}" for i in range(4)]
    with pytest.raises(Exception, match="not fitted"):
        tk.KernelPCA(n_components=2).get_feature_names_out()


def test_read_only_arrays_are_taken_without_a_warning():
    A = np.random.default_rng(1).normal(size=(30, 2))
    A.flags.writeable = False  # pandas copy-on-write frames hand out such arrays
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pred = tk.KernelRidge(tk.RBF(1.0), alpha=0.1).fit(A, A[:, 0]).predict(A)
    ref = tk.KernelRidge(tk.RBF(1.0), alpha=0.1).fit(A.copy(), A[:, 0].copy()).predict(A.copy())
    np.testing.assert_array_equal(pred, ref)


# -- constructor arguments of kernels in a grid search -------------------------------------
def test_structural_kernel_arguments_are_settable_in_grid_searches():
    # kernel__n_iter / kernel__nu / kernel__degree: the kernel is rebuilt with the new
    # argument (checked by its constructor), keeping its other arguments and current
    # hyperparameter values — equal to a kernel built that way.
    from sklearn.metrics.pairwise import polynomial_kernel
    from sklearn.model_selection import GridSearchCV
    from torch_geometric.data import Data
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 3))
    m = tk.Matern(1.5, [0.7, 1.1, 0.9])
    m.set_params(nu=2.5)
    ref = tk.Matern(2.5, [0.7, 1.1, 0.9])
    np.testing.assert_array_equal(m(X, backend="dense").to_dense().detach().numpy(),
                                  ref(X, backend="dense").to_dense().detach().numpy())
    est = tk.KernelRidge(tk.Polynomial(3, offset=0.5), alpha=0.1)
    est.set_params(kernel__degree=2)
    K = est.kernel(X, backend="dense").to_dense().detach().numpy()
    np.testing.assert_allclose(K, polynomial_kernel(X, degree=2, gamma=1, coef0=0.5), rtol=1e-12)
    with pytest.raises(ValueError, match="degree"):
        tk.Polynomial(3).set_params(degree=0)
    with pytest.raises(ValueError, match="n_iter"):  # the error lists what can be set
        tk.graphs.WeisfeilerLehman().set_params(depth=2)
    graphs, labels = [], []
    for i in range(30):
        n = int(rng.integers(5, 10))
        A = np.triu((rng.random((n, n)) < (0.2 if i % 2 else 0.5)).astype(int), 1)
        graphs.append(Data(edge_index=torch.as_tensor(np.array(np.nonzero(A + A.T))),
                           x=torch.as_tensor(rng.integers(0, 3, n))[:, None], num_nodes=n))
        labels.append(i % 2)
    search = GridSearchCV(tk.SVC(tk.graphs.WeisfeilerLehman()), {"kernel__n_iter": [0, 2]},
                          cv=3).fit(graphs, labels)
    best = search.best_params_["kernel__n_iter"]
    np.testing.assert_array_equal(  # the searched estimator's kernel is that WL kernel
        search.best_estimator_.kernel_(graphs, backend="dense").to_dense().numpy(),
        tk.graphs.WeisfeilerLehman(n_iter=best)(graphs, backend="dense").to_dense().numpy())
    wl = tk.graphs.WeisfeilerLehman(n_iter=3).set_params(n_iter=1)
    np.testing.assert_array_equal(
        wl(graphs, backend="dense").to_dense().numpy(),
        tk.graphs.WeisfeilerLehman(n_iter=1)(graphs, backend="dense").to_dense().numpy())


def test_one_sample_weight_check_for_every_estimator():
    from torchkern._validation import check_sample_weight
    np.testing.assert_array_equal(check_sample_weight(2.0, 3).numpy(), [2.0, 2.0, 2.0])
    np.testing.assert_array_equal(check_sample_weight([1, 0, 2], 3).numpy(), [1.0, 0.0, 2.0])
    np.testing.assert_array_equal(check_sample_weight([-1, 2], 2, allow_negative=True).numpy(),
                                  [-1.0, 2.0])
    for bad, kw, match in (([1, 2], {}, "shape"), ([-1, 2], {}, ">= 0"),
                           ([np.nan, 1], {}, "finite"), ([0, 1], {"min_positive": 2}, "zero")):
        with pytest.raises(ValueError, match=match):
            check_sample_weight(bad, 3 if match == "shape" else 2, **kw)


# -- issue 21: tensors without data, label types, n_iter_ ---------------------------------
def test_meta_tensors_are_refused_naming_the_argument():
    meta = torch.empty(10, 2, device="meta")
    X, y = torch.randn(10, 2, dtype=torch.float64), torch.randn(10, dtype=torch.float64)
    labels = torch.arange(10) % 2
    cases = [
        ("X", lambda: tk.RBF()(meta)),
        ("Y", lambda: tk.RBF()(X, meta)),
        ("X", lambda: tk.KernelRidge().fit(meta, y)),
        ("y", lambda: tk.KernelRidge().fit(X, torch.empty(10, device="meta"))),
        ("X", lambda: tk.KernelRidge().fit(X, y).predict(meta)),
        ("X", lambda: tk.KernelRidge(kernel="precomputed").fit(torch.empty(10, 10, device="meta"), y)),
        ("y", lambda: tk.SVC().fit(X, torch.empty(10, device="meta"))),
        ("y", lambda: tk.KernelLogisticRegression().fit(X, torch.empty(10, device="meta"))),
        ("sample_weight", lambda: tk.SVC().fit(X, labels, sample_weight=torch.ones(10, device="meta"))),
        ("sample_weight", lambda: tk.KernelRidge().fit(X, y, sample_weight=torch.ones((), device="meta"))),
        ("X", lambda: tk.KernelKMeans(n_clusters=2).fit(meta)),
        ("y", lambda: tk.GaussianProcessRegressor().fit(X, torch.empty(10, device="meta"))),
    ]
    for name, call in cases:
        with pytest.raises(ValueError, match=rf"^{name} is a tensor on the 'meta' device"):
            call()
    # a hyperparameter on the meta device, at construction and when set
    with pytest.raises(ValueError, match=r"^RBF: lengthscale is a tensor on the 'meta' device"):
        tk.RBF(lengthscale=torch.ones((), device="meta"))
    k = tk.RBF()
    with pytest.raises(ValueError, match=r"^RBF: lengthscale is a tensor on the 'meta' device"):
        k.lengthscale = torch.ones((), device="meta")
    # a product with a meta vector (it returned a meta result without a word)
    with pytest.raises(ValueError, match=r"^K @ V: V is a tensor on the 'meta' device"):
        k(X) @ torch.empty(10, dtype=X.dtype, device="meta")


def _two_class_graphs(count, seed=0):
    from torch_geometric.data import Data
    g = torch.Generator().manual_seed(seed)
    graphs, y = [], []
    for i in range(count):
        n = int(torch.randint(5, 10, (1,), generator=g))
        cls = i % 2  # class 1: node label 0 twice as frequent
        p = torch.tensor([2.0, 1.0, 1.0]) if cls else torch.tensor([1.0, 1.0, 2.0])
        nodes = torch.multinomial(p, n, replacement=True, generator=g)
        A = torch.triu(torch.rand(n, n, generator=g) < 0.4, 1)
        graphs.append(Data(x=torch.nn.functional.one_hot(nodes, 3).float(),
                           edge_index=(A | A.T).nonzero().T.contiguous(), num_nodes=n))
        y.append(cls)
    return graphs, np.array(y)


@pytest.mark.parametrize("inputs", ["tensor", "graphs"])
@pytest.mark.parametrize("make", [lambda k: tk.SVC(kernel=k, tol=1e-8),
                                  lambda k: tk.KernelLogisticRegression(kernel=k)],
                         ids=["SVC", "KernelLogisticRegression"])
def test_classifiers_return_labels_of_the_type_they_were_fitted_on(make, inputs):
    # NumPy labels give NumPy predictions of their dtype (ints, strings), torch labels
    # torch predictions, for tensor data and for a list of graphs alike (the labels used
    # to follow X: a tensor or graphs gave torch, strings stayed NumPy). The predicted
    # labels themselves are scikit-learn's SVC's on the same Gram matrix.
    from torchkern.graphs import WeisfeilerLehman
    if inputs == "tensor":
        g = torch.Generator().manual_seed(0)
        X = torch.randn(40, 2, generator=g, dtype=torch.float64)
        codes = (X[:, 0] + 0.3 * X[:, 1] > 0).numpy().astype(np.int32)
        X[:, 0] += torch.as_tensor(codes * 1.0 - 0.5)  # a margin
        kernel, X_test = tk.RBF(1.0), torch.randn(25, 2, generator=g, dtype=torch.float64)
    else:
        X, codes = _two_class_graphs(30)
        codes = codes.astype(np.int32)
        kernel, X_test = WeisfeilerLehman(2), _two_class_graphs(12, seed=1)[0]
    names = np.array(["healthy", "sick"])
    ref = None
    for y in (codes, names[codes], torch.as_tensor(codes), [int(c) for c in codes]):
        est = make(kernel).fit(X, y)
        pred = est.predict(X_test)
        if isinstance(y, torch.Tensor):
            assert isinstance(pred, torch.Tensor) and pred.dtype == torch.int32
            pred = pred.numpy()
        else:
            assert isinstance(pred, np.ndarray)
            assert pred.dtype == np.asarray(y).dtype, (pred.dtype, np.asarray(y).dtype)
        if pred.dtype.kind == "U":
            pred = np.searchsorted(names, pred)
        if ref is None:
            ref = pred
        np.testing.assert_array_equal(pred, ref)
        assert isinstance(est.n_iter_, int) and est.n_iter_ >= 1
    if "SVC" in type(est).__name__:
        with torch.no_grad():
            K = kernel(X, backend="dense").to_dense().numpy()
            K_test = kernel(X_test, X, backend="dense").to_dense().numpy()
        sk = SkSVC(kernel="precomputed", tol=1e-8).fit(K, codes)
        np.testing.assert_array_equal(ref, sk.predict(K_test))
    assert 0 < ref.sum() < len(ref)  # both classes predicted: not a constant answer


def test_n_iter_is_a_python_int_everywhere():
    from torchkern.supervised import SimpleMKL
    g = np.random.default_rng(0)
    X = g.normal(size=(40, 3))
    y, labels = X[:, 0] + 0.1 * g.normal(size=40), np.arange(40) % 3
    fitted = [tk.KernelRidge(solver="cg").fit(X, y), tk.SVC().fit(X, labels),
              tk.SVC().fit(torch.as_tensor(X), torch.as_tensor(labels)), tk.SVR().fit(X, y),
              tk.KernelLogisticRegression().fit(X, labels),
              tk.GaussianProcessRegressor().fit(X, y), tk.KernelKMeans(n_clusters=3).fit(X),
              SimpleMKL([tk.RBF(0.5), tk.RBF(2.0)], estimator="krr", max_iter=3).fit(X, y)]
    for est in fitted:
        assert type(est.n_iter_) is int and est.n_iter_ >= 1, (type(est).__name__, est.n_iter_)
    # SVC with three classes: the most outer iterations over its three pair problems
    iters = []
    for a, b in ((0, 1), (0, 2), (1, 2)):
        keep = (labels == a) | (labels == b)
        iters.append(tk.SVC().fit(X[keep], labels[keep]).n_iter_)
    assert fitted[1].n_iter_ == max(iters)
