"""The accelerators the device tests compare with the CPU (shared by every ``*_devices``
test file).

``["cuda"]`` where CUDA is present, none elsewhere (the tests are then skipped: CI has no
GPU); ``TORCHKERN_TEST_DEVICES=cpu`` runs them against the CPU itself, which checks the
test code on any machine.
"""
import os

import pytest
import torch

_ENV = os.environ.get("TORCHKERN_TEST_DEVICES")
DEVICES = _ENV.split(",") if _ENV else (["cuda"] if torch.cuda.is_available() else [])
requires_device = pytest.mark.skipif(not DEVICES, reason="no CUDA device on this machine")


@pytest.fixture(params=DEVICES or ["cuda"])
def dev(request):
    """One device of :data:`DEVICES` per test run."""
    return torch.device(request.param)
