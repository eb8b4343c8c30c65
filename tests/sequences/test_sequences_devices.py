"""String kernels on an accelerator give the CPU's numbers (float64).

Runs on ``["cuda"]`` where CUDA is present and is skipped elsewhere (CI has no GPU), as in
tests/test_devices.py; ``TORCHKERN_TEST_DEVICES=cpu`` runs it against the CPU itself.
"""
import random

import pytest
import torch

from torchkern.sequences import LocalAlignment, Mismatch, Spectrum, Substring, encode
from tests._devices import dev, requires_device  # noqa: F401 (fixture)

pytestmark = requires_device


@pytest.mark.parametrize("kernel", [Spectrum(3, "protein"), Mismatch(3, 1, "protein"),
                                    Substring(3, 0.5), LocalAlignment(0.5, log=True),
                                    LocalAlignment(0.5, normalize=True)])
def test_string_kernels_on_device(dev, kernel):
    rng = random.Random(0)
    seqs = ["".join(rng.choice("ACDEFGHIKLMNPQRSTVWY") for _ in range(rng.randint(0, 40)))
            for _ in range(40)]
    alphabet = getattr(kernel, "alphabet", None) or getattr(kernel, "letters", None)
    X = encode(seqs, alphabet, device=dev)
    K = kernel(X[:25], X)
    assert K.device.type == dev.type
    ref = kernel(seqs[:25], seqs).to_dense()
    torch.testing.assert_close(K.to_dense().cpu(), ref, rtol=1e-12, atol=1e-12)
    v = torch.randn(40, dtype=torch.float64)
    torch.testing.assert_close((K @ v.to(dev)).cpu(), ref @ v, rtol=1e-10, atol=1e-10)
