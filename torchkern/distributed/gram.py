r"""Row-sharded Gram matrices: each rank holds its rows of X and of every vector."""
from __future__ import annotations

import torch
from torch.func import functional_call
from torch.nn.utils.stateless import _reparametrize_module

from ..gram import KernelMatrix, _as_index, _real_arg
from ._comm import agree, all_reduce_sum, gather_rows, gather_shared, local_rows, sum_grads
from .input import ShardedInput

__all__ = ["ShardedKernelMatrix"]


class _RowSharded(KernelMatrix):
    """What the solvers of :mod:`torchkern.linalg` look for in a row-sharded operator
    (``local_rows``, ``reduce_sum``, ``own_rows``), and products checked against the
    local rows. Subclasses set ``sharding`` (rows), ``group``, ``local_rows`` and
    ``_in_rows`` (the rows of V that ``K @ V`` takes on this rank)."""

    def reduce_sum(self, T: torch.Tensor) -> torch.Tensor:
        """Σ over the ranks of each rank's partial ``T`` (all-reduce; backward: identity)."""
        return all_reduce_sum(T, self.group)

    def own_rows(self, full: torch.Tensor) -> torch.Tensor:
        """This rank's rows of an (n, ...) tensor that every rank holds."""
        return local_rows(full, self.sharding)

    def gather(self, local: torch.Tensor) -> torch.Tensor:
        """All n rows, on every rank, of a tensor whose rows are sharded like K's."""
        return gather_rows(local, self.sharding)

    def __matmul__(self, V) -> torch.Tensor:
        if not isinstance(V, torch.Tensor):
            raise TypeError(f"K @ V expects a torch.Tensor, got {type(V).__name__}")
        if V.dim() not in (1, 2) or V.shape[0] != self._in_rows:
            raise ValueError(
                f"K @ V on a row-sharded matrix: V must hold this rank's {self._in_rows} rows, "
                f"shape ({self._in_rows},) or ({self._in_rows}, r), got {tuple(V.shape)} "
                "(for vectors held whole on every rank use K.replicated())")
        if V.dtype != self.dtype:
            raise TypeError(f"K @ V: V has dtype {V.dtype} but K has dtype {self.dtype}")
        out = self._matmul(V.unsqueeze(-1) if V.dim() == 1 else V)
        return out.squeeze(-1) if V.dim() == 1 else out

    def sum(self, dim: int) -> torch.Tensor:
        """Row sums (this rank's rows) for ``dim=1``."""
        if dim not in (1, -1):
            raise ValueError("a row-sharded matrix gives its row sums (dim=1) only")
        return self @ torch.ones(self._in_rows, dtype=self.dtype, device=self.device)

    def add_diag(self, lam) -> "_ShardedShifted":
        """K + λI, lazily; ``lam`` a scalar or this rank's (n_local,) values."""
        return _ShardedShifted(self, lam)

    def scaled(self, left, right=None) -> "_ShardedScaled":
        """diag(left) K diag(right), lazily; ``left`` holds this rank's rows, ``right``
        (default ``left``) the rows V takes."""
        return _ShardedScaled(self, left, left if right is None else right)

    def centered(self, col_mean=None, mean=None) -> "_ShardedCentered":
        """(I − 11ᵀ/n) K (I − 11ᵀ/n) for a square K, lazily: row means local, the column
        sums of V and the overall mean all-reduced."""
        if col_mean is not None or mean is not None or not self.is_square:
            raise ValueError("a row-sharded matrix centers itself only (square, no "
                             "col_mean/mean); center test points with K.replicated()")
        return _ShardedCentered(self)

    def _inherit(self, base):
        self.base = base
        self.sharding, self.group = base.sharding, base.group
        self.local_rows, self._in_rows = base.local_rows, base._in_rows
        self.col_sharding = base.col_sharding
        self.shape, self.dtype, self.device = base.shape, base.dtype, base.device
        self.backend = base.backend

    def _positions(self) -> torch.Tensor:
        """Global indices of this rank's rows."""
        mine = self.sharding.mine()
        if isinstance(mine, slice):
            return torch.arange(mine.start, mine.stop, device=self.device)
        return mine.to(self.device)


class ShardedKernelMatrix(_RowSharded):
    r"""K_ij = k(x_i, y_j) with the rows i, and the rows of every vector, spread over the
    ranks of a process group.

    Rank j holds its rows X_j and, for every vector the matrix meets, the same rows: a
    product takes V_j — this rank's rows of V, (n_j, r), when the columns are sharded
    (K(X, X), or Y a :class:`ShardedInput`), or the whole V, (m, r), when the columns are
    replicated test points or centres — and returns this rank's rows of K V:

    .. math:: (K V)_j = K(X_j, Y)\,V, \qquad V = \begin{bmatrix} V_0 \\ \vdots \\
              V_{p-1} \end{bmatrix} \text{ (one all-gather of } m\cdot r
              \text{ numbers)},

    the block evaluated locally by the kernel's own backend (dense, blocked or KeOps:
    never more than a row block in memory unless ``"dense"``). The solvers of
    :mod:`torchkern.linalg` (CG, PCG with a Nyström preconditioner, Lanczos, SLQ,
    Hutchinson) run on it with the vectors sharded end to end: each inner product and norm
    is a local sum and one all-reduce of a few numbers (``reduce_sum``), random probes are
    drawn whole from one seed and cut (``own_rows``), so every rank computes identical
    scalars and the iterates equal the one-process ones to rounding (as in the multi-GPU
    products of Falkon and GPyTorch, here with the vectors distributed too: Meanti et al.,
    "Kernel methods through the roof", NeurIPS 2020; Wang et al., "Exact Gaussian
    processes on a million data points", NeurIPS 2019).

    Cost per product: O(n_j·m·d) kernel evaluations on rank j, an all-gather of m·r
    numbers and one all-reduce of a failure flag; memory per rank O(m·d) for the gathered
    columns (gathered once), O(m·r) for the gathered V, O(n_j·r) for the result and a row
    block. ``diag()``, ``cols(idx)`` and ``to_dense()`` give this rank's rows;
    ``rows(idx)`` and ``submatrix`` are replicated (their rows gathered first); ``.T`` of
    a matrix with replicated columns takes this rank's rows of U and all-reduces
    K(X_j, Y)ᵀU_j. :meth:`replicated` is the same matrix for vectors held whole on every
    rank (the products gathered). Gradients reach the kernel's hyperparameters: a rank's
    block is a partial share of any sum over rows, so their gradients are all-reduced in
    the backward pass (every rank must take part in it); the data are constants.
    """

    def __init__(self, kernel, X: ShardedInput, Y=None, backend=None):
        self.kernel, self.X, self.sharding = kernel, X, X.sharding
        self.group = X.group
        self.symmetric = Y is None
        self.col_sharding = X.sharding if Y is None else (
            Y.sharding if isinstance(Y, ShardedInput) else None)
        self.Y = X if Y is None else Y
        self._cols = X.gather() if Y is None else (
            Y.gather() if isinstance(Y, ShardedInput) else Y)
        self.shape = (self.sharding.n, self._cols.shape[0])
        self.local_rows = self.sharding.n_local
        self._in_rows = self.shape[1] if self.col_sharding is None else self.col_sharding.n_local
        self.dtype, self.device = X.dtype, X.device
        self._backend_arg = backend  # what K.T passes on (the local block's may be resolved)
        error, self.local = None, None
        self._names = [name for name, p in kernel.named_parameters() if p.requires_grad]
        params = dict(kernel.named_parameters())
        # Each rank's block is a partial share: its hyperparameter gradients are summed.
        self._params = sum_grads([params[name] for name in self._names], self.group)
        try:
            if self.sharding.n_local:
                self.local = functional_call(kernel, dict(zip(self._names, self._params)),
                                             (X.local, self._cols), {"backend": backend})
        except Exception as exc:  # one rank's failure raises on all (no hang)
            error = exc
        agree(error, self.group)
        local = "none" if self.local is None else self.local.backend
        self.backend = f"sharded-{local} (operator)"

    def _eval(self, fn, *args, **kw):
        """``fn(*args, **kw)`` with the kernel's hyperparameters those whose gradients sum."""
        with _reparametrize_module(self.kernel, dict(zip(self._names, self._params))):
            return fn(*args, **kw)

    def _anchor(self, *tensors):
        """0, depending on ``tensors``: a rank without rows joins the backward pass."""
        tensors = [t for t in (*self._params, *tensors) if t.requires_grad]
        if not tensors or not torch.is_grad_enabled():
            return 0
        return sum(t.reshape(-1)[:0].sum() for t in tensors)

    def _full_cols(self, V):
        """All m rows of V, as this rank's share uses them."""
        if self.col_sharding is None:
            return sum_grads([V], self.group)[0]
        return gather_shared(V, self.col_sharding)

    def _matmul(self, V):
        Vf = self._full_cols(V)
        error = None
        try:
            out = (V.new_zeros(0, V.shape[1]) + self._anchor(Vf) if self.local is None
                   else self.local @ Vf)
        except Exception as exc:
            error, out = exc, None
        agree(error, self.group)  # a rank whose block failed raises on every rank
        return out

    def _rmatmul(self, U):
        """Kᵀ U = Σ_j K(X_j, Y)ᵀ U_j for this rank's rows U_j, (n_j, r); replicated."""
        error = None
        try:
            part = (U.new_zeros(self.shape[1], U.shape[1]) + self._anchor(U)
                    if self.local is None else self.local.T @ U)
        except Exception as exc:
            error, part = exc, U.new_zeros(self.shape[1], U.shape[1])
        return all_reduce_sum(part, self.group, error)

    def _transpose(self):
        if self.symmetric:
            return self
        if self.col_sharding is not None:
            return ShardedKernelMatrix(self.kernel, self.Y, self.X, self._backend_arg)
        return _ShardedTransposed(self)

    @property
    def local_backend(self):
        """The representation of this rank's block (``"blocked"``, ``"keops"``,
        ``"features"``, …); None on a rank without rows."""
        return None if self.local is None else self.local.backend

    def replicated(self) -> "_Replicated":
        """The same matrix for vectors held whole on every rank: ``K @ V`` takes the
        (m, r) V and returns the (n, r) product on every rank (this rank's block, then an
        all-gather of n·r numbers)."""
        return _Replicated(self)

    def local_block(self) -> torch.Tensor:
        """This rank's rows K(X_j, Y), (n_j, m), dense."""
        if self.local is None:
            return torch.zeros(0, self.shape[1], dtype=self.dtype, device=self.device)
        return self.local.to_dense()

    def rows_here(self, idx) -> torch.Tensor:
        """Rows ``idx`` of this rank's block (local indices), dense."""
        idx = _as_index(idx, self.local_rows, self.device)
        if self.local is None:
            return torch.zeros(0, self.shape[1], dtype=self.dtype, device=self.device)
        return self.local.rows(idx)

    def cols(self, idx):
        """This rank's rows of the columns ``idx``: (n_j, len(idx))."""
        idx = _as_index(idx, self.shape[1], self.device)
        if self.local is None:
            return torch.zeros(0, idx.numel(), dtype=self.dtype, device=self.device)
        return self.local.cols(idx)

    def _x_rows(self, idx):
        """The rows x_idx of X on every rank (collective unless the columns are X)."""
        return self._cols[idx] if self.symmetric else self.X.take(idx)

    def rows(self, idx):
        """The rows ``idx`` (global), (len(idx), m), on every rank.

        Every rank evaluates them whole: a replicated value, so the kernel's own
        parameters (not the all-reduced ones of a partial share) — with those, a loss
        built from them on every rank, e.g. ‖K_c‖²_F of the kernel alignment by row
        blocks, had its gradient counted once per rank."""
        idx = _as_index(idx, self.shape[0], self.device)
        return self.kernel(self._x_rows(idx), self._cols, backend="dense").to_dense()

    def submatrix(self, rows, cols):
        """K[rows][:, cols] on every rank (replicated, as :meth:`rows`)."""
        rows = _as_index(rows, self.shape[0], self.device)
        cols = _as_index(cols, self.shape[1], self.device)
        return self.kernel(self._x_rows(rows), self._cols[cols], backend="dense").to_dense()

    def diag(self):
        """This rank's entries of the diagonal: K_ii for its rows i (< m)."""
        if not self.sharding.n_local:
            return torch.zeros(0, dtype=self.dtype, device=self.device)
        if self.symmetric:
            return self._eval(self.kernel.diag, self.X.local)
        pos = self._positions()
        keep = pos < self.shape[1]
        if not bool(keep.any()):  # this rank's rows all lie past the last column
            return torch.zeros(0, dtype=self.dtype, device=self.device)
        return self._eval(self.kernel.pairs, self.X.local[keep], self._cols[pos[keep]])

    def to_dense(self):
        """This rank's rows, (n_j, m): the row-sharded dense matrix (see
        ``replicated().to_dense()`` for all of it on every rank)."""
        return self.local_block()


class _ShardedTransposed(KernelMatrix):
    """K(Z, X) with X sharded and Z replicated: ``@`` takes this rank's rows of U and
    all-reduces the ranks' shares K(X_j, Z)ᵀ U_j; the result is replicated."""

    def __init__(self, base: ShardedKernelMatrix):
        self.base = base
        self.shape = base.shape[::-1]
        self.dtype, self.device, self.backend = base.dtype, base.device, base.backend

    def __matmul__(self, V):
        if not isinstance(V, torch.Tensor) or V.dim() not in (1, 2) or \
                V.shape[0] != self.base.local_rows:
            raise ValueError(f"K(Z, X) @ U with X sharded: U must hold this rank's "
                             f"{self.base.local_rows} rows, got "
                             f"{tuple(getattr(V, 'shape', ()))}")
        out = self.base._rmatmul(V.unsqueeze(-1) if V.dim() == 1 else V)
        return out.squeeze(-1) if V.dim() == 1 else out

    def _transpose(self):
        return self.base

    def replicated(self):
        return _Replicated(self.base).T

    def cols(self, idx):
        return self.base.rows(idx).T

    def rows(self, idx):
        return self.base.gather(self.base.cols(idx)).T

    def submatrix(self, rows, cols):
        return self.base.submatrix(cols, rows).T

    def diag(self):
        return _Replicated(self.base).diag()  # k(z_i, x_i) = k(x_i, z_i), i < min(n, m)

    def to_dense(self):
        return self.base.gather(self.base.local_block()).T


class _ShardedShifted(_RowSharded):
    """K + λI on a square row-sharded K (λ a scalar or this rank's (n_j,) values)."""

    def __init__(self, base, lam):
        if not base.is_square:
            raise ValueError(f"add_diag needs a square matrix, got shape {base.shape}")
        self._inherit(base)
        lam = _real_arg(lam, "lam", base)
        if lam.dim() > 1 or (lam.dim() == 1 and lam.shape[0] != base.local_rows):
            raise ValueError(f"lam must be a scalar or this rank's ({base.local_rows},) "
                             f"values, got shape {tuple(lam.shape)}")
        self.lam = lam

    def _lam_col(self):
        return self.lam if self.lam.dim() == 0 else self.lam[:, None]

    def _matmul(self, V):
        return self.base._matmul(V) + self._lam_col() * V

    def _transpose(self):
        return self

    def diag(self):
        return self.base.diag() + self.lam

    def cols(self, idx):
        idx = _as_index(idx, self.shape[1], self.device)
        hit = (self._positions()[:, None] == idx[None, :]).to(self.dtype)
        return self.base.cols(idx) + hit * self._lam_col()

    def to_dense(self):
        return self.cols(torch.arange(self.shape[1], device=self.device))


class _ShardedScaled(_RowSharded):
    """diag(a) K diag(b) on a row-sharded K (a: this rank's rows; b: the rows V takes)."""

    def __init__(self, base, left, right):
        self._inherit(base)
        if left.shape != (base.local_rows,) or right.shape != (base._in_rows,):
            raise ValueError(f"scaling vectors must hold this rank's rows, shapes "
                             f"({base.local_rows},) and ({base._in_rows},), got "
                             f"{tuple(left.shape)} and {tuple(right.shape)}")
        self.left = left.to(dtype=base.dtype, device=base.device)
        self.right = right.to(dtype=base.dtype, device=base.device)

    def _matmul(self, V):
        return self.left[:, None] * self.base._matmul(self.right[:, None] * V)

    def _transpose(self):
        if not torch.equal(self.left, self.right) or self.base.T is not self.base:
            raise ValueError("only diag(a) K diag(a) of a symmetric K is transposed")
        return self

    def diag(self):
        return self.left * self.base.diag() * self.right

    def _whole_right(self):
        return self.right if self.col_sharding is None else \
            gather_rows(self.right[:, None], self.col_sharding)[:, 0]

    def cols(self, idx):
        idx = _as_index(idx, self.shape[1], self.device)
        return self.left[:, None] * self.base.cols(idx) * self._whole_right()[idx][None, :]

    def rows(self, idx):
        """The rows ``idx`` (global), on every rank (the scalings gathered)."""
        return self.submatrix(idx, torch.arange(self.shape[1], device=self.device))

    def submatrix(self, rows, cols):
        rows = _as_index(rows, self.shape[0], self.device)
        cols = _as_index(cols, self.shape[1], self.device)
        left = gather_rows(self.left[:, None], self.sharding)[:, 0]
        return (left[rows][:, None] * self.base.submatrix(rows, cols)
                * self._whole_right()[cols][None, :])


class _ShardedCentered(_RowSharded):
    r"""(I − 11ᵀ/n) K (I − 11ᵀ/n) of a square row-sharded K (Schölkopf, Smola and Müller,
    "Nonlinear component analysis as a kernel eigenvalue problem", Neural Computation
    1998): K̃V = KV − r·(1ᵀV) − 1(rᵀV) + μ·1(1ᵀV), with r the row means (this rank's
    rows), 1ᵀV and rᵀV all-reduced, μ the overall mean. One product with K to build,
    then one product and one all-reduce of 2r numbers per product."""

    def __init__(self, base):
        self._inherit(base)
        n = self.shape[0]
        self.row_mean = base.sum(1) / n
        self.mean = self.reduce_sum(self.row_mean.sum()) / n

    def _matmul(self, V):
        sums = self.reduce_sum(torch.cat([V.sum(0), self.row_mean @ V]))
        s, rV = sums[:V.shape[1]], sums[V.shape[1]:]
        return (self.base._matmul(V) - self.row_mean[:, None] * s[None, :] - rV[None, :]
                + self.mean * s[None, :])

    def _transpose(self):
        return self

    def diag(self):
        return self.base.diag() - 2 * self.row_mean + self.mean


class _Replicated(KernelMatrix):
    """A row-sharded K for vectors held whole on every rank: ``K @ V`` takes the whole
    (m, r) V and returns the whole (n, r) product on every rank (this rank's block, then
    one all-gather of n·r numbers). Its solvers' inner products need no further
    collective; every rank holds O(n·r) per vector."""

    def __init__(self, base: ShardedKernelMatrix):
        self.base = base
        self.shape, self.dtype, self.device = base.shape, base.dtype, base.device
        self.backend = base.backend.replace("sharded-", "sharded-replicated-")

    def __matmul__(self, V):
        rows = getattr(V, "shape", (None,))[:1]
        if rows and rows[0] != self.shape[1] and rows[0] == self.base._in_rows:
            raise ValueError(
                f"K @ V: this matrix holds vectors whole on every rank (ShardedKernel "
                f"vectors='auto' outside KernelRidge, or 'replicated'): V must have all "
                f"{self.shape[1]} rows, got this rank's {rows[0]}; for products on each "
                f"rank's rows use ShardedKernel(..., vectors='sharded')")
        return super().__matmul__(V)

    def _own_cols(self, V):
        if self.base.col_sharding is None:
            return V
        return local_rows(V, self.base.col_sharding)

    def _matmul(self, V):
        return self.base.gather(self.base._matmul(self._own_cols(V)))

    def _transpose(self):
        if self.base.symmetric:
            return self
        return _ReplicatedTransposed(self)

    def rows(self, idx):
        return self.base.rows(idx)

    def cols(self, idx):
        return self.base.gather(self.base.cols(idx))

    def submatrix(self, rows, cols):
        return self.base.submatrix(rows, cols)

    def diag(self):
        b = self.base
        if b.symmetric:
            return b.gather(b.diag()[:, None])[:, 0]
        # each rank's K_ii for its rows i < m (rows past m hold 0), gathered once and cut
        d = torch.zeros(b.sharding.n_local, dtype=self.dtype, device=self.device)
        if b.sharding.n_local:
            d = d.index_put((torch.nonzero(b._positions() < b.shape[1]).squeeze(1),), b.diag())
        return b.gather(d[:, None])[:min(self.shape), 0]

    def to_dense(self):
        return self.base.gather(self.base.local_block())


class _ReplicatedTransposed(KernelMatrix):
    """Kᵀ of a :class:`_Replicated` K: Σ_j K(X_j, Y)ᵀ U_j from the whole U."""

    def __init__(self, rep: _Replicated):
        self.rep = rep
        self.shape = rep.shape[::-1]
        self.dtype, self.device, self.backend = rep.dtype, rep.device, rep.backend

    def _matmul(self, U):
        return self.rep.base._rmatmul(self.rep.base.own_rows(U))

    def _transpose(self):
        return self.rep

    def rows(self, idx):
        return self.rep.cols(idx).T

    def cols(self, idx):
        return self.rep.rows(idx).T

    def submatrix(self, rows, cols):
        return self.rep.submatrix(cols, rows).T

    def to_dense(self):
        return self.rep.to_dense().T
