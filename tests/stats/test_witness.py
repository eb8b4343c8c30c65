import math

import numpy as np
import pytest
import torch

import torchkern
from torchkern.stats import mmd2, witness

LS = 1.1


def k_np(a, b):
    return math.exp(-float(((a - b) ** 2).sum()) / (2 * LS**2))


@pytest.fixture
def samples():
    g = torch.Generator().manual_seed(21)
    X = torch.randn(8, 3, generator=g, dtype=torch.float64)
    Y = torch.randn(6, 3, generator=g, dtype=torch.float64) + 0.8
    return X, Y


@pytest.mark.parametrize("backend", ["dense", "blocked"])
def test_witness_is_difference_of_empirical_means(samples, backend):
    X, Y = samples
    g = torch.Generator().manual_seed(22)
    Z = torch.randn(5, 3, generator=g, dtype=torch.float64)
    f = witness(X, Y, torchkern.RBF(LS), backend=backend)
    ref = [np.mean([k_np(x, z) for x in X.numpy()]) - np.mean([k_np(y, z) for y in Y.numpy()])
           for z in Z.numpy()]
    np.testing.assert_allclose(f(Z).detach().numpy(), ref, rtol=1e-12, atol=1e-15)


def test_witness_norm_and_mean_gap_are_the_biased_mmd(samples):
    # E_X̂ f − E_Ŷ f = ⟨f, μ̂_P − μ̂_Q⟩ = ‖f‖² = biased MMD² (Gretton et al. 2012, §2.3).
    X, Y = samples
    k = torchkern.RBF(LS)
    f = witness(X, Y, k)
    b = mmd2(X, Y, k, "biased").item()
    assert f.norm().item() ** 2 == pytest.approx(b, rel=1e-12)
    assert (f(X).mean() - f(Y).mean()).item() == pytest.approx(b, rel=1e-12)
    # The normalized witness f* = f/‖f‖ attains MMD = sup_{‖g‖≤1} E_P g − E_Q g.
    fs = witness(X, Y, k, normalize=True)
    assert fs.norm().item() == pytest.approx(1.0, rel=1e-12)
    assert (fs(X).mean() - fs(Y).mean()).item() == pytest.approx(math.sqrt(b), rel=1e-12)


def test_bad_input(samples):
    X, _ = samples
    with pytest.raises(ValueError, match="same number of features"):
        witness(X, torch.randn(4, 2, dtype=torch.float64), torchkern.RBF())
