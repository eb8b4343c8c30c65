import math

import numpy as np
import pytest
import torch
from scipy.spatial.distance import pdist

import torchkern
from torchkern.stats import median_heuristic


def test_median_of_pairwise_distances_matches_scipy():
    g = torch.Generator().manual_seed(30)
    X = torch.randn(40, 3, generator=g, dtype=torch.float64)
    Y = torch.randn(31, 3, generator=g, dtype=torch.float64) * 2
    assert median_heuristic(X) == pytest.approx(np.median(pdist(X.numpy())), rel=1e-14)
    pooled = np.vstack([X.numpy(), Y.numpy()])
    assert median_heuristic(X, Y) == pytest.approx(np.median(pdist(pooled)), rel=1e-14)


def test_convention_rbf_is_exp_minus_one_half_at_the_median():
    g = torch.Generator().manual_seed(31)
    X = torch.randn(30, 2, generator=g, dtype=torch.float64)
    ls = median_heuristic(X)
    K = torchkern.RBF(ls)(X).to_dense().detach().numpy()
    # k = exp(−r²/(2ℓ²)) with ℓ = median r: the median off-diagonal entry is e^{−1/2}.
    assert np.median(K[np.triu_indices(30, 1)]) == pytest.approx(math.exp(-0.5), rel=1e-12)


def test_subsampling_is_reproducible_and_close():
    g = torch.Generator().manual_seed(32)
    X = torch.randn(3000, 2, generator=g, dtype=torch.float64)
    a = median_heuristic(X, max_samples=300, random_state=0)
    assert a == median_heuristic(X, max_samples=300, random_state=0)
    # Population median of ‖x − x'‖ for x − x' ~ N(0, 2I₂): √2 · √(2 ln 2).
    assert a == pytest.approx(math.sqrt(2) * math.sqrt(2 * math.log(2)), rel=0.08)


def test_duplicates_and_bad_input():
    X = torch.tensor([[0.0], [0.0], [0.0], [0.0], [3.0]], dtype=torch.float64)
    assert median_heuristic(X) == 3.0  # median 0 → median of the positive distances
    with pytest.raises(ValueError, match="coincide"):
        median_heuristic(torch.zeros(4, 2))
    with pytest.raises(ValueError, match="at least 2"):
        median_heuristic(torch.zeros(1, 2))
    with pytest.raises(ValueError, match="same number of features"):
        median_heuristic(torch.zeros(3, 2), torch.zeros(3, 1))
    with pytest.raises(ValueError, match="max_samples"):
        median_heuristic(torch.randn(3, 2), max_samples=1)
