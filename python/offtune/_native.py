"""Loads the extension module, after checking that it was built for the torch this Python runs.

A module built against another torch would crash at load or at its first call (C++ ABI and
layouts differ between torch versions): say so as an ImportError naming both versions instead.
"""

import torch

try:
    from . import _build_info
except ImportError as e:  # pragma: no cover - a package laid out by hand
    raise ImportError(
        "offtune: the package has no _build_info.py (written by its build); install it with "
        "'pip install --no-build-isolation ./python' or build the CMake target offtune_python"
    ) from e


def check_torch(running: str = None) -> None:
    """Raises ImportError unless `running` (default: torch.__version__) is the built-for torch."""
    running = torch.__version__ if running is None else running
    built = _build_info.TORCH_VERSION
    if str(running) != built:
        raise ImportError(
            f"offtune was built against torch {built} but this Python runs torch {running}; "
            f"rebuild offtune with this torch (pip install --no-build-isolation --force-reinstall "
            f"./python) or install torch=={built.split('+')[0]}"
        )


check_torch()

from . import _offtune  # noqa: E402  (only once the check passed)

__all__ = ["_offtune", "check_torch"]
