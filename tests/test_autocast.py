"""Kernels inside a model trained under torch.autocast compute their values and products
in the inputs' dtype. Before, the fast distance form ran in bfloat16 (the dense Gram
matrix came back bfloat16, products off by ~5e-2), and a blocked product or a
KernelLayer failed inside torch ("Expected out tensor to have dtype BFloat16")."""
import pytest
import torch
from torch import nn

import torchkern as tk
from torchkern.learning import KernelLayer

X = torch.randn(50, 3, generator=torch.Generator().manual_seed(0))
V = torch.randn(50, 2, generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("backend", ["dense", "blocked", "compiled"])
def test_products_under_autocast_are_the_float32_ones(backend):
    ref = torch.exp(-torch.cdist(X.double(), X.double()) ** 2 / 2) @ V.double()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        K = tk.RBF()(X, backend=backend)
        out = K @ V
    assert K.dtype == out.dtype == torch.float32
    assert torch.allclose(out.double(), ref, rtol=1e-5, atol=1e-5)


def test_kernel_layer_under_autocast():
    torch.manual_seed(0)
    lin, layer = nn.Linear(3, 3), KernelLayer(tk.RBF(), n_centers=4, in_features=3)
    x = torch.randn(5, 3)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        h = lin(x)  # bfloat16 under autocast
        out = layer(h)
    assert h.dtype == torch.bfloat16 and out.dtype == torch.float32
    ref = layer(h.float())
    assert torch.allclose(out, ref, rtol=1e-6, atol=1e-6)
    out.sum().backward()  # gradients reach the layer's and the linear map's parameters
    assert lin.weight.grad is not None and torch.isfinite(lin.weight.grad).all()
