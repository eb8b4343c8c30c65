r"""A torchkern kernel as a GPyTorch kernel.

:class:`GPyTorchKernel` lets any torchkern :class:`~torchkern.kernels.Kernel` (its algebra,
deep kernels, ...) serve as the ``covar_module`` of a GPyTorch model. Its parameters are
the torchkern kernel's own ``raw_*`` parameters, so GPyTorch optimizers learn them.
"""
from __future__ import annotations

import gpytorch
import torch
from linear_operator.operators import LinearOperator

from .._config import config
from ..kernels.base import Kernel as _TKKernel

__all__ = ["GPyTorchKernel"]


class _Evaluate(torch.nn.Module):
    """k(x1, x2) under ``torch.func.functional_call``: the kernel's parameters replaced by
    given tensors, so that autograd reaches the tensors LinearOperator hands around."""

    def __init__(self, kernel):
        super().__init__()
        self.k = kernel

    def forward(self, x1, x2, mode):
        if mode == "pairs":  # k(x1_i, x2_i)
            return self.k.formula(x1, x2).evaluate_pairs()
        return self.k(x1, x2, backend=mode)


def _evaluate(kernel, names, params, x1, x2, mode):
    values = {"k." + name: p for name, p in zip(names, params)}
    return torch.func.functional_call(_Evaluate(kernel), values, (x1, x2, mode))


class _KernelLinearOperator(LinearOperator):
    r"""k(x1, x2) as a linear_operator ``LinearOperator`` whose products use torchkern's
    lazy Gram matrix (blocked or KeOps backend): O(n + m) memory, no n × m tensor.

    Its representation is (x1, x2, *kernel parameters), so linear_operator's default
    derivative (autograd through ``_matmul`` w.r.t. these tensors) gives the gradients
    with respect to the data and to the hyperparameters.
    """

    def __init__(self, x1, x2, *params, kernel=None, names=(), backend="blocked"):
        super().__init__(x1, x2, *params, kernel=kernel, names=names, backend=backend)
        self.x1, self.x2, self.params = x1, x2, params
        self.kernel, self.names, self.backend = kernel, names, backend

    def _matrix(self):
        return _evaluate(self.kernel, self.names, self.params, self.x1, self.x2, self.backend)

    def _matmul(self, rhs):
        vec = rhs.dim() == 1
        R = rhs.unsqueeze(-1) if vec else rhs
        K = self._matrix()
        out = K @ R.to(K.dtype)
        return out.squeeze(-1) if vec else out

    def _size(self):
        return torch.Size([self.x1.shape[-2], self.x2.shape[-2]])

    def _transpose_nonbatch(self):
        return _KernelLinearOperator(self.x2, self.x1, *self.params, kernel=self.kernel,
                                     names=self.names, backend=self.backend)

    def _pair_values(self, rows, cols):
        """k(x1[rows_i], x2[cols_i]) for index tensors of one shape."""
        shape = rows.shape
        a = self.x1[rows.reshape(-1)]
        b = self.x2[cols.reshape(-1)]
        return _evaluate(self.kernel, self.names, self.params, a, b, "pairs").reshape(shape)

    def _diagonal(self):
        n = min(self.x1.shape[-2], self.x2.shape[-2])
        idx = torch.arange(n, device=self.x1.device)
        return self._pair_values(idx, idx)

    def _get_indices(self, row_index, col_index, *batch_indices):
        shape = torch.broadcast_shapes(row_index.shape, col_index.shape)
        return self._pair_values(row_index.expand(shape), col_index.expand(shape))

    def _getitem(self, row_index, col_index, *batch_indices):
        # Row/column subsets stay lazy: they are the kernel on the subsets of the data.
        x1 = self.x1[row_index]
        x2 = self.x2[col_index]
        return _KernelLinearOperator(x1, x2, *self.params, kernel=self.kernel,
                                     names=self.names, backend=self.backend)

    def to_dense(self):
        return _evaluate(self.kernel, self.names, self.params, self.x1, self.x2,
                         "dense").to_dense()


class GPyTorchKernel(gpytorch.kernels.Kernel):
    r"""A torchkern kernel usable wherever GPyTorch expects a ``gpytorch.kernels.Kernel``.

    ``forward(x1, x2)`` evaluates k(x1, x2) with the wrapped kernel's formula (the same
    one torchkern's learners use). Small inputs give a dense tensor; inputs with
    n·m > ``torchkern.config.dense_max_entries`` (or ``lazy=True``) give a
    ``LinearOperator`` whose products are torchkern's lazy, O(n + m)-memory matrix-vector
    products, so GPyTorch's CG/Lanczos inference never stores the n × n matrix.
    Batched inputs (..., n, d) are evaluated batch by batch (dense).

    Parameters
    ----------
    kernel : torchkern.kernels.Kernel
        The kernel; registered as a sub-module, so its ``raw_*`` parameters are this
        module's parameters (``model.parameters()`` finds them).
    lazy : {"auto", True, False}
        Whether to return the lazy operator (see above).
    backend : str
        Backend of the lazy products: ``"blocked"`` (default) or ``"keops"``.
    **kwargs
        Passed to ``gpytorch.kernels.Kernel`` (e.g. ``active_dims``).

    Examples
    --------
    >>> import gpytorch, torchkern
    >>> from torchkern.integrations.gpytorch import GPyTorchKernel
    >>> covar = gpytorch.kernels.ScaleKernel(GPyTorchKernel(torchkern.RBF(0.5)))

    Notes
    -----
    GPyTorch's :class:`~gpytorch.mlls.ExactMarginalLogLikelihood` returns log p(y)/n and
    its ``GaussianLikelihood`` adds its own ``noise`` to the diagonal: with that noise equal
    to torchkern's ``GaussianProcessRegressor(noise=...)`` both give the same log p(y).
    """

    is_stationary = False

    def __init__(self, kernel, lazy="auto", backend="blocked", **kwargs):
        if not isinstance(kernel, _TKKernel):
            raise TypeError(f"kernel must be a torchkern Kernel, got {type(kernel).__name__}")
        if lazy not in ("auto", True, False):
            raise ValueError(f"lazy must be 'auto', True or False, got {lazy!r}")
        if backend not in ("blocked", "keops"):
            raise ValueError(f"backend must be 'blocked' or 'keops', got {backend!r}")
        super().__init__(**kwargs)
        self.base_kernel = kernel
        self.lazy = lazy
        self.backend = backend

    def _dense(self, x1, x2):
        return self.base_kernel(x1, x2, backend="dense").to_dense()

    def forward(self, x1, x2, diag=False, last_dim_is_batch=False, **params):
        if last_dim_is_batch:
            # (..., n, d) -> (..., d, n, 1): one kernel per input dimension.
            x1 = x1.transpose(-1, -2).unsqueeze(-1)
            x2 = x2.transpose(-1, -2).unsqueeze(-1)
        batch = torch.broadcast_shapes(x1.shape[:-2], x2.shape[:-2])
        if diag:
            if batch:
                a = x1.expand(*batch, *x1.shape[-2:]).reshape(-1, *x1.shape[-2:])
                b = x2.expand(*batch, *x2.shape[-2:]).reshape(-1, *x2.shape[-2:])
                out = torch.stack([self.base_kernel.formula(u, v).evaluate_pairs()
                                   for u, v in zip(a, b)])
                return out.reshape(*batch, x1.shape[-2])
            return self.base_kernel.formula(x1, x2).evaluate_pairs()
        if batch:
            a = x1.expand(*batch, *x1.shape[-2:]).reshape(-1, *x1.shape[-2:])
            b = x2.expand(*batch, *x2.shape[-2:]).reshape(-1, *x2.shape[-2:])
            out = torch.stack([self._dense(u, v) for u, v in zip(a, b)])
            return out.reshape(*batch, x1.shape[-2], x2.shape[-2])
        n, m = x1.shape[-2], x2.shape[-2]
        lazy = self.lazy if self.lazy != "auto" else n * m > config.dense_max_entries
        if not lazy:
            return self._dense(x1, x2)
        names = tuple(name for name, _ in self.base_kernel.named_parameters())
        params_ = tuple(p for _, p in self.base_kernel.named_parameters())
        return _KernelLinearOperator(x1, x2, *params_, kernel=self.base_kernel, names=names,
                                     backend=self.backend)
