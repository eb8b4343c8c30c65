import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    # On the shared, oversubscribed CI/dev CPUs two BLAS threads make small eigh/matmul
    # calls 10-20x slower than one; these tests are small, so run them single-threaded.
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
