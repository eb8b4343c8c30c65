"""loo_error's matrix-free path says when its probe estimate of diag (K + αI)⁻¹ leaves the
value rough, against the exact (Cholesky) leave-one-out error."""
import warnings

import pytest
import torch

import torchkern
from torchkern.learning import loo_error
from torchkern.linalg import ConvergenceWarning

F64 = torch.float64


def _data(n=300):
    g = torch.Generator().manual_seed(0)
    X = torch.rand(n, 2, generator=g, dtype=F64) * 5
    y = torch.sin(X[:, 0]) * torch.cos(X[:, 1]) + 0.05 * torch.randn(n, generator=g, dtype=F64)
    return X, y


def test_tiny_alpha_warns_where_the_value_is_off():
    X, y = _data()
    k = torchkern.RBF(0.5)
    with torch.no_grad():
        exact = float(loo_error(k, X, y, 1e-5, method="exact"))
        with pytest.warns(ConvergenceWarning, match=r"uncertain by about .*raise num_probes"):
            rough = float(loo_error(k, X, y, 1e-5, method="cg", random_state=2))
    # the old code returned this without a word
    assert abs(rough / exact - 1) > 0.5


def test_moderate_alpha_is_quiet_and_within_its_error():
    X, y = _data()
    k = torchkern.RBF(1.0)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        exact = float(loo_error(k, X, y, 0.1, method="exact"))
        for seed in range(3):
            est = float(loo_error(k, X, y, 0.1, method="cg", random_state=seed))
            assert abs(est / exact - 1) < 0.1  # _LOO_PROBE_RTOL
