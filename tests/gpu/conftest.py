"""GPU tests: skipped with the reason when torch or a CUDA GPU is missing."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="session")
def cuda_torch() -> Any:
    """torch with a usable CUDA device, or a skip saying what is missing."""
    torch = pytest.importorskip("torch", reason="GPU tests need torch (pip install 'pytest-rnnperf[torch]')")
    if not torch.cuda.is_available():
        pytest.skip(f"no CUDA GPU visible to torch {torch.__version__}")
    return torch
