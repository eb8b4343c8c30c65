"""Legitimate but unusual inputs a scikit-learn user passes: torchkern's unsupervised
estimators give scikit-learn's numbers and attributes."""
import warnings

import numpy as np
from sklearn import cluster
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score

import torchkern as tk


def _sparse_affinity():
    X, _ = make_blobs(40, centers=[[0, 0], [6, 0]], cluster_std=0.7, random_state=1)
    A = np.exp(-0.5 * ((X[:, None] - X[None]) ** 2).sum(-1))
    A[A < 0.05] = 0
    A[0, :] = A[:, 0] = 0  # an isolated point: a zero row of the affinity
    return A


def test_spectral_precomputed_affinity_with_an_isolated_point():
    A = _sparse_affinity()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scikit-learn: "Graph is not fully connected"
        ref = cluster.SpectralClustering(n_clusters=2, affinity="precomputed",
                                         random_state=0).fit(A)
    ours = tk.SpectralClustering(n_clusters=2, kernel="precomputed", random_state=0).fit(A)
    # the isolated point's cluster is arbitrary; every other point as scikit-learn
    assert adjusted_rand_score(ours.labels_[1:], ref.labels_[1:]) == 1.0
    assert ours.labels_.shape == ref.labels_.shape
    assert ours.n_features_in_ == ref.n_features_in_ == 40


def test_spectral_precomputed_sets_n_features_in_and_refit_replaces_it():
    A = _sparse_affinity()[1:, 1:]
    sc = tk.SpectralClustering(n_clusters=2, random_state=0).fit(np.random.RandomState(0).randn(10, 3))
    assert sc.n_features_in_ == 3
    sc.set_params(kernel="precomputed").fit(A)
    ref = cluster.SpectralClustering(n_clusters=2, affinity="precomputed", random_state=0).fit(A)
    assert sc.n_features_in_ == ref.n_features_in_ == 39
    assert adjusted_rand_score(sc.labels_, ref.labels_) == 1.0


def test_fit_transform_on_a_dataframe_sets_feature_names_in_():
    import pytest
    pd = pytest.importorskip("pandas")
    from sklearn.decomposition import KernelPCA as SkKernelPCA
    X = np.random.RandomState(0).randn(20, 2)
    df = pd.DataFrame(X, columns=["u", "v"])
    ours = tk.KernelPCA(tk.RBF(), n_components=2)
    ref = SkKernelPCA(2, kernel="rbf", gamma=0.5)
    Z, R = ours.fit_transform(df), ref.fit_transform(df)
    np.testing.assert_allclose(np.abs(Z), np.abs(R), rtol=1e-8, atol=1e-10)
    np.testing.assert_array_equal(ours.feature_names_in_, ref.feature_names_in_)
    sc = tk.SpectralClustering(n_clusters=2, random_state=0)
    sc.fit_predict(df)
    np.testing.assert_array_equal(sc.feature_names_in_, ["u", "v"])


def test_kernel_pca_accepts_sklearn_arpack_solver():
    from sklearn.decomposition import KernelPCA as SkKernelPCA
    X = np.random.RandomState(0).randn(40, 3)
    ref = SkKernelPCA(3, kernel="rbf", gamma=0.5, eigen_solver="arpack", random_state=0).fit(X)
    ours = tk.KernelPCA(tk.RBF(), n_components=3, eigen_solver="arpack", random_state=0).fit(X)
    np.testing.assert_allclose(ours.eigenvalues_, ref.eigenvalues_, rtol=1e-8)
    np.testing.assert_allclose(np.abs(ours.transform(X)), np.abs(ref.transform(X)),
                               rtol=1e-6, atol=1e-8)


def test_kernel_pca_remove_zero_eig_as_sklearn():
    from sklearn.decomposition import KernelPCA as SkKernelPCA
    X = np.random.RandomState(0).randn(20, 3)
    Xd = np.r_[X[:2], X[:2]]  # two distinct points: one nonzero eigenvalue
    ref = SkKernelPCA(3, kernel="rbf", gamma=0.5, remove_zero_eig=True).fit(Xd)
    ours = tk.KernelPCA(tk.RBF(), n_components=3, remove_zero_eig=True).fit(Xd)
    assert ours.eigenvalues_.shape == ref.eigenvalues_.shape == (1,)
    np.testing.assert_allclose(ours.eigenvalues_, ref.eigenvalues_, rtol=1e-10)
    np.testing.assert_allclose(np.abs(ours.transform(X)), np.abs(ref.transform(X)),
                               rtol=1e-8, atol=1e-12)
    # without it the zero components stay, as scikit-learn's
    kept = tk.KernelPCA(tk.RBF(), n_components=3).fit(Xd)
    assert kept.transform(X).shape == SkKernelPCA(3, kernel="rbf", gamma=0.5).fit(Xd).transform(X).shape
