"""SpectralClustering's eigensolvers (Lanczos up to n = 1000, block Krylov above) against
NumPy, and its verbose progress bars."""
import numpy as np
import torch

import torchkern
from torchkern import SpectralClustering

from tests._invariants import assert_same_partition, assert_same_subspace


def _mixture(n, d=2, seed=0, scale=2.0, k=8):
    rng = np.random.default_rng(seed)
    centers = rng.normal(scale=scale, size=(k, d))
    return centers[rng.integers(0, k, size=n)] + rng.normal(size=(n, d))


def _normalized_top(X, lengthscale, k):
    """Top eigenvalues of D^{-1/2} K D^{-1/2}, built with NumPy, by dense LAPACK eigh
    (through torch: single-threaded under the fixture, where NumPy's OpenBLAS threads
    spin on the shared CPUs)."""
    K = np.exp(-((X[:, None, :] - X[None, :, :]) ** 2).sum(-1) / (2 * lengthscale**2))
    s = 1 / np.sqrt(K.sum(1))
    A = torch.from_numpy(s[:, None] * K * s[None, :])
    return torch.linalg.eigvalsh(A).flip(0)[:k].numpy()


def test_block_krylov_above_1000_equals_numpy_and_lanczos(monkeypatch):
    from torchkern.unsupervised import spectral
    X = _mixture(1300, seed=4, scale=4.0, k=5)
    for normalized in (True, False):
        fast = SpectralClustering(torchkern.RBF(1.0), 5, normalized=normalized,
                                  random_state=0).fit(torch.tensor(X))
        monkeypatch.setattr(spectral, "_LANCZOS_MAX_N", 10**9)
        slow = SpectralClustering(torchkern.RBF(1.0), 5, normalized=normalized,
                                  random_state=0).fit(torch.tensor(X))
        monkeypatch.undo()
        torch.testing.assert_close(fast.eigenvalues_, slow.eigenvalues_, rtol=1e-9, atol=1e-9)
        # the same partition; the cluster numbers follow k-means on eigenvectors whose
        # signs depend on rounding (solver, thread count, machine)
        assert_same_partition(fast.labels_, slow.labels_)
        # one embedding subspace (the top eigenvalue is double: no column order or sign)
        assert_same_subspace(fast.embedding_, slow.embedding_, atol=1e-6)
        if normalized:
            np.testing.assert_allclose(np.asarray(fast.eigenvalues_),
                                       _normalized_top(X, 1.0, 5), rtol=1e-9)


def test_spectral_verbose_shows_progress(capsys):
    X = _mixture(700, seed=3)  # 500 < n <= 1000: Lanczos on the affinity, not dense eigh
    sc = SpectralClustering(torchkern.RBF(1.0), n_clusters=3, random_state=0,
                            verbose=True).fit(torch.tensor(X))
    err = capsys.readouterr().err
    lines = err.replace("\r", "\n").strip().splitlines()
    lanczos = [ln for ln in lines if ln.startswith("SpectralClustering (Lanczos)")]
    assert lanczos and "100%" in lanczos[-1]
    assert float(lanczos[-1].split("residual ")[1].split(",")[0]) <= 1e-8
    assert any(ln.startswith("SpectralClustering (k-means)") and "10/10" in ln for ln in lines)
    quiet = SpectralClustering(torchkern.RBF(1.0), n_clusters=3, random_state=0).fit(
        torch.tensor(X))
    assert torch.equal(sc.labels_, quiet.labels_)
    np.testing.assert_allclose(np.asarray(sc.eigenvalues_), _normalized_top(X, 1.0, 3),
                               rtol=1e-10)


def test_block_krylov_verbose(capsys):
    X = _mixture(1100, seed=5, scale=4.0, k=3)
    sc = SpectralClustering(torchkern.RBF(1.0), 3, n_init=2, random_state=0,
                            verbose=True).fit(torch.tensor(X))
    lines = capsys.readouterr().err.replace("\r", "\n").strip().splitlines()
    bars = [ln for ln in lines if ln.startswith("SpectralClustering (block Krylov)")]
    assert bars and "100%" in bars[-1]
    assert float(bars[-1].split("residual ")[1].split(",")[0]) <= 1e-8
    np.testing.assert_allclose(np.asarray(sc.eigenvalues_), _normalized_top(X, 1.0, 3),
                               rtol=1e-9)
