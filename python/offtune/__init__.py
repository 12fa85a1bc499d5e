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
torch.autograd.graph.saved_tensors_hooks. docs/python.md in the repository says more.
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
from .predict import predict
from .record import Recording, export_memory_snapshot, record
from .trl import get_act_offloading_ctx_manager

host_sim = _offtune.host_sim
# Errors by kind (docs/python.md, "Errors"): InputError is a ValueError (a value you gave, refused),
# EngineFault a RuntimeError (the work failed on valid input).
InputError = _offtune.InputError
EngineFault = _offtune.EngineFault

# Under `offtune sweep --script` (offtune/_child.py): on host-sim, the emulated device's allocator,
# before the script builds its model; and the recorder that the first scope or drop-in entry begins
# the point's run with (_child imports neither the engine nor the recorder: the recorder is built
# on the engine, and the engine's scopes call _child).
from . import _child  # noqa: E402

_child.use_recorder(record)
_child.install_host_sim_if_asked()

__all__ = [
    "EngineFault",
    "InputError",
    "LayerOffloader",
    "Offloader",
    "OfftuneCallback",
    "Recording",
    "export_memory_snapshot",
    "get_act_offloading_ctx_manager",
    "host_sim",
    "no_offload",
    "offload_decoder_layers",
    "option_names",
    "predict",
    "record",
]


# The Hugging Face callback, which needs transformers: imported when first named.
def __getattr__(name):
    if name == "OfftuneCallback":
        from .callback import OfftuneCallback

        return OfftuneCallback
    raise AttributeError(f"module 'offtune' has no attribute {name!r}")
