import os

os.environ.setdefault("PYKEOPS_VERBOSE", "0")
os.environ.setdefault("KEOPS_VERBOSE", "0")

import pytest  # noqa: E402
import torch  # noqa: E402


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
