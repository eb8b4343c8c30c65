"""backend="compiled" on an accelerator (torch.compile → Triton on CUDA) equals the CPU.

Skipped where there is no CUDA device (see tests/_devices.py); run on a lent GPU with
``python -m pytest -q tests/test_compiled_devices.py``.
"""
import pytest
import torch

import torchkern as tk

from ._devices import dev, requires_device  # noqa: F401  (dev is a fixture)

pytestmark = requires_device


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_compiled_matvec_and_gradients_match_cpu_dense(dev, dtype):  # noqa: F811
    g = torch.Generator().manual_seed(0)
    X = torch.randn(3000, 3, generator=g, dtype=dtype)
    V = torch.randn(3000, 2, generator=g, dtype=dtype)

    def run(device, backend):
        k = (1.3 * tk.RBF([0.6, 1.1, 1.7]) + tk.Matern(1.5, 0.9)).to(device, dtype)
        Xd = X.to(device, copy=True).requires_grad_(True)
        K = k(Xd, backend=backend)
        out = K @ V.to(device)
        out.pow(2).sum().backward()
        return K.backend, out.cpu(), Xd.grad.cpu(), [p.grad.cpu() for p in k.parameters()]

    _, out_ref, gx_ref, gp_ref = run("cpu", "dense")
    backend, out, gx, gp = run(dev, "compiled")
    assert backend == "compiled"
    tol = 1e-10 if dtype == torch.float64 else 1e-4
    assert (out - out_ref).norm() / out_ref.norm() < tol
    assert (gx - gx_ref).norm() / gx_ref.norm() < 10 * tol
    for a, b in zip(gp, gp_ref):
        assert (a - b).norm() / b.norm() < 10 * tol
