"""Shared test set-up."""
import pytest
import torch


@pytest.fixture(autouse=True, scope="session")
def one_thread():
    # The tests use small tensors, which run faster on one thread; with the CPU shared by other
    # jobs, OpenMP's spinning threads made a ResNet-20 step ~50x slower.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
