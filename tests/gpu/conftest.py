"""GPU tests: the Triton and Gluon kernels compiled for the GPU and checked against float64.

They run only on a machine with a CUDA GPU, as ``TILECRAFT_GPU_TESTS=1 python -m pytest -q tests/gpu``
(TRITON_INTERPRET unset); in the interpreter run (CI, ``make test``) every test here is skipped. The
kernels that only exist for a GPU (the sm90 Gluon kernels, which Triton's interpreter cannot run) are
checked here and by the benchmark scripts before they time anything.
"""
from __future__ import annotations

import os

import pytest
import torch



def gpu_mode() -> bool:
    """As tests/conftest.py: TILECRAFT_GPU_TESTS=1 and TRITON_INTERPRET unset."""
    return os.environ.get("TILECRAFT_GPU_TESTS") == "1" and os.environ.get("TRITON_INTERPRET") != "1"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = __file__.rsplit("/", 1)[0]
    reason = None
    if not gpu_mode():
        reason = "GPU tests: run them on a GPU machine as TILECRAFT_GPU_TESTS=1 python -m pytest tests/gpu"
    elif not torch.cuda.is_available():
        reason = "TILECRAFT_GPU_TESTS=1 but torch sees no CUDA device"
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.gpu)
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))


def sm90() -> bool:
    """True on a Hopper (sm90) GPU: the Gluon kernels' target."""
    return torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
