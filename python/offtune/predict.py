"""offtune.predict: every point of a grid of engine knobs predicted from your own training step,
without running the points (the what-if predictor of `offtune predict`, docs/device-model.md).

    def step(off, index):
        with off.scope():
            loss = model(**batch).loss
        loss.backward()
        opt.step()
        opt.zero_grad()

    result = offtune.predict(step, {"min_offload_size": ["64KiB", "1MiB"],
                                    "max_fwd_stash_size": [1, 5]}, device_model="h100-sxm")
    for p in result["points"]:
        print(p["config"], p["step_ms"], p["peak_allocated"])

The step runs on host-sim (device tensors are CPU tensors there): with a device model its ops are
timed as that GPU's, without one on this CPU's clock. It is called with an Offloader the recording
made (valid for that call only) and the step's index, after `warmup` unmeasured calls, once per
recorded step: one on a device model's clock, 5 on this CPU's, per semantics the grid uses.
"""

from typing import Any, Callable, Dict, Mapping, Optional

from ._native import _offtune
from .engine import Offloader


def predict(
    step: Callable[[Offloader, int], None],
    grid: Optional[Mapping[str, Any]] = None,
    *,
    warmup: int = 1,
    device_model: Optional[str] = None,
    **options: Any,
) -> Dict[str, Any]:
    """Predicts every point of `grid` (engine knob -> list of values, as `offtune sweep` takes
    them: min_offload_size, max_fwd_stash_size, prefetch, link, use_streams, ...; the baseline is
    always point 0) from steps of `step` recorded on host-sim.

    `options` are the offloader's (a knob given here is the grid's value where the grid has no
    list of it). `device_model` names a profile ("h100-sxm") or a model file; None times the step
    on this CPU. Returns {"source": what the figures rest on, "points": [{"index", "config",
    "step_ms", "bound_ms", "compute_ms", "peak_allocated", "peak_reserved" (the step's allocations
    replayed through CUDA's caching allocator as host-sim models it), "hidden_copy_pct",
    "offloaded_bytes", "reloaded_bytes", "window_waits", "stalled_ms", "front"}, ...], "traces",
    "record_ms", "predict_ms"}. A bad knob, value or device model: InputError. Checkpointing,
    the disk tier and layer offloading are not knobs here (your step does its own checkpointing).
    """
    if not callable(step):
        raise TypeError(f"step must be callable as step(offloader, index), got {type(step)!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise _offtune.InputError(f"warmup must be a whole number >= 0, got {warmup!r}")
    given = dict(options)

    def native_step(engine: Any, index: int) -> None:
        step(Offloader._borrow(engine, given), index)

    return _offtune.predict(native_step, dict(grid or {}), given, warmup, device_model or "")
