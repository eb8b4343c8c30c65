"""Row-blocked products against one dense product."""
import pytest
import torch

import torchkern as tk
from torchkern.linalg.operators import RowBlockOperator, row_blocked_mm


def test_row_blocked_mm_equals_one_product():
    g = torch.Generator().manual_seed(0)
    T = torch.randn(301, 150, generator=g, dtype=torch.float64)
    for r in (1, 8, 24):
        V = torch.randn(150, r, generator=g, dtype=torch.float64)
        torch.testing.assert_close(row_blocked_mm(T, V, block_entries=150 * 70), T @ V,
                                   rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("keep", [False, True])
def test_normal_products_of_a_lazy_cross_gram(keep):
    g = torch.Generator().manual_seed(1)
    X = torch.randn(257, 3, generator=g, dtype=torch.float64)
    Z = X[:20]
    K = tk.RBF(0.8)(X, Z, backend="blocked")
    A = torch.exp(-torch.cdist(X, Z) ** 2 / (2 * 0.8**2))  # the reference, built apart
    op = RowBlockOperator(K, block_rows=50, keep=keep)
    assert sum(1 for _ in op.blocks()) == 6
    V = torch.randn(20, 3, generator=g, dtype=torch.float64)
    w = torch.rand(257, generator=g, dtype=torch.float64)
    U = torch.randn(257, 2, generator=g, dtype=torch.float64)
    torch.testing.assert_close(op.normal_matmul(V, w), A.T @ (w[:, None] * (A @ V)))
    torch.testing.assert_close(op.normal_matmul(V), A.T @ A @ V)
    torch.testing.assert_close(op.rmatmul(U), A.T @ U)
    # a stored tensor is one block
    dense = RowBlockOperator(A.float(), block_rows=10)
    assert sum(1 for _ in dense.blocks()) == 1
    out = dense.normal_matmul(V)
    assert out.dtype == torch.float64
    torch.testing.assert_close(out, A.T @ A @ V, rtol=1e-5, atol=1e-4)


def test_block_rows_memory_model():
    from torchkern.gram import block_rows
    budget = tk.config.block_bytes()
    # (3·width + 4) entries of 8 bytes per column and row
    assert block_rows(1000, torch.float64, width=2) == budget // (8 * 1000 * 10)
    assert block_rows(1000, torch.float32, width=2) == budget // (4 * 1000 * 10)
    X = torch.randn(50, 2, dtype=torch.float64)
    assert tk.RBF()(X, backend="blocked").block_rows() == budget // (8 * 50 * 10)
    assert block_rows(10**12, torch.float64) == 1
