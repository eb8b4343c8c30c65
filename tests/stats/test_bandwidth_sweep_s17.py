"""The median heuristic of data at extreme scales: finite data whose squared distances
overflow (or underflow) float64. Reference: numpy's median of scipy's pdist of the data
at scale 1, times the scale (distances are homogeneous of degree 1)."""
import numpy as np
import pytest
import torch
from scipy.spatial.distance import pdist

from torchkern.stats import median_heuristic


@pytest.mark.parametrize("scale", [1e300, 1e-200, 1.0])
def test_median_heuristic_at_extreme_scales(scale):
    # the old code squared the distances: inf at 1e300, and at 1e-200 every distance
    # underflowed to 0 ("all points coincide")
    X = np.random.default_rng(0).normal(size=(41, 3))
    ref = float(np.median(pdist(X))) * scale
    got = median_heuristic(torch.tensor(X * scale))
    assert np.isfinite(got)
    np.testing.assert_allclose(got, ref, rtol=1e-13)
    if scale == 1.0:
        assert got == float(np.median(pdist(X)))  # bit for bit at ordinary scales
