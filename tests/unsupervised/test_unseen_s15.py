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


def test_kpca_refuses_an_indefinite_gram_as_sklearn():
    """A precomputed symmetric matrix with significant negative eigenvalues: scikit-learn
    refuses it ('significant negative eigenvalues'); KernelPCA clipped them to 0 and
    returned components of a geometry that does not exist. A p.s.d. Gram of rank 3 with
    n_components = n (the rest round-off, some slightly negative) still gives
    scikit-learn's eigenvalues."""
    from sklearn.decomposition import KernelPCA as SkKPCA
    rng = np.random.default_rng(0)
    A = rng.normal(size=(8, 8))
    K = (A + A.T) / 2
    for k in (8, None):
        with pytest.raises(ValueError, match="significant negative eigenvalues"):
            SkKPCA(k, kernel="precomputed", eigen_solver="dense").fit(K)
        with pytest.raises(ValueError, match="significant negative eigenvalues"):
            tk.KernelPCA("precomputed", n_components=k).fit(K)
    # top 3 of the same indefinite matrix are positive: both accept them
    ours = tk.KernelPCA("precomputed", n_components=3).fit(K)
    ref = SkKPCA(3, kernel="precomputed", eigen_solver="dense").fit(K)
    np.testing.assert_allclose(np.asarray(ours.eigenvalues_), ref.eigenvalues_, rtol=1e-12)
    F = rng.normal(size=(8, 3))
    G = F @ F.T
    ours = tk.KernelPCA("precomputed", n_components=8).fit(G)
    ref = SkKPCA(8, kernel="precomputed", eigen_solver="dense").fit(G)
    np.testing.assert_allclose(np.asarray(ours.eigenvalues_), ref.eigenvalues_, atol=1e-12)


def test_kcca_score_of_a_constant_variate_is_not_the_correlation_of_rounding():
    """score on held-out pairs whose X is one point repeated: the canonical variates of X
    are constant, and their Pearson correlation is undefined (NumPy's corrcoef: NaN).
    score returned the correlation of rounding noise (-0.37 here), silently; one pair
    gave NaN silently. Varied pairs: the mean of NumPy's corrcoef of the variates."""
    rng = np.random.default_rng(0)
    z = rng.uniform(-1, 1, (50, 1))
    X, Y = np.c_[np.cos(2 * z), np.sin(2 * z)], z ** 2
    m = tk.KernelCCA(tk.RBF(1.0), tk.RBF(1.0), n_components=2, reg=0.1).fit(X[:40], Y[:40])
    U, V = m.transform(X[40:], Y[40:])
    expected = np.mean([np.corrcoef(U[:, j], V[:, j])[0, 1] for j in range(2)])
    assert m.score(X[40:], Y[40:]) == pytest.approx(expected, rel=1e-12)
    Xc = np.repeat(X[:1], 5, 0)
    Uc = np.asarray(m.transform(Xc))  # one point's variates five times: constant columns
    assert np.all(np.ptp(Uc, 0) <= 1e-12 * np.abs(Uc).max(0))
    with pytest.warns(RuntimeWarning, match="constant"):
        assert np.isnan(m.score(Xc, Y[:5]))
    with pytest.raises(ValueError, match="at least 2 pairs"):
        m.score(X[:1], Y[:1])


def test_spectral_refuses_a_stored_affinity_with_negative_entries():
    """A precomputed affinity with one negative pair (positive degrees): the normalized
    cut relaxation assumes nonnegative weights (Ng, Jordan and Weiss 2002); the labels
    came back silently. The same matrix with the pair set to 0 clusters as the brute-force
    normalized cut of two well-separated groups."""
    rng = np.random.default_rng(0)
    X = np.r_[rng.normal(size=(6, 2)) * 0.3, rng.normal(size=(6, 2)) * 0.3 + 4]
    A = np.exp(-((X[:, None] - X[None]) ** 2).sum(-1) / 2)
    A[0, 1] = A[1, 0] = -0.5
    with pytest.raises(ValueError, match="negative entries"):
        tk.SpectralClustering("precomputed", n_clusters=2, random_state=0).fit(A)
    A[0, 1] = A[1, 0] = 0.0
    labels = np.asarray(tk.SpectralClustering("precomputed", n_clusters=2,
                                              random_state=0).fit(A).labels_)
    d = A.sum(1)

    def ncut(mask):
        cut = A[np.ix_(mask, ~mask)].sum()
        return cut / d[mask].sum() + cut / d[~mask].sum()

    best = min((ncut(m), tuple(m)) for m in (np.array([(b >> i) & 1 for i in range(12)], bool)
                                            for b in range(1, 2**11)))
    np.testing.assert_array_equal(labels == labels[0], np.array(best[1]) == best[1][0])


def test_float32_dot_product_gram_far_from_the_origin_warns():
    """A linear kernel on float32 data 1000 spreads from the origin: the Gram's entries
    (~10⁶) carry rounding errors of ~0.1, the size of the distances kernel k-means needs.
    Against scikit-learn's KMeans (which centers the data) from the same centers the
    inertia was 0.7% off (float32 agrees to 1e-6 otherwise), silently. Now a
    RuntimeWarning says how many digits are left;
    the same data centered (the same distances) warn nothing and agree to float32
    precision, and float64 stays exact."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 2)) + np.repeat(rng.normal(scale=2, size=(4, 2)), 50, 0)
    idx = rng.choice(200, 4, replace=False)
    far = (X + 1000).astype(np.float32)
    sk = KMeans(4, init=far[idx], n_init=1, tol=0, algorithm="lloyd").fit(far)
    with pytest.warns(RuntimeWarning, match="relative precision of only"):
        km = tk.KernelKMeans(tk.Linear(), n_clusters=4, init=idx, n_init=1, tol=0).fit(far)
    assert abs(km.inertia_ / sk.inertia_ - 1) > 1e-3  # digits lost, as the warning says
    with pytest.warns(RuntimeWarning, match="KernelPCA: the float32 Gram"):
        tk.KernelPCA(tk.Linear(), n_components=2).fit(far)
    near = far - far.mean(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        km = tk.KernelKMeans(tk.Linear(), n_clusters=4, init=idx, n_init=1, tol=0).fit(near)
        assert km.inertia_ == pytest.approx(sk.inertia_, rel=1e-5)
        km64 = tk.KernelKMeans(tk.Linear(), n_clusters=4, init=idx, n_init=1,
                               tol=0).fit(far.astype(np.float64))
    sk64 = KMeans(4, init=far[idx].astype(np.float64), n_init=1, tol=0,
                  algorithm="lloyd").fit(far.astype(np.float64))
    assert km64.inertia_ == pytest.approx(sk64.inertia_, rel=1e-9)


@pytest.mark.parametrize("n_centers", [None, 40])
def test_kcca_rounding_eigen_directions_are_not_features(n_centers):
    """Linear kernels with a small reg recover classical CCA (NumPy SVD of the whitened
    cross-covariance, float64). On float32 data (and float64 data 1000 spreads off the
    origin) the centered Gram's rounding eigenvalues, above the 1e-10·λ_max cut, were
    kept as ~95 features per view, which the whitening blew up: ρ = (0.956, 0.872, 0.735)
    for (0.919, 0.728, 0.064), silently; the Nyström features were rounded in float32
    products (ρ₃ 0.50 at an offset of 100)."""
    from tests.unsupervised.test_cca import _classical_cca, _linear_views
    X, Y = _linear_views(n=200)
    ref = _classical_cca(X, Y)
    cases = [(X.astype(np.float32), Y.astype(np.float32), 1e-5),
             (X + 1000, Y + 1000, 1e-6)]
    if n_centers is not None:
        cases.append(((X + 100).astype(np.float32), (Y + 100).astype(np.float32), 2e-3))
    for A, B, rtol in cases:
        m = tk.KernelCCA(tk.Linear(), tk.Linear(), n_components=3, reg=1e-6,
                         n_centers=n_centers, random_state=0).fit(A, B)
        np.testing.assert_allclose(np.asarray(m.canonical_correlations_), ref, rtol=rtol)
