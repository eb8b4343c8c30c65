r"""The row-sharded Gram matrix: each rank evaluates its own rows against all columns."""
from __future__ import annotations

import torch
from torch.func import functional_call

from ..gram import KernelMatrix, _as_index
from ._comm import agree, all_reduce_sum, gather_rows, local_rows, sum_grads
from .input import ShardedInput

__all__ = ["ShardedKernelMatrix"]


class ShardedKernelMatrix(KernelMatrix):
    r"""K_ij = k(x_i, y_j) with the rows i spread over the ranks of a process group.

    Rank j holds its rows X_j of X and every column y (for K(X, X), the rows of all ranks
    gathered once: O(n·d) per rank). A product takes a replicated V (m, r) — equal on
    every rank — and returns the replicated K V:

    .. math:: K V = \begin{bmatrix} K(X_0, Y) V \\ \vdots \\ K(X_{p-1}, Y) V \end{bmatrix},

    each block evaluated locally by the kernel's own backend (dense, blocked or KeOps:
    never more than a row block in memory unless ``"dense"``), then one all-gather of
    n·r entries. The transpose Kᵀ U (a kernel between replicated test points and sharded
    training points) is one all-reduce of the ranks' K(X_j, Y)ᵀ U_j.

    Because vectors are replicated, the solvers of :mod:`torchkern.linalg` (CG, Lanczos,
    SLQ) run on it unchanged: every inner product they take is the all-reduced one, and
    every rank computes the same iterates (as Falkon's and GPyTorch's multi-GPU products
    do, with vectors on one device; Meanti et al., "Kernel methods through the roof",
    NeurIPS 2020; Wang et al., "Exact Gaussian processes on a million data points",
    NeurIPS 2019).

    Cost per product: O(n·m·d / p) kernel evaluations per rank, one all-gather of n·r
    entries; O(n·r + n_j·block) memory per rank. ``diag()`` and ``cols(idx)`` are
    computed by row blocks and gathered; ``rows(idx)`` and ``submatrix`` are evaluated
    whole on every rank (their rows gathered first). Gradients reach the kernel's
    hyperparameters, all-reduced over the ranks (every rank must take part in the
    backward pass, as in any collective); the data are constants.

    Solvers treat it as an operator (its rows are not local): float32 CG forms its
    residuals from split float32 products rather than reading rows.
    """

    def __init__(self, kernel, X: ShardedInput, Y=None, backend=None):
        self.kernel, self.X, self.sharding = kernel, X, X.sharding
        self.group = X.group
        self.symmetric = Y is None
        self._cols = X.gather() if Y is None else (
            Y.gather() if isinstance(Y, ShardedInput) else Y)
        self.shape = (self.sharding.n, self._cols.shape[0])
        self.dtype, self.device = X.dtype, X.device
        error, self.local = None, None
        names = [name for name, p in kernel.named_parameters() if p.requires_grad]
        params = dict(kernel.named_parameters())
        # Each rank's block is a partial share: its hyperparameter gradients are summed.
        self._params = sum_grads([params[name] for name in names], self.group)
        try:
            if self.sharding.n_local:
                self.local = functional_call(kernel, dict(zip(names, self._params)),
                                             (X.local, self._cols), {"backend": backend})
        except Exception as exc:  # one rank's failure raises on all (no hang)
            error = exc
        agree(error, self.group)
        local = "none" if self.local is None else self.local.backend
        self.backend = f"sharded-{local} (operator)"

    def _anchor(self, *tensors):
        """0, depending on ``tensors``: a rank without rows joins the backward pass."""
        tensors = [t for t in (*self._params, *tensors) if t.requires_grad]
        if not tensors or not torch.is_grad_enabled():
            return 0
        return sum(t.reshape(-1)[:0].sum() for t in tensors)

    def _matmul(self, V):
        error = None
        (Vw,) = sum_grads([V], self.group)  # replicated V, used by each rank's share
        try:
            if self.local is None:
                out = V.new_zeros(0, V.shape[1]) + self._anchor(Vw)
            else:
                out = self.local @ Vw
        except Exception as exc:
            error, out = exc, V.new_zeros(self.sharding.n_local, V.shape[1])
        return gather_rows(out, self.sharding, error)

    def _rmatmul(self, U):
        """Kᵀ U = Σ_j K(X_j, Y)ᵀ U_j for a replicated U of shape (n, r)."""
        error = None
        Ul = local_rows(U, self.sharding)
        try:
            if self.local is None:
                part = U.new_zeros(self.shape[1], U.shape[1]) + self._anchor(Ul)
            else:
                part = self.local.T @ Ul
        except Exception as exc:
            error, part = exc, U.new_zeros(self.shape[1], U.shape[1])
        return all_reduce_sum(part, self.group, error)

    def _transpose(self):
        return self if self.symmetric else _TransposedShardedKernelMatrix(self)

    def _gather_local(self, fn):
        """Gather ``fn(self.local)`` ((n_local, c) dense rows) from every rank."""
        error, out = None, None
        try:
            out = None if self.local is None else fn(self.local)
        except Exception as exc:
            error = exc
        if out is None:
            width = fn.width if hasattr(fn, "width") else None
            out = torch.zeros(self.sharding.n_local, width or 0, dtype=self.dtype,
                              device=self.device)
        return gather_rows(out, self.sharding, error)

    def _x_rows(self, idx):
        """The rows x_idx of X on every rank."""
        return self._cols[idx] if self.symmetric else self.X.take(idx)

    def rows(self, idx):
        idx = _as_index(idx, self.shape[0], self.device)
        return self.kernel(self._x_rows(idx), self._cols, backend="dense").to_dense()

    def cols(self, idx):
        idx = _as_index(idx, self.shape[1], self.device)

        def block(L):
            return L.cols(idx)
        block.width = idx.numel()
        return self._gather_local(block)

    def submatrix(self, rows, cols):
        rows = _as_index(rows, self.shape[0], self.device)
        cols = _as_index(cols, self.shape[1], self.device)
        return self.kernel(self._x_rows(rows), self._cols[cols], backend="dense").to_dense()

    def diag(self):
        if self.symmetric:
            d = (self.kernel.diag(self.X.local) if self.sharding.n_local else
                 torch.zeros(0, dtype=self.dtype, device=self.device))
            return gather_rows(d[:, None], self.sharding)[:, 0]
        k = min(self.shape)
        return self.kernel.pairs(self._x_rows(torch.arange(k, device=self.device)),
                                 self._cols[:k])

    def to_dense(self):
        def block(L):
            return L.to_dense()
        block.width = self.shape[1]
        return self._gather_local(block)


class _TransposedShardedKernelMatrix(KernelMatrix):
    """K(Y, X) with X sharded: products all-reduce the ranks' shares (see
    :class:`ShardedKernelMatrix`)."""

    def __init__(self, base: ShardedKernelMatrix):
        self.base = base
        self.shape = base.shape[::-1]
        self.dtype, self.device, self.backend = base.dtype, base.device, base.backend

    def _matmul(self, V):
        return self.base._rmatmul(V)

    def _transpose(self):
        return self.base

    def rows(self, idx):
        return self.base.cols(idx).T

    def cols(self, idx):
        return self.base.rows(idx).T

    def submatrix(self, rows, cols):
        return self.base.submatrix(cols, rows).T

    def diag(self):
        return self.base.diag()

    def to_dense(self):
        return self.base.to_dense().T
