"""Fixtures of the structure tests."""
import shutil

import pytest


@pytest.fixture(scope="session")
def nvcc():
    exe = shutil.which("nvcc")
    if exe is None:
        pytest.fail("nvcc is not on PATH: the structure tests compile real kernels (install the CUDA toolkit)")
    return exe
