"""The script's side of `offtune sweep --script` (docs/python.md, "Recording under a sweep").

For each grid point the sweep begins the point's run in its store, then starts the user's command
with two variables in its environment:

  OFFTUNE_POINT   the point's engine options as a JSON object, by Offloader's option names; the
                  baseline is {"offload": false} (offloading off: no hooks at all).
  OFFTUNE_RECORD  where to record: {"db": PATH, "run": RUN_ID, "warmup": W, "timeline": BOOL,
                  "collector": "auto"|"cupti"|"nvtx-only", "device_model": NAME (optional)}.

Under OFFTUNE_RECORD this process records into that run, with no change to the script beyond
offtune's drop-in: rank 0 (or a process outside torchrun) continues run RUN_ID; another rank begins
a run of its own in the same store, with the same config, labelled "LABEL rank R", naming RUN_ID
as its job. offtune.record and OfftuneCallback record into it instead of the store and name they
were given. Where neither is used, each entry of an offloader's scope or of the drop-in's context
(the baseline's no-op context too) ends the open step and begins the next, and the run finishes
when the process exits (the step still open then is the loop's tail and is not counted).

The engine's scopes (offtune/engine.py) and the recorder (offtune/record.py) both call this module,
and the recorder is built on the engine's Offloader, so this module imports neither: offtune.record,
which the first entry begins the automatic recording with, is handed in by the package
(use_recorder, in offtune/__init__.py). The package's modules import one way only: _native, then
_child, engine, predict, record and trl, callback (each imports only modules before it).
"""

import atexit
import json
import os
import sys
import weakref
from typing import Any, Callable, Dict, Optional, Tuple

from ._native import _offtune

POINT_VARIABLE = "OFFTUNE_POINT"
RECORD_VARIABLE = "OFFTUNE_RECORD"
TRACE_VARIABLE = "OFFTUNE_TRACE"


def _json_object(variable: str) -> Optional[Dict[str, Any]]:
    text = os.environ.get(variable, "").strip()
    if not text:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise _offtune.InputError(
            f"{variable} is not JSON ({e.msg} at {e.pos}): {text!r}") from None
    if not isinstance(value, dict):
        raise _offtune.InputError(f"{variable} must hold a JSON object, got {text!r}")
    return value


def point() -> Optional[Dict[str, Any]]:
    """The sweep point's options ($OFFTUNE_POINT), or None outside a sweep."""
    return _json_object(POINT_VARIABLE)


def is_baseline(options: Optional[Dict[str, Any]]) -> bool:
    """Whether a point's options are the baseline: {"offload": false}. (A text "offload" is the
    engine's offload set, "all" or "boundaries".)"""
    return options is not None and options.get("offload") is False


def record_target() -> Optional[Dict[str, Any]]:
    """Where to record ($OFFTUNE_RECORD), or None: not under a sweep."""
    target = _json_object(RECORD_VARIABLE)
    if target is None:
        return None
    for key in ("db", "run"):
        if key not in target:
            raise _offtune.InputError(f"{RECORD_VARIABLE} has no {key!r}: {json.dumps(target)}")
    db, run = target["db"], target["run"]
    if not isinstance(db, str) or not db.strip():
        # Not str(None): a null "db" would record into a file named "None".
        raise _offtune.InputError(
            f"{RECORD_VARIABLE}'s 'db' must be the store's path as text, got {json.dumps(db)}")
    if isinstance(run, bool) or not isinstance(run, int) or run <= 0:
        raise _offtune.InputError(
            f"{RECORD_VARIABLE}'s 'run' must be a run id (a whole number above 0), got "
            f"{json.dumps(run)}")
    return target


def ranks() -> Tuple[int, int]:
    """This process's (rank, world size): torch.distributed's when it is initialised, else
    torchrun's RANK and WORLD_SIZE, else (0, 1)."""
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except ImportError:  # a torch built without distributed
        pass
    rank = int(os.environ.get("RANK", "0") or 0)
    world = int(os.environ.get("WORLD_SIZE", "1") or 1)
    return rank, max(world, rank + 1)


def distributed() -> bool:
    """torch.distributed is initialised with more than one rank (torchrun after
    init_process_group)."""
    try:
        import torch.distributed as dist

        return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1
    except ImportError:
        return False


# How long a rank other than 0 waits for rank 0's run before it records a run of its own: rank 0
# may not record at all (a script that records on rank 0 only does not record on the others either,
# but a script may record on every rank but 0), and then no rank may hang.
JOB_WAIT_S = 30.0
# A job's identity, which every rank computes alike without talking: the recording's name and how
# many recordings of that name this rank began before it. A recording only one rank makes under
# another name (rank 0's evaluation, say) shifts nothing; counting every recording did, and linked
# each later run of the other ranks to the wrong one.
_begun_by_name: Dict[str, int] = {}


def _job_key(name: str) -> str:
    n = _begun_by_name.get(name, 0)
    _begun_by_name[name] = n + 1
    return "offtune/record/job/" + json.dumps([name, n])


def _rendezvous_store():
    """The process group's key-value store (the TCPStore torchrun's ranks share). A private
    function of torch.distributed, the one way to reach it from a process group already
    initialised; checked against the pinned torch (2.15) and the GPU machines' (2.11)."""
    from torch.distributed import distributed_c10d

    return distributed_c10d._get_default_store()


def publish_job(name: str, run: int, db: str) -> None:
    """Rank 0: its recording's run id and store, for the other ranks' recordings of the same
    name and order. Never waits."""
    _rendezvous_store().set(_job_key(name), json.dumps([run, db]))


def await_job(name: str) -> Optional[Tuple[int, str]]:
    """Another rank: rank 0's run id and store for this recording (same name, same order), or
    None when rank 0 has not recorded it within JOB_WAIT_S (a warning says so; the rank's run
    then stands alone)."""
    from datetime import timedelta

    key = _job_key(name)
    store = _rendezvous_store()
    try:
        store.wait([key], timedelta(seconds=JOB_WAIT_S))
    except Exception:  # the store's timeout error type differs between torch versions
        import warnings

        warnings.warn(
            f"offtune.record: rank 0 recorded no run named {name!r} within {JOB_WAIT_S:.0f} s; "
            "this rank's run is not linked into a job",
            stacklevel=3,
        )
        return None
    run, db = json.loads(store.get(key))
    return int(run), str(db)


def spec_overrides() -> Dict[str, Any]:
    """What a recording takes from $OFFTUNE_RECORD over what the script gave it: the store, the
    run to continue (rank 0) or to name as the job (other ranks), the warm-up, timeline, collector
    and device model, and no recorded sweep (the run is the sweep's point already)."""
    target = record_target()
    if target is None:
        return {}
    rank, world = ranks()
    out: Dict[str, Any] = {
        "db": str(target["db"]),
        "name": "",
        "rank": rank,
        "world_size": world,
        "warmup": int(target.get("warmup", 1)),
        "timeline": bool(target.get("timeline", True)),
        "collector": str(target.get("collector", "auto")),
        "device_model": target.get("device_model") or None,
    }
    if rank == 0:
        out["continue_run"] = int(target["run"])
    else:
        out["job_run"] = int(target["run"])
    return out


def install_host_sim_if_asked() -> None:
    """Under a sweep whose backend is host-sim (asked, or no GPU), or under `offtune predict
    --script`: host-sim's allocator goes in before the script builds its model, so that its memory
    is counted as the device's. A script run outside a sweep decides that itself
    (offtune.host_sim.install()).

    Called by `import offtune`, which must not fail on a malformed variable: then nothing is
    installed here, and the first scope, drop-in or recording that reads the variable raises the
    offtune.InputError naming it.
    """
    try:
        if record_target() is None and trace_target() is None:
            return
        options = point() or {}
    except _offtune.InputError:
        return
    backend = options.get("backend", "auto")
    if backend == "auto":
        import torch

        backend = "cuda" if torch.cuda.is_available() else "host-sim"
    if backend == "host-sim":
        _offtune.host_sim.install()


# ------------------------------------------------------------------------------------------------
# The automatic recording: made on the first scope or drop-in entry under OFFTUNE_RECORD.

_recorder: Optional[Callable[..., Any]] = None  # offtune.record, from use_recorder
_auto = None  # the Recording the entries mark steps of
_model = None  # a weak reference to the model the drop-in was given: what the run describes
_explicit = False  # offtune.record or the callback records the run: entries mark nothing
_failure: Optional[BaseException] = None  # what ended the script, seen by sys.excepthook


def use_recorder(recorder: Callable[..., Any]) -> None:
    """The recorder the automatic recording is begun with: offtune.record (offtune/__init__.py
    hands it in when the package is imported, before any scope can be entered)."""
    global _recorder
    _recorder = recorder


def claim_explicit() -> None:
    """offtune.record / the callback records the run from now on. Raises when entries already
    began recording it (a run is continued once)."""
    global _explicit
    if _auto is not None:
        raise RuntimeError(
            "offtune: under `offtune sweep --script` the drop-in's forwards already record this "
            "point's run; begin offtune.record or OfftuneCallback before the first forward"
        )
    _explicit = True


def set_model(model) -> None:
    """The drop-in's model: the automatic recording describes it (class, dtype, LoRA rank)."""
    global _model
    try:
        _model = weakref.ref(model)
    except TypeError:
        _model = None


def trace_target() -> Optional[Dict[str, Any]]:
    """Where `offtune predict --script` wants the recorded steps ($OFFTUNE_TRACE: {"path",
    "warmup", "steps"}), or None."""
    target = _json_object(TRACE_VARIABLE)
    if target is not None and (not isinstance(target.get("path"), str) or not target["path"]):
        raise _offtune.InputError(
            f"{TRACE_VARIABLE} needs 'path', the trace file's path as text: {json.dumps(target)}")
    return target


# ------------------------------------------------------------------------------------------------
# Steps recorded for the predictor (`offtune predict --script`): entries mark them as they mark a
# sweep's; after the warm-up ones, `steps` steps go into a TraceSession on the first offloader
# with an engine, and the trace is written once they are done (or at exit, the open step dropped).

_trace = None  # {"session", "offloader", "entries", "target", "done"}


def _on_trace_entry(offloader, target) -> None:
    global _trace
    if _trace is None:
        if offloader is None or offloader._engine is None:
            return
        _trace = {"offloader": offloader, "session": None, "entries": 0, "target": target,
                  "done": False}
        atexit.register(_save_trace)
        _offtune._use_device_model(str(target.get("device_model") or ""))
    t = _trace
    if t["done"] or offloader is not t["offloader"]:
        return
    warmup, steps = int(target.get("warmup", 1)), int(target.get("steps", 1))
    entry = t["entries"]
    t["entries"] += 1
    if entry < warmup:
        return
    if t["session"] is None:
        t["session"] = _offtune.TraceSession(offloader._engine)
    else:
        t["session"].end_step()
    if t["session"].steps() >= steps:
        _save_trace()
        return
    t["session"].begin_step()


def _save_trace() -> None:
    t = _trace
    if t is None or t["done"] or t["session"] is None or t["session"].steps() == 0:
        return
    t["done"] = True
    t["session"].save(str(t["target"]["path"]))
    t["session"] = None  # the observer goes with it


# ------------------------------------------------------------------------------------------------
# What ran is what is filed: under a sweep (or `offtune predict --script`) every offloader whose
# scope is entered must run the point's options, or the run would be filed under settings that did
# not run (a script that builds its own Offloader(...), or offloads in the baseline).

_ran_as_point: "weakref.WeakSet[Any]" = weakref.WeakSet()  # offloaders already checked
_point_failed = False  # the point's run was failed for a mismatch (at most once)


def _mismatch(offloader) -> Optional[str]:
    """What differs between the point's options and what `offloader` runs, or None."""
    options = point()
    if options is None:
        return None
    engine = None if offloader is None else offloader._engine
    if is_baseline(options):
        if engine is None:
            return None
        return ("this point is the baseline (no offloading), but the script's offloader offloads "
                f"(backend {engine.backend()}, semantics {engine.semantics()})")
    if engine is None:
        return "this point offloads, but the script's offloader was made with offload=False"
    want = _offtune.parse_offload_options(options)
    got = engine.knobs()
    differ = [key for key in options
              if key in want and key in got and want[key] != got[key]
              and not (key == "backend" and want[key] == "auto")]
    if not differ:
        return None
    ran = ", ".join(f"{key}={got[key]}" for key in differ)
    asked = ", ".join(f"{key}={want[key]}" for key in differ)
    return f"the script's offloader runs {ran} where this point is {asked}"


def check_runs_point(offloader) -> None:
    """Raises offtune.InputError when `offloader` does not run this sweep point's options."""
    if offloader is not None and offloader in _ran_as_point:
        return
    why = _mismatch(offloader)
    if why is not None:
        raise _offtune.InputError(
            f"offtune: {why}; the run would be filed under settings that did not run. Make the "
            "offloader with offtune.Offloader.from_env() or the drop-in "
            "(get_act_offloading_ctx_manager), which take the point's options")
    if offloader is not None:
        _ran_as_point.add(offloader)


def _fail_point(error: BaseException) -> None:
    """The point's run, failed with `error` before any step was recorded."""
    global _point_failed
    if _point_failed or _explicit or _auto is not None or _recorder is None:
        return
    _point_failed = True
    model = _model() if _model is not None else None
    _recorder(None, model=model, offloader=False, _auto=True).start().fail(error)


def on_forward(offloader) -> None:
    """A scope or drop-in context was entered: under OFFTUNE_RECORD, a step boundary; under
    OFFTUNE_TRACE, one of the predictor's. Under either, the offloader must run the point's
    options (check_runs_point)."""
    global _auto
    target = trace_target()
    recording = os.environ.get(RECORD_VARIABLE, "").strip() != ""
    if target is not None or recording:
        try:
            check_runs_point(offloader)
        except _offtune.InputError as e:
            if recording:
                _fail_point(e)
            raise
    if target is not None:
        _on_trace_entry(offloader, target)
        return
    if _explicit or not recording:
        return
    if _auto is None:
        # The baseline's offloader has no engine: the run observes none (offloading off).
        engines = [] if offloader is None or offloader._engine is None else [offloader]
        model = _model() if _model is not None else None
        _auto = _recorder(None, model=model, offloader=engines or False, _auto=True).start()
        _install_exit_hooks()
        return
    if offloader is not None and offloader._engine is not None:
        if offloader not in _auto._offloaders:
            _auto.attach(offloader)
    _auto.step()


def _excepthook(kind, value, tb):
    global _failure
    _failure = value
    _previous_excepthook(kind, value, tb)


_previous_excepthook = sys.excepthook


def _install_exit_hooks() -> None:
    sys.excepthook = _excepthook
    atexit.register(_finish)


def _finish() -> None:
    global _auto
    rec, _auto = _auto, None
    if rec is None or rec.summary is not None:
        return
    if _failure is not None:
        rec.fail(_failure)
    else:
        rec.finish()
