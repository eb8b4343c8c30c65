import numpy as np
import pytest
import torch
from sklearn.cluster import SpectralClustering as SkSpectral
from sklearn.datasets import make_moons
from sklearn.metrics import adjusted_rand_score

import torchkern
from torchkern import SpectralClustering

from tests._invariants import assert_same_partition


def test_two_moons_and_sklearn_agreement():
    X, y = make_moons(n_samples=300, noise=0.05, random_state=0)
    k = torchkern.RBF(0.15)
    sc = SpectralClustering(k, n_clusters=2, random_state=0).fit(X)
    assert adjusted_rand_score(y, np.asarray(sc.labels_)) > 0.95
    A = np.asarray(k(torch.tensor(X)).to_dense().detach())
    sk = SkSpectral(n_clusters=2, affinity="precomputed", random_state=0).fit(A)
    assert adjusted_rand_score(sk.labels_, np.asarray(sc.labels_)) > 0.99
    pre = SpectralClustering("precomputed", n_clusters=2, random_state=0).fit(A)
    # the same partition: the cluster numbers follow the eigenvectors' signs (rounding)
    assert_same_partition(pre.labels_, sc.labels_)


def test_lazy_operator_equals_dense():
    X, y = make_moons(n_samples=600, noise=0.06, random_state=1)
    k = torchkern.RBF(0.2)
    dense = SpectralClustering(k, n_clusters=2, random_state=0, backend="dense").fit(X)
    lazy = SpectralClustering(k, n_clusters=2, random_state=0, backend="blocked").fit(X)
    # reference spectrum by dense linear algebra
    A = k(torch.tensor(X)).to_dense().detach()
    s = A.sum(1).rsqrt()
    ref = torch.linalg.eigvalsh(s[:, None] * A * s[None, :]).flip(0)[:2]
    torch.testing.assert_close(torch.as_tensor(lazy.eigenvalues_), ref, rtol=1e-8, atol=1e-8)
    torch.testing.assert_close(torch.as_tensor(dense.eigenvalues_), ref, rtol=1e-10, atol=1e-10)
    assert adjusted_rand_score(np.asarray(dense.labels_), np.asarray(lazy.labels_)) == 1.0
    assert adjusted_rand_score(y, np.asarray(lazy.labels_)) > 0.95


def test_unnormalized_uses_laplacian_bottom_eigenvalues():
    X, y = make_moons(n_samples=200, noise=0.05, random_state=2)
    k = torchkern.RBF(0.15)
    sc = SpectralClustering(k, n_clusters=2, normalized=False, random_state=0).fit(X)
    A = k(torch.tensor(X)).to_dense().detach()
    L = torch.diag(A.sum(1)) - A
    ref = torch.linalg.eigvalsh(L)[:2]
    torch.testing.assert_close(torch.as_tensor(sc.eigenvalues_), ref, rtol=1e-8, atol=1e-8)
    assert adjusted_rand_score(y, np.asarray(sc.labels_)) > 0.95


def test_bad_input():
    X = torch.randn(10, 2, dtype=torch.float64)
    with pytest.raises(ValueError, match="n_clusters"):
        SpectralClustering(n_clusters=0).fit(X)
    A = -torch.ones(5, 5, dtype=torch.float64)
    with pytest.raises(ValueError, match="affinity"):
        SpectralClustering("precomputed", n_clusters=2).fit(A)
    with pytest.raises(ValueError, match="square"):
        SpectralClustering("precomputed", n_clusters=2).fit(torch.ones(5, 4, dtype=torch.float64))
