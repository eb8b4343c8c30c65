"""Which row-sharded data sets (torchkern.distributed) have a fit under way on this rank.

The estimators' ``fit`` wrapper (:mod:`torchkern._estimator`) gathers each rank's own
targets of a row-sharded ``X`` once and records ``id(X)`` here for the length of the fit;
what runs inside it — a nested estimator's fit, ``learn_kernel``'s objectives
(:mod:`torchkern.learning`), the ``ShardedKernel`` — then takes its arguments as they are
(whole on every rank) instead of gathering them again. A foundation module so that the
layers below the estimators can read it.
"""
from __future__ import annotations

import contextlib
import contextvars

__all__ = ["SHARDED_FITS", "in_sharded_fit", "sharded_fit"]

SHARDED_FITS = contextvars.ContextVar("torchkern_sharded_fits", default=frozenset())


def in_sharded_fit(X) -> bool:
    """Whether a fit on the row-sharded ``X`` is under way (its per-row values are whole)."""
    return id(X) in SHARDED_FITS.get()


@contextlib.contextmanager
def sharded_fit(X):
    """Record a fit on ``X`` for the length of the block (nothing for data that is not
    row-sharded, i.e. has no ``align_rows``)."""
    if not callable(getattr(X, "align_rows", None)) or in_sharded_fit(X):
        yield
        return
    token = SHARDED_FITS.set(SHARDED_FITS.get() | {id(X)})
    try:
        yield
    finally:
        SHARDED_FITS.reset(token)
