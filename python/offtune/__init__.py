"""offtune from Python: its C++ activation-offloading engine inside your own training loop.

    import offtune
    ctx = offtune.get_act_offloading_ctx_manager(model)   # TRL's drop-in, TRL's rules
    with ctx:
        loss = model(**batch).loss
    loss.backward()

    off = offtune.Offloader(min_offload_size="64KiB", max_fwd_stash_size=5, prefetch=1)
    with off.scope():                                       # any engine option, by name
        loss = model(**batch).loss
    loss.backward()
    print(off.stats())

Torch's own autograd engine runs the steps: offtune's pack and unpack hooks (C++) reach it through
torch.autograd.graph.saved_tensors_hooks. README.md, "From Python", says more.
"""

from ._build_info import OFFTUNE_VERSION as __version__  # noqa: F401 (the package version)
from ._native import _offtune
from .engine import (
    LayerOffloader,
    Offloader,
    no_offload,
    offload_decoder_layers,
    option_names,
)
from .trl import get_act_offloading_ctx_manager

host_sim = _offtune.host_sim
# Errors by kind (docs/python.md, "Errors"): InputError is a ValueError (a value you gave, refused),
# EngineFault a RuntimeError (the work failed on valid input).
InputError = _offtune.InputError
EngineFault = _offtune.EngineFault

# Under `offtune sweep --script` on host-sim: the emulated device's allocator, before the script
# builds its model (offtune/_child.py).
from . import _child  # noqa: E402

_child.install_host_sim_if_asked()

__all__ = [
    "EngineFault",
    "InputError",
    "LayerOffloader",
    "Offloader",
    "get_act_offloading_ctx_manager",
    "host_sim",
    "no_offload",
    "offload_decoder_layers",
    "option_names",
]

# The recorder (offtune.record) and the Hugging Face callback, which needs transformers: imported
# when first named.
from .record import Recording, record  # noqa: E402

__all__ += ["OfftuneCallback", "Recording", "record"]


def __getattr__(name):
    if name == "OfftuneCallback":
        from .callback import OfftuneCallback

        return OfftuneCallback
    raise AttributeError(f"module 'offtune' has no attribute {name!r}")
