"""Shared test setup."""

from collections.abc import Iterator

import pytest
import torch


@pytest.fixture(autouse=True)
def _seed_one_thread() -> Iterator[None]:
    """Seed every test, and use one thread: for these tiny tensors OpenMP threads only add
    overhead, and on a busy 2-core machine their spin-waiting made some files 10x slower."""
    torch.manual_seed(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
