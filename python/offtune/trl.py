"""A drop-in for TRL's get_act_offloading_ctx_manager, backed by offtune's C++ engine.

Same arguments and the same rules as TRL's (trl/models/activation_offloading.py):
- the model is unwrapped first: a wrapper's `.module`, then a PEFT model's `.base_model`;
- one output head is kept out of offloading, the first found of: `output` (a module, or a module's
  `.linear`), `lm_head`, `decoder.output` or `decoder.lm_head`, `final_layer_norm` or `ln_f`,
  `head`; when none is found a warning says so (unless warn_if_no_head=False);
- every module whose qualified name contains "liger" (Liger's fused kernels) is kept out too;
- the storages of every parameter of the model, frozen ones and views of them included, are
  never offloaded (under FSDP2, the unsharded parameters each forward uses too).
The engine runs under TRL's semantics by default (semantics="trl": which tensors move and how the
window counts them); any other engine option may be given by name as well.

Under `offtune sweep --script` (OFFTUNE_POINT set), the point's options are taken over the
arguments the script passes, so that one unchanged script runs every point; at the baseline
({"offload": false}) the context does nothing (no hooks, nothing registered on the model). Each
entry of the context marks a step of the point's run (offtune/_child.py).
"""

import logging
from typing import List

from torch import nn

from . import _child
from ._native import _offtune
from .engine import Offloader, _Hooks, no_offload

logger = logging.getLogger(__name__)


def _unwrap(model: nn.Module) -> nn.Module:
    m = model
    if hasattr(m, "module"):
        m = m.module
    if hasattr(m, "base_model") and hasattr(m, "peft_config"):
        m = m.base_model
    return m


def _output_head(m: nn.Module):
    """The module TRL's rules pick as the output head, or None."""
    if hasattr(m, "output"):
        if isinstance(m.output, nn.Module):
            return m.output
        linear = getattr(m.output, "linear", None)
        return linear if isinstance(linear, nn.Module) else None
    if hasattr(m, "lm_head"):
        return m.lm_head
    if hasattr(m, "decoder"):
        decoder = m.decoder
        if hasattr(decoder, "output"):
            return decoder.output
        if hasattr(decoder, "lm_head"):
            return decoder.lm_head
        return None
    if hasattr(m, "final_layer_norm") or hasattr(m, "ln_f"):
        return getattr(m, "final_layer_norm", None) or m.ln_f
    head = getattr(m, "head", None)
    return head if isinstance(head, nn.Module) else None


class ActivationOffloadingContext(_Hooks):
    """What get_act_offloading_ctx_manager returns: enter it around each forward.

    `offloader` is the engine (stats(), resident(), ...); `excluded` the modules kept out of
    offloading (the head, Liger's modules).
    """

    def __init__(self, offloader: Offloader, excluded: List[nn.Module]):
        engine = offloader._engine
        make = None if engine is None else (lambda: (engine.forward().pack, _offtune.unpack))
        super().__init__(make, on_enter=lambda: _child.on_forward(offloader))
        self.offloader = offloader
        self.excluded = excluded


def _exclude(module: nn.Module, region: _Hooks) -> None:
    def enter(*_):
        region.__enter__()

    def leave(*_):
        region.__exit__(None, None, None)

    module.register_forward_pre_hook(enter)
    module.register_forward_hook(leave, always_call=True)


def _model_cuda_device(model: nn.Module):
    """The index of the one CUDA device all of the model's parameters are on, else None (on the
    CPU, or spread over several devices: then the engine takes the current device, and keeps the
    tensors of the others on their devices)."""
    devices = {p.device.index for p in model.parameters() if p.device.type == "cuda"}
    return devices.pop() if len(devices) == 1 else None


def _keep_fsdp_unsharded_parameters(model: nn.Module, offloader: Offloader) -> None:
    """FSDP2 (fully_shard): the parameters a forward uses are unsharded copies that exist only
    from the module's pre-forward on, and FSDP frees their memory after it with
    storage.resize_(0), whatever else refers to it. Under TRL's rules a view of a parameter
    (linear saves weight.t()) is offloaded, and a copy of it in flight would read freed memory.
    A pre-forward hook after FSDP's own registers those storages as never offloaded (the storage
    object stays the same across steps; only its memory comes and goes)."""
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:  # a torch built without distributed
        return
    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.register_forward_pre_hook(
                lambda m, _args: offloader.never_offload_parameters(m))


def get_act_offloading_ctx_manager(
    model: nn.Module,
    use_pin_memory: bool = True,
    use_streams: bool = True,
    min_offload_size: int = 1024,
    max_fwd_stash_size: int = 5,
    warn_if_no_head: bool = True,
    **options,
) -> ActivationOffloadingContext:
    """TRL's activation-offloading context for `model`, run by offtune's engine.

    Arguments as TRL's; further keyword arguments are engine options (Offloader's), e.g.
    prefetch=1 or semantics="offtune". Registers forward hooks on the excluded modules, as TRL's
    does: call it once per model. Under `offtune sweep --script`, the point's options win over
    these arguments (see the module's doc).
    """
    options.setdefault("semantics", "trl")
    options.update(
        use_pin_memory=use_pin_memory,
        use_streams=use_streams,
        min_offload_size=min_offload_size,
        max_fwd_stash_size=max_fwd_stash_size,
    )
    point = _child.point()
    _child.set_model(model)
    device = _model_cuda_device(model)
    if device is not None and "device_index" not in options:
        # The model's device, not whichever was current when this was called: under torchrun a
        # model on cuda:{rank} without torch.cuda.set_device would otherwise offload nothing on
        # every rank but 0.
        options["device_index"] = device
    if _child.is_baseline(point):
        return ActivationOffloadingContext(Offloader(offload=False), [])
    if point is not None:
        options.update(point)
    offloader = Offloader(**options)
    offloader.never_offload_parameters(model)
    _keep_fsdp_unsharded_parameters(model, offloader)

    region = no_offload()
    unwrapped = _unwrap(model)
    excluded = []
    head = _output_head(unwrapped)
    if head is not None:
        excluded.append(head)
    elif warn_if_no_head:
        logger.warning(
            "offtune: no output head found (looked for output, lm_head, decoder.output, "
            "decoder.lm_head, final_layer_norm, ln_f, head): it will be offloaded, which is slow "
            "for a large vocabulary. Name it model.output, or pass warn_if_no_head=False."
        )
    excluded += [m for name, m in unwrapped.named_modules() if "liger" in name.lower()]
    for module in excluded:
        _exclude(module, region)
    return ActivationOffloadingContext(offloader, excluded)
