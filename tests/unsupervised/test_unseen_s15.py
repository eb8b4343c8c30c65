"""Unusual-but-valid inputs to the unsupervised estimators, against independent references
(scikit-learn, dense linear algebra, brute force)."""
import time
import warnings

import numpy as np
import pytest
from sklearn.cluster import KMeans
from sklearn.exceptions import ConvergenceWarning

import torchkern as tk


def test_kmeans_fewer_distinct_points_than_clusters_stops_as_sklearn():
    """3 distinct points, 4 clusters: scikit-learn's KMeans stops after 2 iterations with
    3 clusters and says that fewer distinct clusters were found. Kernel k-means relocated
    a duplicate into the empty cluster, the assignment emptied it again, and so on for
    max_iter=300 Lloyd iterations per restart, then warned 'did not converge ... raise
    max_iter' (which cannot help)."""
    X = np.array([[0, 0], [0, 0], [1, 0], [1, 0], [5, 5], [5, 5], [5, 5]], float)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        sk = KMeans(4, n_init=10, random_state=0).fit(X)
        km = tk.KernelKMeans(tk.Linear(), n_clusters=4, random_state=0).fit(X)
    msgs = [str(w.message) for w in rec]
    assert not any("did not converge" in m for m in msgs)
    assert any("Number of distinct clusters (3)" in m for m in msgs)
    assert km.n_iter_ < 10
    # the partition and its inertia (0) are scikit-learn's, up to the cluster names
    labels = np.asarray(km.labels_)
    pairs = {(a, b) for a, b in zip(labels, sk.labels_)}
    assert len(pairs) == 3 == len(set(labels))
    assert km.inertia_ == pytest.approx(sk.inertia_, abs=1e-12)
    np.testing.assert_array_equal(np.asarray(km.predict(X)), labels)


def test_kmeans_zero_weight_initial_center_equals_sklearn():
    """An explicit initial center of weight zero: its cluster has no mass, hence no mean.
    Relocation moved that same zero-weight point back into the empty cluster, forever
    (300 iterations, a false 'did not converge'), and predict() sent points to the
    massless cluster, whose squared norm was stored as 0 (predict(X) != labels_).
    Scikit-learn's KMeans from the same centers: the same partition and inertia."""
    rng = np.random.default_rng(1)
    X = np.r_[rng.normal(size=(6, 2)) * 0.1, rng.normal(size=(6, 2)) * 0.1 + 3, [[20, 20]]]
    w = np.r_[np.ones(12), 0.0]
    sk = KMeans(3, init=X[[0, 6, 12]], n_init=1, tol=0, algorithm="lloyd").fit(
        X, sample_weight=w)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        km = tk.KernelKMeans(tk.Linear(), n_clusters=3, init=[0, 6, 12], n_init=1,
                             tol=0).fit(X, sample_weight=w)
    labels = np.asarray(km.labels_)
    assert len({(a, b) for a, b in zip(labels, sk.labels_)}) == 3
    assert km.inertia_ == pytest.approx(sk.inertia_, rel=1e-10)
    np.testing.assert_array_equal(np.asarray(km.predict(X)), labels)
