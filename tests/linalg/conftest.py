import pytest
import torch


def _rbf_gram(X, Y=None, lengthscale=1.0):
    """Dense RBF Gram exp(-‖x - y‖² / (2ℓ²)), built independently of torchkern."""
    Y = X if Y is None else Y
    sq = (X * X).sum(1)[:, None] + (Y * Y).sum(1)[None, :] - 2 * X @ Y.T
    return torch.exp(-sq.clamp(min=0) / (2 * lengthscale**2))


class MatmulOnly:
    """An operator that offers only shape, dtype, device and @ (counts its products)."""

    def __init__(self, A):
        self.A = A
        self.shape = A.shape
        self.dtype = A.dtype
        self.device = A.device
        self.products = 0

    def __matmul__(self, V):
        self.products += 1
        return self.A @ V


@pytest.fixture
def rbf_gram():
    return _rbf_gram


@pytest.fixture
def matmul_only():
    return MatmulOnly
