"""Helpers shared by the supervised estimators (private)."""
from __future__ import annotations

import torch

from .._validation import as_vector, check_sample_weight

_F64 = torch.float64


def r2_score(y, pred, sample_weight=None) -> float:
    """R² = 1 − Σw(y − ŷ)² / Σw(y − ȳ)² per target, averaged (scikit-learn's ``r2_score``
    with ``multioutput="uniform_average"``: a constant target gives 1 if predicted
    exactly, else 0); the ``score`` of the regressors."""
    Y = as_vector(y, "y", n=pred.shape[0]).to(dtype=_F64, device=pred.device)
    P = pred.to(_F64).reshape(Y.shape[0], -1)
    Y = Y.reshape(P.shape[0], -1)
    if Y.shape != P.shape:
        raise ValueError(f"y has shape {tuple(Y.shape)} but predictions have {tuple(P.shape)}")
    w = torch.ones(Y.shape[0], dtype=_F64, device=P.device) if sample_weight is None else \
        check_sample_weight(sample_weight, Y.shape[0], device=P.device)
    num = (w[:, None] * (Y - P) ** 2).sum(0)
    mean = (w[:, None] * Y).sum(0) / w.sum()
    den = (w[:, None] * (Y - mean) ** 2).sum(0)
    ok = den != 0
    r2 = torch.where(ok, 1 - num / torch.where(ok, den, torch.ones_like(den)),
                     torch.where(num == 0, torch.ones_like(num), torch.zeros_like(num)))
    return float(r2.mean())
