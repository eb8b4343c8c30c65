import pytest
import torch

from torchkern.linalg import ConvergenceWarning, eigsh

f64 = torch.float64


@pytest.fixture(scope="module")
def gram_2000():
    # anisotropic Gaussian data so that the top eigenvalues are simple (isotropic data
    # gives near-multiplicities 1, 3, 6, ... and eigenvectors defined only up to rotation)
    g = torch.Generator().manual_seed(0)
    X = torch.randn(2000, 3, generator=g, dtype=f64) * torch.tensor([1.0, 0.7, 0.4], dtype=f64)
    sq = (X * X).sum(1)[:, None] + (X * X).sum(1)[None, :] - 2 * X @ X.T
    K = torch.exp(-sq.clamp(min=0) / 2)
    evals, evecs = torch.linalg.eigh(K)
    return K, evals.flip(0), evecs.flip(1)


def test_top10_of_rbf_gram_matches_eigh(gram_2000, matmul_only):
    K, ref_vals, ref_vecs = gram_2000
    op = matmul_only(K)  # no to_dense: the Lanczos path, not the dense fallback
    vals, vecs = eigsh(op, 10, random_state=0)
    assert vals.shape == (10,) and vecs.shape == (2000, 10)
    assert bool((vals[:-1] >= vals[1:]).all())
    torch.testing.assert_close(vals, ref_vals[:10], rtol=1e-6, atol=0)
    overlap = (ref_vecs[:, :10] * vecs).sum(0).abs()
    assert float(overlap.min()) > 1 - 1e-6
    torch.testing.assert_close(vecs.T @ vecs, torch.eye(10, dtype=f64), rtol=0, atol=1e-10)
    assert op.products < 200


def test_float32_operator(gram_2000, matmul_only):
    K, ref_vals, ref_vecs = gram_2000
    vals, vecs = eigsh(matmul_only(K.float()), 5, random_state=1)
    assert vals.dtype == torch.float32
    torch.testing.assert_close(vals.double(), ref_vals[:5], rtol=1e-5, atol=0)
    assert float((ref_vecs[:, :5] * vecs.double()).sum(0).abs().min()) > 1 - 1e-5


def _known_spectrum(n, seed):
    g = torch.Generator().manual_seed(seed)
    Q, _ = torch.linalg.qr(torch.randn(n, n, generator=g, dtype=f64))
    d = torch.cat([torch.tensor([0.1, 0.2, 0.35, 0.5, 0.7], dtype=f64), torch.linspace(1, 2, n - 5, dtype=f64)])
    return (Q * d) @ Q.T, d, Q


@pytest.mark.parametrize("which", ["largest", "smallest"])
def test_restarts_reach_a_clustered_spectrum(which, matmul_only):
    # the top of linspace(1, 2, 795) has relative gaps 1e-3: needs many restarts
    A, d, Q = _known_spectrum(800, 1)
    k = 4
    vals, vecs = eigsh(matmul_only(A), k, which=which, random_state=0)
    order = d.argsort(descending=True)
    pick = order[:k] if which == "largest" else order[-k:]
    torch.testing.assert_close(vals, d[pick], rtol=1e-10, atol=0)
    overlap = (Q[:, pick] * vecs).sum(0).abs()
    assert float(overlap.min()) > 1 - 1e-6


def test_dense_fallback_for_small_tensors():
    A, d, Q = _known_spectrum(100, 2)
    vals, vecs = eigsh(A, 3, which="smallest")
    torch.testing.assert_close(vals, torch.tensor([0.35, 0.2, 0.1], dtype=f64), rtol=1e-12, atol=0)


def test_not_converged_warns(gram_2000, matmul_only):
    K, _, _ = gram_2000
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        eigsh(matmul_only(K), 10, which="smallest", max_iter=100, random_state=0)


def test_bad_arguments():
    A = torch.eye(5, dtype=f64)
    with pytest.raises(ValueError, match="k must"):
        eigsh(A, 6)
    with pytest.raises(ValueError, match="which"):
        eigsh(A, 2, which="middle")
    with pytest.raises(TypeError, match="random_state"):
        eigsh(A, 2, random_state="seed")
