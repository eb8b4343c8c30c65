"""Estimators on lists of graphs, each against the same estimator on the precomputed dense
Gram matrix (or, where an estimator takes no precomputed Gram, on the explicit WL
feature vectors with the linear kernel — the same kernel values)."""
import os

import numpy as np
import pytest
import torch
from sklearn.model_selection import GridSearchCV, StratifiedKFold, cross_val_score

import torchkern as tk
from torchkern.approx import Nystroem
from torchkern.graphs import WeisfeilerLehman
from torchkern.stats import HSICTest, MMDTest

from tests._invariants import assert_close_up_to_sign, assert_same_partition

import grakel  # noqa: E402  (the test extra installs it: never skipped)


@pytest.fixture(scope="module")
def mutag():
    graphs = tk.datasets.read_tu(os.path.join(os.path.dirname(grakel.__file__), "tests",
                                              "data", "MUTAG"))
    return graphs, np.array([int(d.y) for d in graphs])


def gram(k, X, Y=None):
    return k(X, Y).to_dense()


def test_svc_wl_10_fold_accuracy_on_mutag(mutag):
    graphs, y = mutag
    # A cosine-normalized kernel has values in [0, 1]; C = 10 leaves room to fit ~170
    # training graphs without the noise-level margin violations of C = 1.
    k = WeisfeilerLehman(3, normalize=True)
    cv = StratifiedKFold(10, shuffle=True, random_state=0)
    acc = cross_val_score(tk.SVC(kernel=k, C=10.0), graphs, y, cv=cv)
    assert acc.mean() >= 0.83
    ref = cross_val_score(tk.SVC(kernel="precomputed", C=10.0), gram(k, graphs).numpy(), y, cv=cv)
    np.testing.assert_array_equal(acc, ref)


def test_grid_search_over_c_on_a_list_of_graphs(mutag):
    graphs, y = mutag
    k = WeisfeilerLehman(2, normalize=True)
    cv = StratifiedKFold(5, shuffle=True, random_state=1)
    grid = {"C": [0.1, 1.0, 10.0]}
    gs = GridSearchCV(tk.SVC(kernel=k), grid, cv=cv).fit(graphs, y)
    ref = GridSearchCV(tk.SVC(kernel="precomputed"), grid, cv=cv).fit(gram(k, graphs).numpy(), y)
    np.testing.assert_array_equal(gs.cv_results_["mean_test_score"],
                                  ref.cv_results_["mean_test_score"])
    assert gs.best_params_ == ref.best_params_
    test = graphs[:20]
    np.testing.assert_array_equal(np.asarray(gs.predict(test)),
                                  np.asarray(ref.predict(gram(k, test, graphs).numpy())))


def test_kernel_ridge_on_graphs(mutag):
    graphs, y = mutag
    k = WeisfeilerLehman(3, normalize=True)
    train, test = graphs[:150], graphs[150:]
    yt = torch.as_tensor(2.0 * y[:150] - 1)
    m = tk.KernelRidge(kernel=k, alpha=0.1, solver="cholesky").fit(train, yt)
    ref = tk.KernelRidge(kernel="precomputed", alpha=0.1, solver="cholesky").fit(gram(k, train), yt)
    np.testing.assert_allclose(m.predict(test).numpy(), ref.predict(gram(k, test, train)).numpy(),
                               rtol=1e-10, atol=1e-12)


def test_kernel_pca_on_graphs(mutag):
    graphs, _ = mutag
    k = WeisfeilerLehman(3, normalize=True)
    m = tk.KernelPCA(kernel=k, n_components=3, eigen_solver="dense").fit(graphs[:120])
    ref = tk.KernelPCA(kernel="precomputed", n_components=3, eigen_solver="dense") \
        .fit(gram(k, graphs[:120]))
    Z = m.transform(graphs[120:]).numpy()
    Zr = ref.transform(gram(k, graphs[120:], graphs[:120])).numpy()
    # up to each component's sign (not entrywise |.|, which a mixed column would pass)
    assert_close_up_to_sign(Z, Zr, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("Est", [tk.KernelKMeans, tk.SpectralClustering], ids=lambda e: e.__name__)
def test_clustering_on_graphs(mutag, Est):
    graphs, _ = mutag
    k = WeisfeilerLehman(3, normalize=True)
    labels = Est(kernel=k, n_clusters=2, random_state=0).fit_predict(graphs)
    ref = Est(kernel="precomputed", n_clusters=2, random_state=0).fit_predict(gram(k, graphs))
    # the same partition; cluster numbers follow rounding-dependent eigenvector signs and
    # k-means++ seeds
    assert_same_partition(labels, ref)


def _wl_features(graphs, h=3):
    """Explicit WL count vectors: WL(h) equals the linear kernel on them."""
    return WeisfeilerLehman(h).features(graphs).to_dense()


def test_mmd_test_on_graphs(mutag):
    graphs, y = mutag
    X = [g for g, c in zip(graphs, y) if c == 0]
    Y = [g for g, c in zip(graphs, y) if c == 1]
    res = MMDTest(kernel=WeisfeilerLehman(3), n_permutations=200, random_state=0).test(X, Y)
    phi = _wl_features(X + Y)
    ref = MMDTest(kernel=tk.Linear(), n_permutations=200, random_state=0) \
        .test(phi[:len(X)], phi[len(X):])
    assert float(res.statistic) == pytest.approx(float(ref.statistic), rel=1e-12)
    assert res.p_value == ref.p_value
    assert res.reject  # mutagenic and non-mutagenic molecules differ


def test_hsic_test_on_graphs(mutag):
    graphs, y = mutag
    yt = torch.as_tensor(y, dtype=torch.float64)[:, None]
    kw = dict(kernel_y=tk.RBF(1.0), n_permutations=200, random_state=0)
    res = HSICTest(kernel_x=WeisfeilerLehman(3), **kw).test(graphs, yt)
    ref = HSICTest(kernel_x=tk.Linear(), **kw).test(_wl_features(graphs), yt)
    assert float(res.statistic) == pytest.approx(float(ref.statistic), rel=1e-10)
    assert res.p_value == ref.p_value
    assert res.reject


def test_nystroem_on_graphs(mutag):
    graphs, _ = mutag
    k = WeisfeilerLehman(3, normalize=True)
    ny = Nystroem(k, n_components=40, random_state=0).fit(graphs)
    idx = ny.component_indices_
    K = gram(k, graphs)
    Kz = K[:, idx]
    ref = Kz @ torch.linalg.pinv(K[idx][:, idx], hermitian=True, rtol=1e-10) @ Kz.T
    psi = ny.transform(graphs)
    np.testing.assert_allclose((psi @ psi.T).numpy(), ref.numpy(), atol=1e-8)
    with pytest.raises(ValueError, match="kmeans"):
        Nystroem(k, n_components=10, center_selection="kmeans").fit(graphs)
