"""offtune.record: a run of your own training loop, written into the same store as `offtune run`.

    off = offtune.Offloader(min_offload_size="64KiB", max_fwd_stash_size=5)
    with offtune.record("runs.db", name="my-run", model=model, offloader=off) as rec:
        for batch in loader:
            with off.scope():
                loss = model(**batch).loss
            loss.backward(); opt.step(); opt.zero_grad()
            rec.step(loss)

Then `offtune report --db runs.db`, `offtune recommend --db runs.db`, `offtune export` and the
dashboard read it as a CLI run. docs/python.md says what is written.

Which offloaders a recording listens to: `offloader=` (an Offloader, the drop-in's context, or a
list of them); left out, every offtune.Offloader alive when the recording begins (the drop-in's
included); `offloader=()` (or False), none, whatever is alive: the no-offload baseline. Offloaders
made after the recording began are not seen unless given to rec.attach(). The run records the
first offloader's options as its config.
"""

import gc
import math
import os
import warnings
from typing import Any, Dict, List, Optional

import torch

from . import _child
from ._native import _offtune
from .engine import InputError, Offloader

__all__ = ["record", "Recording"]


def _offloaders(given) -> List[Offloader]:
    """The Offloaders `given` names (see the module's doc); None: every live one."""
    if given is None:
        # type(), not isinstance(): isinstance reads __class__, which some lazy objects (deprecated
        # module attributes) answer with a warning.
        # Offloading off (offload=False) has no engine to observe.
        return [o for o in gc.get_objects() if issubclass(type(o), Offloader) and o.enabled]
    if given is False:
        return []
    items = list(given) if isinstance(given, (list, tuple, set)) else [given]
    out = []
    for item in items:
        off = item if isinstance(item, Offloader) else getattr(item, "offloader", None)
        if not isinstance(off, Offloader):
            raise TypeError(
                "offloader must be an offtune.Offloader, the context get_act_offloading_ctx_manager"
                f" returns, or a list of them; got {type(item).__name__}"
            )
        if off not in out and off.enabled:
            out.append(off)
    return out


def _unwrap(model):
    m = model
    if hasattr(m, "base_model") and hasattr(m, "peft_config"):  # PEFT
        m = m.base_model.model
    return m


_DTYPES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}


def _describe(model) -> Dict[str, Any]:
    """What the run records of `model`: its class (and Hugging Face name), dtype, LoRA rank, and
    whether Hugging Face's gradient checkpointing is on."""
    if model is None:
        return {}
    inner = _unwrap(model)
    out = {"model": type(inner).__name__}
    name = getattr(getattr(inner, "config", None), "_name_or_path", "") or ""
    if name:
        out["model"] += f" ({name})"
    params = list(model.parameters()) if hasattr(model, "parameters") else []
    trainable = [p for p in params if p.requires_grad] or params
    if trainable:
        dtype = trainable[0].dtype
        out["dtype"] = _DTYPES.get(dtype, str(dtype).replace("torch.", ""))
    peft = getattr(model, "peft_config", None)
    if isinstance(peft, dict) and peft:
        rank = getattr(next(iter(peft.values())), "r", 0)
        if isinstance(rank, int):
            out["lora_rank"] = rank
    # transformers 5 renamed is_gradient_checkpointing (deprecated, with a warning).
    flag = "is_activation_checkpointing"
    if not hasattr(type(inner), flag):
        flag = "is_gradient_checkpointing"
    if getattr(inner, flag, False):
        out["checkpoint"] = "all"
    return out


# Saved-tensor hooks of torch's own that keep what a forward saves on the device (checkpointing
# recomputes it): a run under them is still a baseline.
_OWN_HOOK_MODULES = ("torch.utils.checkpoint",)


def other_saved_tensor_hooks() -> Optional[str]:
    """The saved-tensor hooks installed now when they are neither offtune's nor torch's
    checkpointing ("trl.models.activation_offloading.OffloadActivations" for TRL's own offloading,
    "torch.autograd.graph.save_on_cpu", ...), else None."""
    top = torch._C._autograd._top_saved_tensors_default_hooks(False)
    if top is None:
        return None
    pack = top[0]
    if pack is _offtune.pack_kept or isinstance(getattr(pack, "__self__", None), _offtune.Forward):
        return None
    module = getattr(pack, "__module__", None) or type(pack).__module__
    if module.startswith(_OWN_HOOK_MODULES):
        return None
    name = getattr(pack, "__qualname__", type(pack).__qualname__)
    # A closure made in a context manager's __init__ is named after the context manager.
    name = name.split(".<locals>")[0].removesuffix(".__init__")
    return f"{module}.{name}"


def _loss_value(loss) -> float:
    if loss is None:
        return math.nan
    if isinstance(loss, torch.Tensor):
        return float(loss.detach().float().mean().item())
    return float(loss)


class Recording:
    """One run being recorded: what `with offtune.record(...) as rec` gives.

    step(loss=None) ends the current step and begins the next (the first begins when the `with`
    block is entered; the step still open when it ends is the loop's tail and is not counted).
    begin_step()/end_step() instead mark both ends, for loops that are told where steps begin.
    phase("forward") / phase("backward") mark phases inside a step (optional).
    After the block: `id` (the run's id in the store) and `summary` (its figures).
    """

    def __init__(self, native, offloaders: List[Offloader], other_hooks: Optional[str] = None):
        self._native = native
        self._offloaders = offloaders  # kept alive while the run observes them
        self.summary: Optional[Dict[str, Any]] = None
        #: Another tool's saved-tensor hooks the recorded forwards ran under (TRL's own offloading,
        #: say), or None: offtune did not see what they offloaded (see offtune.record).
        self.other_hooks = other_hooks
        self._watch = None  # the model's forward pre-hook looking for them

    def _watch_for_other_hooks(self, model) -> None:
        """Looks at every forward of `model` for another tool's saved-tensor hooks, until found."""
        if model is None or not hasattr(model, "register_forward_pre_hook") or self.other_hooks:
            return
        self._watch = model.register_forward_pre_hook(lambda *_: self._look_for_other_hooks())

    def _look_for_other_hooks(self) -> None:
        found = other_saved_tensor_hooks()
        if found is None or self.summary is not None:
            return
        self._found_other_hooks(found, stacklevel=4)
        self._native.leave_sweep()

    def _found_other_hooks(self, found: str, stacklevel: int) -> None:
        self.other_hooks = found
        if self._watch is not None:
            self._watch.remove()
            self._watch = None
        warnings.warn(
            f"offtune.record: the model's forward runs under saved-tensor hooks that are not "
            f"offtune's ({found}); offtune does not see what they offload, so run {self.id} is no "
            "baseline: it is kept out of the recorded sweep that recommend compares. To measure "
            "offloading, use offtune's drop-in (offtune.get_act_offloading_ctx_manager) or an "
            "offtune.Offloader",
            stacklevel=stacklevel,
        )

    @property
    def id(self) -> int:
        return self._native.id

    @property
    def path(self) -> str:
        return self._native.path

    @property
    def steps_measured(self) -> int:
        return self._native.steps_measured

    @property
    def step_open(self) -> bool:
        return self._native.step_open

    def step(self, loss=None) -> None:
        self._native.step(_loss_value(loss))

    def begin_step(self) -> None:
        self._native.begin_step()

    def end_step(self, loss=None) -> None:
        self._native.end_step(_loss_value(loss))

    def attach(self, offloader) -> None:
        """Observes one more offloader from now on (one made after the recording began)."""
        for off in _offloaders(offloader):
            self._native.attach(off._engine)
            self._offloaders.append(off)

    def phase(self, name: str):
        """`with rec.phase("forward"):` marks the forward (or "backward") in the timeline."""
        native = self._native

        class _Phase:
            def __enter__(self):
                native.begin_phase(name)
                return self

            def __exit__(self, *exc):
                native.end_phase(name)
                return False

        return _Phase()

    def _stop_watching(self) -> None:
        if self._watch is not None:
            self._watch.remove()
            self._watch = None

    def finish(self) -> Dict[str, Any]:
        self._stop_watching()
        self.summary = self._native.finish()
        self._offloaders = []
        return self.summary

    def interrupt(self, message: str) -> Dict[str, Any]:
        """Ends the run as interrupted, with `message` as its error."""
        self._stop_watching()
        self.summary = self._native.fail("interrupted", message)
        self._offloaders = []
        return self.summary

    def fail(self, error: BaseException) -> Dict[str, Any]:
        """Ends the run as failed (oom for an out-of-memory error, interrupted for Ctrl-C)."""
        if isinstance(error, (KeyboardInterrupt, SystemExit)):
            status = "interrupted"
        elif isinstance(error, torch.OutOfMemoryError if hasattr(torch, "OutOfMemoryError")
                        else torch.cuda.OutOfMemoryError):
            status = "oom"
        else:
            status = "failed"
        text = str(error).strip().splitlines()
        message = f"{type(error).__name__}: {text[0]}" if text else type(error).__name__
        self._stop_watching()
        self.summary = self._native.fail(status, message)
        self._offloaders = []
        return self.summary


class record:  # noqa: N801  (used as a function: `with offtune.record(...)`)
    """Records the training loop inside the `with` block as one run of the store `db`.

    Arguments:
      db            the SQLite store (created if absent). A file that is not an offtune store is
                    a ValueError and is left as it is; a directory that cannot be written, OSError.
      name          the run's label, and the recorded sweep it is a point of: runs recorded under
                    one name (the baseline and each configuration you tried) are what
                    `offtune recommend` picks from. Default: the model's class.
      model         the model (an nn.Module, PEFT-wrapped or not): its class, dtype, LoRA rank and
                    gradient checkpointing are recorded. Optional.
      offloader     what to listen to (see the module's doc); default every live Offloader.
      device_model  on host-sim, time the loop as this GPU would ("h100-sxm", "a100-80gb", ... or a
                    JSON file, as --device-model); ValueError for an unknown name, or on cuda.
      warmup        leading steps not measured (default 1, as the CLI's --warmup).
      batch, seq, dtype   the workload as you want it recorded (dtype defaults to the model's).
      backend       "auto" (the offloaders', else cuda where a GPU is, else host-sim), "cuda",
                    "host-sim".
      collector     "auto" | "cupti" | "nvtx-only" (cuda's device activity, as --collector).
      timeline      False: steps and summary only, no timeline or occupancy rows.
      memory_history  True: record the allocator's history over the measured steps (host-sim's
                    modelled allocator; ValueError on cuda, where torch's own
                    torch.cuda.memory._record_memory_history() is the one), for
                    `offtune export --format memory-snapshot` or offtune.export_memory_snapshot.

    Under torchrun, each rank records a run of its own: its rank and the world size are recorded
    (torch.distributed's when initialised, else $RANK and $WORLD_SIZE). With the process group
    initialised, the ranks that record into one store are one job (rank 0 leaves its run id in the
    process group's store; another rank waits for it up to 30 s, then records alone with a
    warning). Recordings are matched across ranks by name and order: the n-th recording named
    "train" on each rank is one job, whatever else one rank records under other names. Rank 0's
    run is the job, the others name it as their job,
    and `offtune report` shows the job as one row (the slowest rank's step time, the highest
    peak; --ranks each rank's). Give each rank a store of its own (f"runs-rank{rank}.db") and
    each rank's run stands alone; `offtune merge` joins stores.
    A run that observes no offtune offloader is the baseline, unless the forward runs under
    another tool's saved-tensor hooks (TRL's own activation_offloading=True, torch's save_on_cpu):
    offtune does not see what those offload, so it warns, keeps the run out of the recorded sweep
    (recommend never takes it for the baseline), and `Recording.other_hooks` names them (the
    label too, when they were on before the run began).
    Under `offtune sweep --script` ($OFFTUNE_RECORD set), the run is the sweep point's, whatever
    db and name are given: rank 0 continues the point's run, other ranks record runs naming it as
    their job, and warmup, timeline, collector and device_model are the sweep's.
    """

    def __init__(self, db, name: Optional[str] = None, model=None, offloader=None,
                 device_model: Optional[str] = None, *, warmup: int = 1, batch: int = 0,
                 seq: int = 0, dtype: Optional[str] = None, backend: str = "auto",
                 collector: str = "auto", timeline: bool = True, steps: int = 0,
                 memory_history: bool = False,
                 begin_first_step: bool = True, _auto: bool = False,
                 _other_hooks: Optional[str] = None):
        if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
            raise InputError(f"warmup must be a whole number of steps, 0 or more; got {warmup!r}")
        self._auto = _auto  # the sweep child's own recording (offtune/_child.py)
        overrides = _child.spec_overrides()
        if db is None and "db" not in overrides:
            raise InputError("record: db is required (the store to record into)")
        self._db = str(overrides.pop("db", db))
        self._offloader = False if offloader is False or offloader == () else offloader
        self._model = model
        self._other_hooks = _other_hooks  # the callback's: TRL's own offloading is on
        described = _describe(model)
        self._spec = {
            "name": name or described.get("model", "").split(" ")[0] or "recorded",
            "label": name or "",
            "model": described.get("model", ""),
            "batch": int(batch),
            "seq": int(seq),
            "dtype": dtype or described.get("dtype", ""),
            "lora_rank": described.get("lora_rank", 0),
            "checkpoint": described.get("checkpoint", "none"),
            "warmup": warmup,
            "steps": int(steps),
            "backend": backend,
            "device_model": device_model,
            "collector": collector,
            "timeline": bool(timeline),
            "memory_history": bool(memory_history),
            "begin_first_step": bool(begin_first_step),
        }
        self._spec["label"] = self._spec["name"]
        self._spec["rank"], self._spec["world_size"] = _child.ranks()
        self._spec.update(overrides)  # under a sweep: its run, warm-up, timeline, ...
        self.recording: Optional[Recording] = None

    def start(self) -> Recording:
        """Begins the run (what entering the `with` block does)."""
        if not self._auto and _child.record_target() is not None:
            _child.claim_explicit()  # the script's own recording marks the steps
        offloaders = _offloaders(self._offloader)
        configs = {tuple(sorted(map(str, o.options.items()))) for o in offloaders}
        if len(configs) > 1:
            warnings.warn(
                f"offtune.record: {len(offloaders)} offloaders with different options are live; "
                "the run records the first one's (pass offloader= to choose)",
                stacklevel=3,
            )
        engines = [o._engine for o in offloaders]
        spec = self._spec
        # A distributed job outside a sweep: rank 0 begins its run and leaves its id in the
        # process group's store (no collective: a rank that does not record never blocks one that
        # does); another rank waits for it (at most _child.JOB_WAIT_S) and, recording into the
        # same store, names that run as its job and adds no point of its own to the recorded
        # sweep (the job's point is rank 0's run). A rank with a store of its own (a rank in the
        # file name) records a run that stands alone.
        linked = "continue_run" not in spec and "job_run" not in spec and _child.distributed()
        if linked and spec["rank"] != 0:
            job = _child.await_job(spec["name"])
            if job is not None and job[1] == os.path.abspath(self._db):
                spec = dict(spec, job_run=job[0], name="")
        # A run that observes no offtune engine is a baseline, unless another tool's saved-tensor
        # hooks do the offloading (TRL's activation_offloading=True): found now, the run's label
        # says so and it is no point of the recorded sweep; found at a later forward, the same
        # from then on (Recording._look_for_other_hooks).
        other = None if engines else (self._other_hooks or other_saved_tensor_hooks())
        if other:
            spec = dict(spec, other_hooks=other)
        native = _offtune.Recording(self._db, spec, engines)
        if linked and spec["rank"] == 0:
            _child.publish_job(spec["name"], native.id, os.path.abspath(self._db))
        self.recording = Recording(native, offloaders)
        if other:
            self.recording._found_other_hooks(other, stacklevel=3)
        elif not engines:
            self.recording._watch_for_other_hooks(self._model)
        return self.recording

    def __enter__(self) -> Recording:
        return self.start()

    def __exit__(self, exc_type, exc, tb):
        if self.recording is None:
            return False
        if exc is None:
            self.recording.finish()
        else:
            self.recording.fail(exc)
        return False


def export_memory_snapshot(db, path, run: Optional[int] = None) -> int:
    """Writes a run recorded with `memory_history=True` (or `offtune run --memory-history`) as the
    memory snapshot PyTorch's memory visualiser opens (the pickle torch.cuda.memory._snapshot()
    writes): `python -m torch.cuda._memory_viz trace_plot PATH`, or pytorch.org/memory_viz. `run`
    is the run's id in store `db` (default: its latest run); returns it. The blocks the engine
    offloaded and the reload buffers it filled are named (docs/export.md, "Memory snapshot").
    InputError (a ValueError) for a run without a history, an unknown run, or a path that is not
    to be written (an existing file that is not an export, a directory)."""
    return int(_offtune.export_memory_snapshot(str(db), str(path), run))
