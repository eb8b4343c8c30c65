import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    # The CI machine has 2 cores shared by several jobs; two spinning OpenMP threads
    # there are ~10x slower than one. Restored after each test.
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
