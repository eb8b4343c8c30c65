import os

os.environ.setdefault("PYKEOPS_VERBOSE", "0")
os.environ.setdefault("KEOPS_VERBOSE", "0")
# scikit-learn's array-API estimator checks run only when SciPy's array-API mode is on,
# which must be set before SciPy is first imported.
os.environ.setdefault("SCIPY_ARRAY_API", "1")

import pytest  # noqa: E402
import torch  # noqa: E402


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture
def one_thread():
    """One torch thread for the test, restored afterwards: on the shared, oversubscribed
    CI CPUs two spinning OpenMP threads make small eigh/matmul calls 10-20x slower."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
