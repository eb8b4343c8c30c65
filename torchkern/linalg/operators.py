"""Products of tall or large matrices taken a row block at a time.

:func:`row_blocked_mm` multiplies a stored matrix by a few columns in row blocks (faster
than one GEMM on the CPU); :class:`RowBlockOperator` reads a tall (n, m) matrix — a
tensor or any object with ``rows(idx)``, such as a lazy cross Gram matrix K_nm — in row
blocks for the products of least-squares normal equations, Aᵀ W A V and Aᵀ U, in one pass.
"""
from __future__ import annotations

import torch

from .._config import config
from .._threads import one_thread
from ._common import _reduce, _rows

_FLOAT64 = torch.float64

__all__ = ["row_blocked_mm", "RowBlockOperator"]


def row_blocked_mm(T: torch.Tensor, V: torch.Tensor, block_entries: int = 2**24) -> torch.Tensor:
    """T @ V computed in row blocks of about ``block_entries`` entries of T.

    One MKL GEMM of a large square matrix by a few tens of columns runs 1.5–2× slower
    than the same product cut into row blocks of ~1000 rows (measured with 2 threads on an
    AMD EPYC, n = 20 000, 16–48 columns, float32 and float64). A product with fewer than 8
    columns is memory-bound either way and stays one call. Same cost as T @ V: O(n·m·r).
    """
    n = T.shape[0]
    rows = max(1, block_entries // max(T.shape[1], 1))
    if V.shape[1] < 8 or rows >= n:
        return T @ V
    out = V.new_empty(n, V.shape[1])
    for s in range(0, n, rows):
        torch.mm(T[s:s + rows], V, out=out[s:s + rows])
    return out


class RowBlockOperator:
    r"""A tall (n, m) matrix A applied in dense row blocks A[s:e].

    Serves least squares with m ≪ n unknowns (Nyström kernel ridge regression, Falkon):
    :meth:`normal_matmul` gives :math:`A^\top W A V` and :meth:`rmatmul` :math:`A^\top U`,
    each in one pass over the blocks, accumulated in float64.

    Parameters
    ----------
    A : torch.Tensor or matrix
        A tensor, or an object with ``shape``, ``dtype``, ``device`` and ``rows(idx)``
        (the dense rows A[idx], e.g. a lazy kernel matrix).
    block_rows : int
        Rows evaluated per block.
    keep : bool
        Evaluate the blocks once and keep them (O(n·m) memory); otherwise they are
        recomputed at every product (O(block_rows·m) memory).
    sharded_by : matrix, optional
        A row-sharded matrix (:mod:`torchkern.distributed`) of which A is, or holds, this
        process's rows: the blocks are those rows and both products are summed over the
        processes.

    Notes
    -----
    Cost per product: one evaluation of A (n·m entries, unless kept) and O(n·m·r) flops.
    """

    def __init__(self, A, block_rows: int, keep: bool = False, sharded_by=None):
        self.A = A
        self.shape = tuple(A.shape if sharded_by is None else sharded_by.shape)
        self._sharded_by = sharded_by
        self._rows_here = A.shape[0] if isinstance(A, torch.Tensor) else _rows(A, self.shape[0])
        self.dtype, self.device = A.dtype, A.device
        self.block_rows = max(1, int(block_rows))
        self._kept = None
        if isinstance(A, torch.Tensor):
            self._kept = [(0, self._rows_here, A)]
        elif keep:
            self._kept = list(self.blocks())

    def blocks(self):
        """Iterate over ``(start, stop, A[start:stop])``."""
        if self._kept is not None:
            yield from self._kept
            return
        n, rows = self._rows_here, getattr(self.A, "rows_here", self.A.rows)
        for s in range(0, n, self.block_rows):
            e = min(n, s + self.block_rows)
            yield s, e, rows(torch.arange(s, e, device=self.device))

    def total(self, T: torch.Tensor) -> torch.Tensor:
        """T summed over the processes holding rows of A (``sharded_by``), else T."""
        return _reduce(self._sharded_by, T)

    def normal_matmul(self, V64: torch.Tensor, w: torch.Tensor | None = None) -> torch.Tensor:
        """Aᵀ diag(w) A V for V of shape (m, r), float64 in and out, in one pass over A
        whose entries are multiplied and summed in float64: a float32 kernel's only error
        left is its values' own rounding, so CG reaches tight tolerances. ``w=None`` means
        W = I. O(n·m·r) flops."""
        w64 = None if w is None else w.to(_FLOAT64)

        def add(s, e, C, out):
            U = C @ V64
            if w64 is not None:
                U *= w64[s:e, None]
            out.addmm_(C.T, U)
        return self._sum_over_chunks(add, V64.shape, V64.device)

    def rmatmul(self, U: torch.Tensor) -> torch.Tensor:
        """Aᵀ U for U of shape (n, r); float64 result (entries summed in float64)."""
        U64 = U.to(_FLOAT64)

        def add(s, e, C, out):
            out.addmm_(C.T, U64[s:e])
        return self._sum_over_chunks(add, (self.shape[1], U.shape[1]), U.device)

    def _sum_over_chunks(self, add, shape, device) -> torch.Tensor:
        """out = Σ add(s, e, A[s:e] in float64, out) over row chunks of A, summed over
        processes. On the CPU the chunk products run on one torch thread (the blocks of a
        lazy A are still evaluated with the caller's): thousands of small products per
        pass, each a parallel region, collapsed with 2 threads beside busy processes
        (n = 50,000, m = 1,000, load ~22: 8.3 s per product with 2 threads, 0.2 s with 1)."""
        out = torch.zeros(shape, dtype=_FLOAT64, device=device)
        for s0, e0, B in self.blocks():
            with one_thread(B.device.type == "cpu"):
                for s, e, C in _float64_chunks(B):
                    add(s0 + s, s0 + e, C, out)
        return self.total(out)


# A chunk of A of about this many entries is converted to float64 once and read by both
# products of the normal equations while it sits in the L2 cache (1 MB in float64). The
# chunks run on one thread (RowBlockOperator._sum_over_chunks), where these small chunks
# beat 16x larger ones (0.2 s against 0.3 s per product, n = 50,000, m = 1,000).
_CHUNK_ENTRIES = 2**17


def _float64_chunks(B: torch.Tensor):
    """``(start, stop, B[start:stop])`` in float64 for the rows of B: on the CPU in
    chunks of ~``_CHUNK_ENTRIES`` entries converted into one reused buffer (a fresh float64
    copy of a large block per product would cost an allocation and a pass through
    memory); on other devices in chunks of ``config.block_bytes``."""
    cpu = B.device.type == "cpu"
    entries = _CHUNK_ENTRIES if cpu else config.block_bytes(B.device) // 8
    rows = max(1, entries // max(B.shape[1], 1))
    buf = None
    for c in range(0, B.shape[0], rows):
        part = B[c:c + rows]
        if part.dtype == _FLOAT64 or not cpu:
            yield c, c + part.shape[0], part.to(_FLOAT64)
            continue
        if buf is None:
            buf = torch.empty(rows, B.shape[1], dtype=_FLOAT64)
        chunk = buf[:part.shape[0]]
        chunk.copy_(part)
        yield c, c + part.shape[0], chunk
