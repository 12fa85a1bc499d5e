"""pytest setup for offtune's Python tests: which offtune package they import, and host-sim.

The package comes from the CMake build tree (build/ci/python, laid out by python/CMakeLists.txt)
unless OFFTUNE_PYTHON_PATH names another directory, or is set empty to import an installed
offtune (pip install ./python). The tests run on host-sim (the emulated device on the CPU) unless
OFFTUNE_TEST_BACKEND=cuda (scripts/gpu-check.sh, where a GPU is lent).
"""

import os
import pathlib
import sys

import pytest
import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
_path = os.environ.get("OFFTUNE_PYTHON_PATH", str(ROOT / "build" / "ci" / "python"))
if _path:
    if not (pathlib.Path(_path) / "offtune").is_dir():
        raise pytest.UsageError(
            f"no offtune package under {_path}: build it (cmake --build build/ci --target "
            "offtune_python), or set OFFTUNE_PYTHON_PATH to a build's python/ directory, or to "
            "'' for an installed offtune"
        )
    sys.path.insert(0, _path)

import offtune  # noqa: E402

BACKEND = os.environ.get("OFFTUNE_TEST_BACKEND", "host-sim")
if BACKEND not in ("host-sim", "cuda"):
    raise pytest.UsageError(f"OFFTUNE_TEST_BACKEND must be host-sim or cuda, got {BACKEND!r}")
DEVICE = torch.device("cuda" if BACKEND == "cuda" else "cpu")
if BACKEND == "cuda":
    # Two runs compared bit for bit must not differ by themselves (atomics in attention's backward,
    # cuBLAS's split reductions).
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True)

# The emulator's checks: freed memory poisoned (NaNs where a buffer was freed too early), freed
# blocks reused at once, stream order checked.
DEBUG = (
    dict(poison_freed=True, reuse_freed=True, check_streams=True) if BACKEND == "host-sim" else {}
)

if BACKEND == "host-sim":
    # Before any model is built: every CPU allocation is then a counted "device" allocation.
    offtune.host_sim.install()
# Same intra-op threads for the runs compared bit for bit, and a core left to the copy thread.
torch.set_num_threads(1)


@pytest.fixture
def device():
    return DEVICE


@pytest.fixture(autouse=True)
def no_stream_races():
    """Every test ends without a stream-order violation found by host-sim's checker."""
    yield
    if BACKEND == "host-sim":
        races = offtune.host_sim.take_stream_races()
        assert not races, races[:5]
