"""The engine's Python face: Offloader, its scope, no-offload regions, layer offloading.

Everything here is a thin wrapper: options are parsed and validated in C++ (ValueError naming a bad
one), the hooks run in C++, and the stats are the engine's own counters.
"""

import json
import os
from typing import Any, Dict, Iterable, List, Optional

import torch
from torch import nn
from torch.autograd.graph import saved_tensors_hooks

from . import _child
from ._native import _offtune

InputError = _offtune.InputError  # a ValueError: a value you gave, refused

#: The environment variable Offloader.from_env() reads: a JSON object of options, e.g.
#: OFFTUNE_POINT='{"min_offload_size": "64KiB", "max_fwd_stash_size": 3}', or {"offload": false}
#: for no offloading at all. `offtune sweep --script` sets it for each point.
ENV_VARIABLE = _child.POINT_VARIABLE


def option_names() -> List[str]:
    """The options Offloader takes (the fields of the C++ OffloadOptions)."""
    return list(_offtune.offload_option_names())


class _Hooks:
    """A reusable context manager that pushes saved-tensor hooks; each entry makes fresh ones.

    Entries nest and may be re-entered (a drop-in context is entered every step); each `with`
    pops what it pushed. `make` None: no hooks at all (offloading off). `on_enter`, when given, is
    told of each entry (a step boundary under `offtune sweep --script`).
    """

    __slots__ = ("_make", "_stack", "_on_enter")

    def __init__(self, make, on_enter=None):
        self._make = make
        self._stack = []
        self._on_enter = on_enter

    def __enter__(self):
        if self._on_enter is not None:
            self._on_enter()
        if self._make is None:
            self._stack.append(None)
            return self
        pack, unpack = self._make()
        hooks = saved_tensors_hooks(pack, unpack)
        hooks.__enter__()
        self._stack.append(hooks)
        return self

    def __exit__(self, *exc):
        hooks = self._stack.pop()
        if hooks is not None:
            hooks.__exit__(*exc)
        return False


def no_offload() -> _Hooks:
    """A region whose saved tensors are kept as autograd keeps them, inside any offload scope.

    Saved-tensor hooks nest and the innermost wins: inside it, the tensors autograd saves stay on
    the device. (The drop-in puts the output head in one.)
    """
    return _Hooks(lambda: (_offtune.pack_kept, _offtune.unpack))


class Offloader:
    """offtune's activation offloader (the C++ ActivationOffloader) for a Python training loop.

    Options are the fields of OffloadOptions, by name (Offloader.option_names()); sizes as
    numbers of bytes or as the CLI writes them ("64KiB"), modes as text (backend="host-sim",
    semantics="trl", tier="auto", link="pcie4"). A bad option is a ValueError naming it.

    Use scope() around the forward; backward needs nothing. One offloader serves every step.
    With backend "auto" (the default) it runs on CUDA where a GPU is, else on host-sim, the
    emulated device on the CPU (device tensors are CPU tensors there).

    offload=False (a bool; the text "all" or "boundaries" is the engine's offload set) is
    offloading off, the baseline a sweep measures against: no engine, scope() installs no hooks,
    stats() and resident() are empty, and no recording observes it.
    """

    option_names = staticmethod(option_names)

    def __init__(self, **options):
        self._options = dict(options)
        self._device: Optional[int] = None  # the CUDA device taken as current, when not given
        if options.get("offload") is False:
            self._engine = None
            return
        self._engine = _offtune.ActivationOffloader(options)
        given = options.get("device_index")
        if self._engine.backend() == "cuda" and (given is None or given == -1):
            self._device = torch.cuda.current_device()

    @classmethod
    def _borrow(cls, engine: Any, options: Dict[str, object]) -> "Offloader":
        """An Offloader over an engine made elsewhere (offtune.predict's recording), valid while
        its maker keeps it."""
        off = cls.__new__(cls)
        off._options = dict(options)
        off._engine = engine
        off._device = None
        return off

    @property
    def enabled(self) -> bool:
        """False for offload=False: this offloader offloads nothing and installs no hooks."""
        return self._engine is not None

    @classmethod
    def from_env(cls, variable: str = ENV_VARIABLE, **overrides) -> "Offloader":
        """An offloader with the options of the JSON object in $OFFTUNE_POINT (then `overrides`).

        Unset or empty, the defaults. Not a JSON object: ValueError naming the variable.
        {"offload": false} (the baseline of `offtune sweep --script`): offloading off, no hooks.
        Under a sweep each entry of its scope() marks a step of the point's run
        (docs/python.md, "Recording under a sweep").
        """
        text = os.environ.get(variable, "").strip()
        options = {}
        if text:
            try:
                options = json.loads(text)
            except json.JSONDecodeError as e:
                raise InputError(f"{variable} is not JSON ({e.msg} at {e.pos}): {text!r}") from None
            if not isinstance(options, dict):
                raise InputError(
                    f"{variable} must hold a JSON object of options such as "
                    f'{{"min_offload_size": "64KiB"}}, got {text!r}'
                )
        options.update(overrides)
        return cls(**options)

    def scope(self) -> _Hooks:
        """Saved tensors created inside `with offloader.scope():` are managed by this offloader.

        Reusable: enter it every step. Scopes and no_offload() regions nest; the innermost wins.
        With offloading off (offload=False) it is a context that does nothing.
        """
        engine = self._engine
        make = None if engine is None else (lambda: (engine.forward().pack, _offtune.unpack))
        return _Hooks(make, on_enter=self._on_enter)

    def _on_enter(self) -> None:
        if self._device is not None and torch.cuda.current_device() != self._device:
            # Made before torch.cuda.set_device(local_rank) (torchrun): every tensor of this rank
            # would be kept on its device.
            raise InputError(
                f"offtune: this offloader was made for cuda:{self._device}, the current device "
                f"then, but cuda:{torch.cuda.current_device()} is current now: make it after "
                "torch.cuda.set_device(local_rank), or give it device_index")
        _child.on_forward(self)

    no_offload = staticmethod(no_offload)

    def never_offload(self, tensor: torch.Tensor) -> None:
        """The tensor's storage is never offloaded (held weakly)."""
        if self._engine is not None:
            self._engine.never_offload(tensor)

    def never_offload_parameters(self, module: nn.Module) -> None:
        """Every parameter's storage of `module` is never offloaded (frozen ones and views too)."""
        for p in module.parameters():
            self.never_offload(p)

    @property
    def backend(self) -> str:
        """The resolved backend: "cuda" or "host-sim" ("none" with offloading off)."""
        return "none" if self._engine is None else self._engine.backend()

    @property
    def semantics(self) -> str:
        return "none" if self._engine is None else self._engine.semantics()

    @property
    def options(self) -> Dict[str, object]:
        """The options as given."""
        return dict(self._options)

    def stats(self) -> Dict[str, int]:
        """The engine's counters since construction (OffloadStats: packed, offloaded, ...)."""
        return {} if self._engine is None else self._engine.stats()

    def resident(self) -> Dict[str, object]:
        """What the engine holds now (ResidentState); "resting" is True between steps."""
        return {} if self._engine is None else self._engine.resident()

    def device_memory(self) -> Dict[str, int]:
        """Device memory as the backend counts it: allocated, peak_allocated, reserved, ..."""
        return {} if self._engine is None else self._engine.device_memory()

    def reset_peak_device_memory(self) -> None:
        if self._engine is not None:
            self._engine.reset_peak_device_memory()

    def synchronize(self) -> None:
        """Blocks until every copy this offloader issued has finished."""
        if self._engine is not None:
            self._engine.synchronize()

    def release_cached_memory(self) -> None:
        """Returns unused host-pool memory to the system."""
        if self._engine is not None:
            self._engine.release_cached_memory()


class LayerOffloader:
    """Frozen weights of a model's blocks kept in host memory, copied in one block ahead of use.

    Shares `offloader`'s copy stream and backend. Options: depth (blocks copied ahead, default 1)
    and the other fields of the C++ LayerOffloadOptions. Register blocks in forward order with
    add_block(); run each block inside `with layers.block(i):`, or let offload_decoder_layers()
    register a Hugging Face decoder's layers with forward hooks.
    """

    def __init__(self, offloader: Offloader, **options):
        if not isinstance(offloader, Offloader):
            raise TypeError("LayerOffloader takes an offtune.Offloader to share its copy stream")
        if offloader._engine is None:
            raise InputError("LayerOffloader needs an offloader that offloads (this one was made "
                             "with offload=False)")
        self._offloader = offloader
        self._layers = _offtune.LayerOffloader(offloader._engine, options)

    def add_block(self, frozen: Iterable[torch.Tensor], names: Optional[List[str]] = None) -> int:
        """Registers the next block's frozen parameters; returns its index."""
        return self._layers.add_block(list(frozen), list(names or []))

    def enter(self, block: int) -> None:
        self._layers.enter(block)

    def exit(self, block: int) -> None:
        self._layers.exit(block)

    def block(self, index: int):
        """`with layers.block(i):` runs block i with its weights on the device."""
        layers = self._layers

        class _Block:
            def __enter__(self):
                layers.enter(index)
                return self

            def __exit__(self, *exc):
                layers.exit(index)
                return False

        return _Block()

    def release(self) -> None:
        self._layers.release()

    def synchronize(self) -> None:
        self._layers.synchronize()

    @property
    def blocks(self) -> int:
        return self._layers.blocks()

    def resident_blocks(self) -> int:
        return self._layers.resident_blocks()

    def stats(self) -> Dict[str, int]:
        return self._layers.stats()


def decoder_layers(model: nn.Module) -> List[nn.Module]:
    """The repeated blocks of a Hugging Face decoder (PEFT wrappers unwrapped)."""
    m = model
    if hasattr(m, "base_model") and hasattr(m, "peft_config"):
        m = m.base_model.model
    for path in ("model.layers", "model.decoder.layers", "transformer.h", "gpt_neox.layers",
                 "layers", "h", "decoder.layers"):
        obj = m
        for part in path.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                break
        if isinstance(obj, (nn.ModuleList, list)) and len(obj) > 0:
            return list(obj)
    raise InputError(
        f"offtune: cannot find the decoder layers of {type(model).__name__} (looked for "
        "model.layers, transformer.h, gpt_neox.layers, ...): register blocks with "
        "LayerOffloader.add_block yourself"
    )


def offload_decoder_layers(model: nn.Module, offloader: Offloader, **options) -> LayerOffloader:
    """Layer offloading of a Hugging Face decoder's frozen weights (LoRA's base, a frozen model).

    Each decoder layer becomes a block: its frozen parameters (requires_grad False) are
    registered, and forward pre/post hooks enter and leave it (also in a checkpoint's recompute).
    Trainable parameters stay where they are. Returns the LayerOffloader; keep it alive.
    """
    layers = LayerOffloader(offloader, **options)
    for layer in decoder_layers(model):
        named = [(n, p) for n, p in layer.named_parameters() if not p.requires_grad]
        index = layers.add_block([p for _, p in named], [n for n, _ in named])
        layer.register_forward_pre_hook(lambda *_, i=index: layers.enter(i))
        layer.register_forward_hook(lambda *_, i=index: layers.exit(i), always_call=True)
    return layers
