"""Sweep s18 of the NTK area: bad arguments refused by name, attributes re-checked."""
import pytest
import torch

from torchkern.ntk import NTK, infinite_width_predict


def _data():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(12, 3, dtype=torch.float64, generator=g)
    return X, X[:, 0].clone()


@pytest.mark.parametrize("kw, match", [
    (dict(t=1.0, max_iter=0), "max_iter"),      # was UnboundLocalError in the Lanczos
    (dict(t=1.0, max_iter=1.5), "max_iter"),    # was a TypeError naming nothing
    (dict(t=1.0, tol=-1.0), "tol"),             # was accepted silently
])
def test_infinite_width_predict_refuses_bad_solver_settings_by_name(kw, match):
    X, y = _data()
    with pytest.raises(ValueError, match=match):
        infinite_width_predict(NTK(depth=1), X, y, backend="blocked", **kw)
