"""The switch: a kernel wrapper whose Gram matrices of sharded data are row-sharded."""
from __future__ import annotations

import torch

from .._estimator import _SHARDED_FITS
from ..kernels.base import Kernel
from ..kernels.structured import StructuredKernel
from ._comm import gather_rows
from .gram import ShardedKernelMatrix
from .input import ShardedInput, _Group

__all__ = ["ShardedKernel"]


class ShardedKernel(StructuredKernel):
    r"""``kernel`` on data whose rows are spread over processes.

    Wrap the kernel of any torchkern estimator and pass a
    :class:`~torchkern.distributed.ShardedInput` as its training data — that is the whole
    switch; the estimator's own code runs unchanged, on every rank::

        X = ShardedInput(X_local)              # this rank's rows
        model = KernelRidge(ShardedKernel(RBF(1.0)), random_state=0)
        model.fit(X, y_local)                  # y_local: this rank's targets
        model.predict(X_test)                  # replicated test points

    ``k(X, Y)`` with a sharded X is a
    :class:`~torchkern.distributed.ShardedKernelMatrix` (rows on their ranks); with X
    replicated and Y sharded its transpose (products all-reduced); with both replicated
    the wrapped kernel's own matrix (no communication). ``vectors`` says how the vectors
    the matrix meets are held: ``"sharded"`` (each rank its rows: the solvers all-reduce
    their inner products) or ``"replicated"`` (whole on every rank, products gathered:
    for estimators that read whole vectors); ``"auto"`` (the default) is
    ``"replicated"`` except in the fits that keep their vectors sharded
    (:class:`~torchkern.KernelRidge`'s CG and Nyström solvers, which call
    :meth:`shard_vectors`). ``backend``
    chooses how each rank evaluates its block (``"dense"`` stores the rank's n_j × m
    rows). Random draws inside estimators (Nyström centres, probes) must agree on all
    ranks: pass an int ``random_state``.

    Parameters
    ----------
    kernel : Kernel
        A vector kernel (its hyperparameters are this module's: learning them works, with
        gradients all-reduced over the ranks).
    group : ProcessGroup, optional
        Default: the world.
    vectors : {"auto", "sharded", "replicated"}
        How the vectors of products, solvers and fitted estimators are held (above).
    """

    def __init__(self, kernel: Kernel, group=None, vectors: str = "auto"):
        super().__init__()
        if not isinstance(kernel, Kernel) or not getattr(kernel, "vector_input", True):
            raise TypeError(f"kernel must be a torchkern vector Kernel, got "
                            f"{type(kernel).__name__}")
        if vectors not in ("auto", "sharded", "replicated"):
            raise ValueError(f"vectors must be 'auto', 'sharded' or 'replicated', got "
                             f"{vectors!r}")
        self.base = kernel
        self._group = _Group(group)
        self.vectors = vectors
        self._keeps_sharded = False  # set by shard_vectors: this fit keeps vectors sharded

    def shard_vectors(self, X, resolve: bool = True) -> bool:
        """For an estimator whose fit keeps its vectors sharded (KernelRidge): with
        ``resolve``, turn ``vectors="auto"`` into ``"sharded"`` (on the estimator's own
        copy of the kernel); return whether the Gram matrices of ``X`` are row-sharded
        with sharded vectors (``X`` a :class:`ShardedInput`, ``vectors="sharded"``)."""
        if resolve and self.vectors == "auto" and isinstance(X, ShardedInput):
            self.vectors = "sharded"
        self._keeps_sharded = True
        return isinstance(X, ShardedInput) and self.vectors == "sharded"

    def check_input(self, X, name: str = "X", **kw):
        """A :class:`ShardedInput` as it is; anything else as the wrapped kernel takes it
        (a replicated tensor)."""
        if isinstance(X, ShardedInput):
            return X
        return self.base.check_input(X, name)

    def forward(self, X, Y=None, *, backend: str | None = None):
        X = self.check_input(X, "X")
        Y = None if Y is None else self.check_input(Y, "Y")
        if Y is not None and Y.shape[1] != X.shape[1]:
            raise ValueError(f"X has {X.shape[1]} features but Y has {Y.shape[1]}")
        if Y is not None and (Y.dtype != X.dtype or Y.device != X.device):
            Y = Y.to(dtype=X.dtype, device=X.device)
        if (self.vectors == "sharded" and not self._keeps_sharded and _SHARDED_FITS.get()
                and (isinstance(X, ShardedInput) or isinstance(Y, ShardedInput))):
            raise ValueError(
                "ShardedKernel(vectors='sharded'): this fit (or its learn_kernel) reads "
                "whole vectors; only KernelRidge's CG and Nystrom solvers keep them sharded. "
                "Use vectors='auto' (the default) or 'replicated'")
        if isinstance(X, ShardedInput):
            K = ShardedKernelMatrix(self.base, X, Y, backend)
            return K if self.vectors == "sharded" else K.replicated()
        if isinstance(Y, ShardedInput):
            K = ShardedKernelMatrix(self.base, Y, X, backend)
            return (K if self.vectors == "sharded" else K.replicated()).T
        return self.base(X, Y, backend=backend)

    def _diag(self, X) -> torch.Tensor:
        if not isinstance(X, ShardedInput):
            return self.base.diag(X)
        d = (self.base.diag(X.local) if X.sharding.n_local else
             torch.zeros(0, dtype=X.dtype, device=X.device))
        return gather_rows(d[:, None], X.sharding)[:, 0]

    def pairs(self, X, Y) -> torch.Tensor:
        X, Y = [Z.gather() if isinstance(Z, ShardedInput) else Z for Z in (X, Y)]
        return self.base.pairs(X, Y)

    def extra_repr(self) -> str:
        return "" if self.vectors == "auto" else f"vectors={self.vectors!r}"
