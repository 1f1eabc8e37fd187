"""Shared test set-up: the Triton interpreter check, seeded random fields, NaN-poisoned outputs.

The Triton kernels are tested on CPU tensors through Triton's interpreter, which is chosen when
``triton`` is imported: ``TRITON_INTERPRET=1`` must be in the environment before pytest starts, e.g.

    TRITON_INTERPRET=1 python -m pytest -q tests
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

_INTERPRET_HELP = (
    "tilecraft's tests run the Triton kernels on the CPU through Triton's interpreter, which must be "
    "chosen before triton is imported. Run them as\n\n"
    "    TRITON_INTERPRET=1 python -m pytest -q tests\n\n"
    f"(TRITON_INTERPRET is {os.environ.get('TRITON_INTERPRET')!r} in this environment)"
)

# The package uses a src layout; make it importable when it is not installed and pytest is not
# configured with ``pythonpath = src``.
SRC = Path(__file__).resolve().parents[1] / "src"
try:
    import tilecraft  # noqa: F401
except ImportError:
    sys.path.insert(0, str(SRC))

import torch  # noqa: E402


def gpu_mode() -> bool:
    """True for a run of the GPU tests (tests/gpu/) on a GPU machine: ``TILECRAFT_GPU_TESTS=1`` set and
    TRITON_INTERPRET not, so the kernels are compiled for the GPU instead of interpreted."""
    return os.environ.get("TILECRAFT_GPU_TESTS") == "1" and os.environ.get("TRITON_INTERPRET") != "1"


def pytest_configure(config: pytest.Config) -> None:
    """Stop the whole run at once, with the fix, when the kernels would not be interpreted (unless
    this is a GPU run of tests/gpu/, see ``gpu_mode``)."""
    if gpu_mode():
        return
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.exit(_INTERPRET_HELP + "\n\nOn a GPU machine, the GPU tests run as\n\n"
                    "    TILECRAFT_GPU_TESTS=1 python -m pytest -q tests/gpu", returncode=4)
    # The interpreter's own use of a numpy API deprecated in numpy 1.25, once per launch.
    config.addinivalue_line("filterwarnings",
                            "ignore:Conversion of an array with ndim:DeprecationWarning:triton.runtime.interpreter")
    from tilecraft.ops import stencil as ops

    if not ops.triton_on_cpu():
        # TRITON_INTERPRET=1 is set, but triton was imported (by a plugin, a sitecustomize) before
        # the variable was: its kernels were built for a GPU.
        pytest.exit("TRITON_INTERPRET=1 is set but the Triton kernels are not interpreted: triton was "
                    "imported before the variable took effect.\n" + _INTERPRET_HELP, returncode=4)


SEED = 20261121


def poisoned_like(t: torch.Tensor) -> torch.Tensor:
    """A NaN-filled tensor like ``t`` (same shape, dtype, device and strides): an element the
    kernel does not write stays NaN and fails any comparison."""
    return torch.full_like(t, float("nan"))


def random_field(shape: tuple[int, ...], dtype: torch.dtype = torch.float64, *, seed: int = SEED,
                 generator: torch.Generator | None = None) -> torch.Tensor:
    """Uniform random values in [-1, 1) from a seeded generator (reproducible)."""
    gen = generator or torch.Generator().manual_seed(seed)
    return torch.rand(shape, dtype=torch.float64, generator=gen).mul_(2).sub_(1).to(dtype)


@pytest.fixture
def gen() -> torch.Generator:
    """A torch.Generator seeded the same way in every test."""
    return torch.Generator().manual_seed(SEED)


@pytest.fixture
def field(gen: torch.Generator):
    """Factory: ``field(shape, dtype=torch.float64)`` -> uniform random values in [-1, 1); successive
    calls in one test draw different values from the test's seeded generator."""
    def make(shape: tuple[int, ...], dtype: torch.dtype = torch.float64) -> torch.Tensor:
        return random_field(shape, dtype, generator=gen)
    return make


@pytest.fixture(name="poisoned_like")
def _poisoned_like_fixture():
    """The ``poisoned_like`` helper as a fixture (conftest modules are not meant to be imported)."""
    return poisoned_like


@pytest.fixture(scope="session")
def src_dir() -> Path:
    return SRC


@pytest.fixture(autouse=True)
def _fresh_replays():
    """Every test plans its ops' launches afresh (``ops.launch.clear_replays``): tests change module
    defaults and constants that no replay key holds, and one test's recorded launches must not
    stand in for another's planning."""
    from tilecraft.ops.launch import clear_replays

    clear_replays()
    yield
    clear_replays()
