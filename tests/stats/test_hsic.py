import itertools
import math

import numpy as np
import pytest
import torch

import torchkern
from torchkern.stats import hsic, hsic_biased, hsic_unbiased


def gram_np(A, ls):
    d2 = ((A[:, None, :] - A[None, :, :]) ** 2).sum(-1)
    return np.exp(-d2 / (2 * ls**2))


def brute_biased(K, L):
    """Gretton et al. (2005), eq. (4): the three expectations as explicit sums."""
    n = len(K)
    t1 = sum(K[i, j] * L[i, j] for i in range(n) for j in range(n)) / n**2
    t2 = sum(K[i, j] * L[i, q] for i in range(n) for j in range(n) for q in range(n)) / n**3
    t3 = (sum(K[i, j] for i in range(n) for j in range(n))
          * sum(L[q, r] for q in range(n) for r in range(n))) / n**4
    return t1 - 2 * t2 + t3


def brute_unbiased(K, L):
    """Song et al. (2012), Theorem 3: the U-statistic over distinct ordered 4-tuples,
    h(i, j, q, r) = K_ij L_ij + K_ij L_qr − 2 K_ij L_iq (symmetrization is implied by
    summing over all orderings)."""
    n = len(K)
    total, count = 0.0, 0
    for i, j, q, r in itertools.permutations(range(n), 4):
        total += K[i, j] * L[i, j] + K[i, j] * L[q, r] - 2 * K[i, j] * L[i, q]
        count += 1
    assert count == math.perm(n, 4)
    return total / count


@pytest.fixture
def pair():
    g = torch.Generator().manual_seed(5)
    X = torch.randn(9, 2, generator=g, dtype=torch.float64)
    Y = X[:, :1] ** 2 + 0.3 * torch.randn(9, 1, generator=g, dtype=torch.float64)
    return X, Y


@pytest.mark.parametrize("backend", ["dense", "blocked"])
def test_biased_matches_triple_sums(pair, backend, monkeypatch):
    monkeypatch.setattr(torchkern.config, "block_memory_mb", 0.0005)  # several row blocks
    X, Y = pair
    ref = brute_biased(gram_np(X.numpy(), 0.9), gram_np(Y.numpy(), 0.6))
    got = hsic(X, Y, torchkern.RBF(0.9), torchkern.RBF(0.6), "biased", backend=backend)
    assert got.item() == pytest.approx(ref, rel=1e-12)


@pytest.mark.parametrize("backend", ["dense", "blocked"])
def test_unbiased_matches_four_tuple_u_statistic(pair, backend, monkeypatch):
    monkeypatch.setattr(torchkern.config, "block_memory_mb", 0.0005)
    X, Y = pair
    ref = brute_unbiased(gram_np(X.numpy(), 0.9), gram_np(Y.numpy(), 0.6))
    got = hsic(X, Y, torchkern.RBF(0.9), torchkern.RBF(0.6), "unbiased", backend=backend)
    assert got.item() == pytest.approx(ref, rel=1e-11)


def test_pure_functions_accept_tensors_and_a_trace_formula(pair):
    X, Y = pair
    K = torchkern.RBF(0.9)(X).to_dense().detach()
    L = torchkern.Linear()(Y).to_dense().detach()
    n = len(K)
    H = torch.eye(n, dtype=K.dtype) - 1.0 / n
    assert hsic_biased(K, L).item() == pytest.approx(torch.trace(K @ H @ L @ H).item() / n**2,
                                                     rel=1e-12)
    assert hsic_unbiased(K, L).item() == pytest.approx(brute_unbiased(K.numpy(), L.numpy()),
                                                       rel=1e-11)


def test_unbiased_is_centered_under_independence():
    g = torch.Generator().manual_seed(6)
    kx, ky = torchkern.RBF(1.0), torchkern.RBF(1.0)
    vals = []
    for _ in range(200):
        X = torch.randn(15, 2, generator=g, dtype=torch.float64)
        Y = torch.randn(15, 1, generator=g, dtype=torch.float64)
        vals.append(hsic(X, Y, kx, ky, "unbiased").item())
    vals = np.array(vals)
    assert abs(vals.mean()) < 3 * vals.std(ddof=1) / math.sqrt(len(vals))


def test_bad_input():
    k = torchkern.RBF()
    with pytest.raises(ValueError, match="same number of"):
        hsic(torch.randn(5, 2), torch.randn(6, 2), k, k)
    with pytest.raises(ValueError, match="at least 4"):
        hsic(torch.randn(3, 2), torch.randn(3, 1), k, k, "unbiased")
    with pytest.raises(ValueError, match="same shape"):
        hsic_biased(torch.eye(3), torch.eye(4))
    with pytest.raises(ValueError, match="square"):
        hsic_biased(torch.ones(3, 4), torch.ones(3, 4))
    with pytest.raises(ValueError, match="estimator"):
        hsic(torch.randn(5, 2), torch.randn(5, 2), k, k, "linear")
    with pytest.raises(TypeError, match="kernel_y"):
        hsic(torch.randn(5, 2), torch.randn(5, 2), k, None)
