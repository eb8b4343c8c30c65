import numpy as np
import pytest
import torch
from sklearn.cluster import KMeans
from sklearn.datasets import make_circles
from sklearn.exceptions import NotFittedError
from sklearn.metrics import adjusted_rand_score

import torchkern
from torchkern import KernelKMeans

from tests._invariants import assert_same_partition


def _feature_distances(K, labels, k):
    """Brute force: squared distances to cluster means from a dense Gram matrix."""
    n = K.shape[0]
    D = np.empty((n, k))
    for c in range(k):
        idx = np.flatnonzero(labels == c)
        D[:, c] = np.diag(K) - 2 * K[:, idx].mean(1) + K[np.ix_(idx, idx)].mean()
    return D


def test_rbf_separates_circles_where_kmeans_fails():
    X, y = make_circles(n_samples=300, factor=0.3, noise=0.05, random_state=0)
    km = KernelKMeans(torchkern.RBF(0.3), n_clusters=2, n_init=5, random_state=0).fit(X)
    assert adjusted_rand_score(y, np.asarray(km.labels_)) > 0.95
    plain = KMeans(n_clusters=2, n_init=10, random_state=0).fit(X)
    assert adjusted_rand_score(y, plain.labels_) < 0.1


def test_linear_kernel_equals_sklearn_kmeans_from_same_centers():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4)) + np.repeat(rng.normal(scale=2, size=(4, 4)), 50, 0)
    idx = rng.choice(200, 4, replace=False)
    sk = KMeans(n_clusters=4, init=X[idx], n_init=1, tol=0, algorithm="lloyd").fit(X)
    km = KernelKMeans(torchkern.Linear(), n_clusters=4, init=idx, n_init=1, tol=0).fit(X)
    np.testing.assert_array_equal(np.asarray(km.labels_), sk.labels_)
    assert km.inertia_ == pytest.approx(sk.inertia_, rel=1e-10)
    Xt = rng.normal(size=(50, 4)) * 2
    np.testing.assert_array_equal(np.asarray(km.predict(Xt)), sk.predict(Xt))


def test_sample_weight_equals_sklearn_and_repeated_samples():
    # Weighted means and inertia (Dhillon, Guan and Kulis 2004): scikit-learn's weighted
    # KMeans from the same centers for the linear kernel; integer weights equal repeated
    # samples for an RBF kernel; k-means++ seeding with weights still separates.
    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 3)) + np.repeat(rng.normal(scale=2, size=(4, 3)), 50, 0)
    w = rng.uniform(0.1, 3.0, 200)
    w[:5] = 0.0
    idx = np.array([7, 60, 110, 160])
    sk = KMeans(n_clusters=4, init=X[idx], n_init=1, tol=0, algorithm="lloyd").fit(
        X, sample_weight=w)
    km = KernelKMeans(torchkern.Linear(), n_clusters=4, init=idx, n_init=1, tol=0).fit(
        X, sample_weight=w)
    np.testing.assert_array_equal(np.asarray(km.labels_), sk.labels_)
    assert km.inertia_ == pytest.approx(sk.inertia_, rel=1e-10)
    np.testing.assert_array_equal(np.asarray(km.predict(X[:60] * 1.1)), sk.predict(X[:60] * 1.1))
    a = KernelKMeans(torchkern.RBF(2.0), n_clusters=3, init=np.array([0, 70, 140]), n_init=1,
                     tol=0).fit(X[:150], sample_weight=np.full(150, 2.0))
    b = KernelKMeans(torchkern.RBF(2.0), n_clusters=3, init=np.array([0, 140, 280]), n_init=1,
                     tol=0).fit(np.repeat(X[:150], 2, axis=0))
    np.testing.assert_array_equal(np.repeat(np.asarray(a.labels_), 2), np.asarray(b.labels_))
    assert a.inertia_ == pytest.approx(b.inertia_, rel=1e-12)
    # k-means++ with weights: as good a weighted inertia as scikit-learn's (best of 10)
    pp = KernelKMeans(torchkern.Linear(), n_clusters=4, random_state=0).fit(X, sample_weight=w)
    sk = KMeans(n_clusters=4, n_init=10, random_state=0).fit(X, sample_weight=w)
    assert pp.inertia_ <= 1.01 * sk.inertia_
    with pytest.raises(ValueError, match="sample_weight"):
        KernelKMeans(n_clusters=4).fit(X, sample_weight=-w)


def test_label_vector_init_equals_sklearn_with_those_means():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(150, 2))
    labels0 = rng.integers(0, 3, size=150)
    means = np.stack([X[labels0 == c].mean(0) for c in range(3)])
    sk = KMeans(n_clusters=3, init=means, n_init=1, tol=0, algorithm="lloyd").fit(X)
    km = KernelKMeans(torchkern.Linear(), n_clusters=3, init=labels0, n_init=1, tol=0).fit(X)
    np.testing.assert_array_equal(np.asarray(km.labels_), sk.labels_)
    assert km.inertia_ == pytest.approx(sk.inertia_, rel=1e-10)


def test_inertia_and_predict_brute_force():
    rng = np.random.default_rng(2)
    X, Xt = rng.normal(size=(120, 2)), rng.normal(size=(30, 2))
    k = torchkern.RBF(0.7)
    km = KernelKMeans(k, n_clusters=4, n_init=3, random_state=0).fit(X)
    K = np.asarray(k(torch.tensor(X)).to_dense().detach())
    labels = np.asarray(km.labels_)
    D = _feature_distances(K, labels, 4)
    assert km.inertia_ == pytest.approx(D[np.arange(120), labels].sum(), rel=1e-10)
    np.testing.assert_array_equal(D.argmin(1), labels)  # a fixed point of Lloyd
    # new points: distances need the cross Gram and the training cluster means
    Kx = np.asarray(k(torch.tensor(Xt), torch.tensor(X)).to_dense().detach())
    Dt = np.stack([-2 * Kx[:, labels == c].mean(1) + K[np.ix_(labels == c, labels == c)].mean()
                   for c in range(4)], 1)
    np.testing.assert_array_equal(np.asarray(km.predict(Xt)), Dt.argmin(1))


def test_empty_cluster_is_refilled():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(60, 2))
    init = np.zeros(60, dtype=int)
    init[:30] = 1  # cluster 2 starts empty
    km = KernelKMeans(torchkern.RBF(1.0), n_clusters=3, init=init, n_init=1).fit(X)
    counts = np.bincount(np.asarray(km.labels_), minlength=3)
    assert (counts > 0).all()
    K = np.asarray(torchkern.RBF(1.0)(torch.tensor(X)).to_dense().detach())
    D = _feature_distances(K, np.asarray(km.labels_), 3)
    assert km.inertia_ <= D[np.arange(60), np.asarray(km.labels_)].sum() * (1 + 1e-10)


def test_blocked_equals_dense_and_precomputed():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(200, 2))
    k = torchkern.RBF(0.8)
    a = KernelKMeans(k, n_clusters=3, n_init=2, random_state=0, backend="dense").fit(X)
    b = KernelKMeans(k, n_clusters=3, n_init=2, random_state=0, backend="blocked").fit(X)
    K = k(torch.tensor(X)).to_dense().detach()
    c = KernelKMeans("precomputed", n_clusters=3, n_init=2, random_state=0).fit(K)
    # the same partitions and inertia (k-means++ draws its seeds from distances that round
    # differently per backend: other seeds may reach the same partition, numbered otherwise)
    assert_same_partition(a.labels_, b.labels_)
    assert_same_partition(a.labels_, c.labels_)
    assert c.inertia_ == pytest.approx(a.inertia_, rel=1e-10)
    assert b.inertia_ == pytest.approx(a.inertia_, rel=1e-10)


def test_bad_input():
    X = torch.randn(10, 2, dtype=torch.float64)
    with pytest.raises(ValueError, match="n_clusters"):
        KernelKMeans(n_clusters=11).fit(X)
    with pytest.raises(ValueError, match="init"):
        KernelKMeans(n_clusters=3, init=[0, 1], n_init=1).fit(X)
    with pytest.raises(ValueError, match="init"):
        KernelKMeans(n_clusters=3, init="kmeans").fit(X)
    with pytest.raises(ValueError, match="init"):
        KernelKMeans(n_clusters=3, init=[0, 0, 1], n_init=1).fit(X)
    with pytest.raises(NotFittedError):
        KernelKMeans(n_clusters=2).predict(X)
