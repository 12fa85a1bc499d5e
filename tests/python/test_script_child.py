"""The script's side of `offtune sweep --script`: tests/python/scripts/train_tiny.py run the way the
sweep runs it (its point's run begun in the store first, OFFTUNE_POINT and OFFTUNE_RECORD in the
environment of a fresh process), alone and as a 2-rank DDP job under torchrun (gloo, host-sim).
"""

import json
import os
import pathlib
import sqlite3
import subprocess
import sys

import pytest
import torch
from conftest import BACKEND

import offtune
from offtune import _offtune

SCRIPT = pathlib.Path(__file__).resolve().parent / "scripts" / "train_tiny.py"
# A point as the sweep writes one (sizes in bytes, modes as text).
POINT = {"min_offload_size": 0, "max_fwd_stash_size": 2, "prefetch": 1, "semantics": "offtune",
         "tier": "host", "use_streams": True, "use_pin_memory": True}
BASELINE = {"offload": False}
TIMEOUT_S = 300

pytestmark = pytest.mark.skipif(BACKEND != "host-sim", reason="the script's tests run on host-sim")


def child_env(db=None, run=None, point=None, warmup=1):
    """The environment the sweep gives the script: ours, the package on its path, the point."""
    env = dict(os.environ)
    env.pop("OFFTUNE_POINT", None)
    env.pop("OFFTUNE_RECORD", None)
    package_dir = str(pathlib.Path(offtune.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_dir, env.get("PYTHONPATH")]))
    env["CUDA_VISIBLE_DEVICES"] = ""  # host-sim, as the tests
    if point is not None:
        env["OFFTUNE_POINT"] = json.dumps(point)
    if db is not None:
        env["OFFTUNE_RECORD"] = json.dumps({"db": str(db), "run": run, "warmup": warmup,
                                            "timeline": True, "collector": "auto"})
    return env


def run_script(args, env, cwd, torchrun=False):
    if torchrun:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--nproc-per-node", "2", str(SCRIPT), *args]
    else:
        cmd = [sys.executable, str(SCRIPT), *args]
    return subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_S)


def runs(db):
    return {r["id"]: r for r in _offtune.read_runs(str(db))}


def test_the_point_run_is_continued_and_finishes_ok_with_its_steps(tmp_path):
    db = tmp_path / "sweep.db"
    run = _offtune.begin_run(str(db), "s point 1 (sweep 1)")
    done = run_script(["--steps", "6"], child_env(db, run, POINT), tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    got = runs(db)
    assert list(got) == [run], "the point's run is continued, no other begun"
    r = got[run]
    assert r["status"] == "ok", r["error"]
    # 6 forwards: 5 steps ended, the first warm-up; warm-up until stable may drop up to 3 more.
    assert 1 <= r["steps"] <= 4
    assert r["label"] == "s point 1 (sweep 1)"
    assert r["model"] == "LlamaForCausalLM"
    assert r["backend"] == "host-sim"
    assert r["offloaded_bytes"] > 0 and r["reloaded_bytes"] > 0
    assert (r["rank"], r["world_size"], r["job_run"]) == (0, 1, None)


def test_the_points_options_win_over_the_scripts_arguments(tmp_path, monkeypatch):
    # In this process: the drop-in's offloader has the point's options, not the arguments given.
    monkeypatch.setenv("OFFTUNE_POINT", json.dumps({"min_offload_size": 12345,
                                                    "max_fwd_stash_size": 3,
                                                    "semantics": "offtune"}))
    model = torch.nn.Sequential(torch.nn.Linear(8, 8))
    ctx = offtune.get_act_offloading_ctx_manager(model, min_offload_size=1024,
                                                 max_fwd_stash_size=5, warn_if_no_head=False)
    assert ctx.offloader.options["min_offload_size"] == 12345
    assert ctx.offloader.options["max_fwd_stash_size"] == 3
    assert ctx.offloader.semantics == "offtune"
    # Under a sweep: the script asks for 1 KiB, the point for more than any activation: nothing
    # is offloaded.
    db = tmp_path / "sweep.db"
    run = _offtune.begin_run(str(db), "s point 2 (sweep 1)")
    point = dict(POINT, min_offload_size=1 << 30)
    done = run_script(["--steps", "4", "--min-offload-size", "1024"], child_env(db, run, point),
                      tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    r = runs(db)[run]
    assert r["status"] == "ok", r["error"]
    assert r["offloaded_bytes"] == 0


def test_the_baseline_installs_no_hooks_and_offloads_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("OFFTUNE_POINT", json.dumps(BASELINE))
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 8))
    model.lm_head = model[1]
    ctx = offtune.get_act_offloading_ctx_manager(model)
    off = offtune.Offloader.from_env()
    assert not off.enabled and not ctx.offloader.enabled
    assert not model.lm_head._forward_pre_hooks and not model.lm_head._forward_hooks
    top = torch._C._autograd._top_saved_tensors_default_hooks
    for context in (ctx, off.scope()):
        with context:
            assert top(False) is None, "no saved-tensor hooks at the baseline"
            model(torch.randn(2, 8, requires_grad=True)).sum().backward()
    assert off.stats() == {}
    # Under a sweep: the baseline's run is ok, its steps marked by the no-op context, and nothing
    # was offloaded.
    db = tmp_path / "sweep.db"
    run = _offtune.begin_run(str(db), "s point 0 (sweep 1)", offload=False)
    done = run_script(["--steps", "5"], child_env(db, run, BASELINE), tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    r = runs(db)[run]
    assert r["status"] == "ok", r["error"]
    assert r["steps"] >= 1
    assert r["offloaded_bytes"] == 0 and r["reloaded_bytes"] == 0
    assert r["offload"] is False


def test_a_script_that_measures_no_step_leaves_the_run_failed_with_the_reason(tmp_path):
    db = tmp_path / "sweep.db"
    # One forward: its step is begun and never ended (the loop's tail), and warm-up is 1.
    run = _offtune.begin_run(str(db), "s point 1 (sweep 1)")
    done = run_script(["--steps", "1"], child_env(db, run, POINT), tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    r = runs(db)[run]
    assert r["status"] == "failed"
    assert r["error"].startswith("no step was measured: 0 step(s) ended, and the first 1 are "
                                 "warm-up"), r["error"]
    # No forward at all: the script never recorded, the run is left to the sweep (still running).
    quiet = _offtune.begin_run(str(db), "s point 2 (sweep 1)")
    done = run_script(["--steps", "0"], child_env(db, quiet, POINT), tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert runs(db)[quiet]["status"] == "running"


def test_a_script_that_raises_records_its_error(tmp_path):
    db = tmp_path / "sweep.db"
    run = _offtune.begin_run(str(db), "s point 1 (sweep 1)")
    done = run_script(["--steps", "6", "--fail-at", "4"], child_env(db, run, POINT), tmp_path)
    assert done.returncode == 1
    r = runs(db)[run]
    assert r["status"] == "failed"
    assert r["error"] == "RuntimeError: train_tiny: failing at step 4 as asked"
    assert r["steps"] >= 1, "what was measured before is kept"


OWN_OFFLOADER = """
import sys, torch, offtune
off = offtune.Offloader(min_offload_size=int(sys.argv[1]))  # the script's own, not from_env()
model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64))
for step in range(3):
    with off.scope():
        loss = model(torch.randn(16, 64)).pow(2).mean()
    loss.backward()
"""


@pytest.mark.parametrize("point, own, message", [
    (POINT, 4096, "the script's offloader runs min_offload_size=4096, max_fwd_stash_size=5 "
                  "where this point is min_offload_size=0, max_fwd_stash_size=2"),
    (BASELINE, 0, "this point is the baseline (no offloading), but the script's offloader "
                  "offloads"),
])
def test_a_script_whose_offloader_is_not_the_points_fails_the_point_saying_so(
        tmp_path, point, own, message):
    # Before: the run was filed under the point's settings whatever ran (the baseline could
    # offload).
    db = tmp_path / "sweep.db"
    run = _offtune.begin_run(str(db), "s point 1 (sweep 1)", offload=point is not BASELINE)
    done = subprocess.run([sys.executable, "-c", OWN_OFFLOADER, str(own)],
                          env=child_env(db, run, point), cwd=tmp_path, capture_output=True,
                          text=True, timeout=TIMEOUT_S)
    assert done.returncode == 1
    assert "offtune.InputError" in done.stderr and message in done.stderr, done.stderr[-2000:]
    r = runs(db)[run]
    assert r["status"] == "failed"
    assert r["error"].startswith("InputError: offtune: " + message), r["error"]
    assert r["steps"] == 0 and r["offloaded_bytes"] == 0


def test_a_script_whose_offloader_runs_the_point_by_other_words_is_not_refused(tmp_path):
    # The same settings written otherwise ("4KiB" for 4096) are the point's.
    db = tmp_path / "sweep.db"
    run = _offtune.begin_run(str(db), "s point 1 (sweep 1)")
    point = dict(POINT, min_offload_size="4KiB")
    point.pop("max_fwd_stash_size")  # left at the default by both
    for key in ("prefetch", "semantics", "tier", "use_streams", "use_pin_memory"):
        point.pop(key)
    done = subprocess.run([sys.executable, "-c", OWN_OFFLOADER, "4096"],
                          env=child_env(db, run, point), cwd=tmp_path, capture_output=True,
                          text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-2000:]
    assert runs(db)[run]["status"] == "ok"


def load(path):
    return torch.load(path, weights_only=True)


def test_a_two_rank_ddp_job_records_a_run_per_rank_with_the_gradients_of_plain_training(
        tmp_path):
    plain, swept = tmp_path / "plain", tmp_path / "swept"
    plain.mkdir()
    swept.mkdir()
    steps = ["--steps", "4"]
    done = run_script([*steps, "--no-offload", "--out", str(plain)], child_env(), tmp_path,
                      torchrun=True)
    assert done.returncode == 0, done.stderr[-3000:]
    db = tmp_path / "sweep.db"
    run = _offtune.begin_run(str(db), "s point 1 (sweep 1)")
    done = run_script([*steps, "--out", str(swept)], child_env(db, run, POINT), tmp_path,
                      torchrun=True)
    assert done.returncode == 0, done.stderr[-3000:]

    for rank in (0, 1):
        ref, got = load(plain / f"rank{rank}.pt"), load(swept / f"rank{rank}.pt")
        for kind in ("grads", "weights"):
            assert ref[kind].keys() == got[kind].keys()
            for name, t in ref[kind].items():
                assert torch.equal(t.view(torch.uint8), got[kind][name].view(torch.uint8)), \
                    f"rank {rank} {kind} {name} differ"

    got = runs(db)
    assert len(got) == 2, got
    zero = got[run]
    other = next(r for i, r in got.items() if i != run)
    assert (zero["rank"], zero["world_size"], zero["job_run"]) == (0, 2, None)
    assert (other["rank"], other["world_size"], other["job_run"]) == (1, 2, run)
    assert other["label"] == "s point 1 (sweep 1) rank 1"
    for r in (zero, other):
        assert r["status"] == "ok", r["error"]
        assert r["offloaded_bytes"] > 0

    job = _offtune.job_summary(str(db), run)
    assert job["world_size"] == 2 and job["status"] == "ok"
    assert [x["rank"] for x in job["ranks"]] == [0, 1]
    assert job["step_ms_median"] == max(zero["step_ms_median"], other["step_ms_median"])
    assert job["peak_allocated"] == max(zero["peak_allocated"], other["peak_allocated"])
    assert job["peak_reserved"] == max(zero["peak_reserved"], other["peak_reserved"])


def test_record_outside_a_sweep_records_torchruns_rank_and_world_size(tmp_path, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    db = tmp_path / "runs-rank1.db"
    model = torch.nn.Linear(8, 8)
    with offtune.record(db, name="ranked", offloader=False, warmup=0) as rec:
        for _ in range(3):
            model(torch.randn(4, 8)).sum().backward()
            rec.step()
    r = runs(db)[rec.id]
    assert r["status"] == "ok", r["error"]
    assert (r["rank"], r["world_size"], r["job_run"]) == (1, 2, None)


# The DDP scripts end without destroy_process_group() (tests/python/scripts/train_tiny.py says why).
DDP_RECORD = """
import sys, torch, torch.distributed as dist, offtune
dist.init_process_group("gloo")
offtune.host_sim.install()
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(
    torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64)))
off = offtune.Offloader(backend="host-sim", min_offload_size=0)
with offtune.record(sys.argv[1], name="ddp", offloader=off, warmup=1) as rec:
    for step in range(4):
        with off.scope():
            loss = model(torch.randn(32, 64)).pow(2).mean()
        loss.backward()
        rec.step()
"""


def run_ddp(tmp_path, text, timeout=TIMEOUT_S):
    """Runs the 2-rank script `text` under torchrun, outside a sweep; returns the store it wrote."""
    script = tmp_path / "ddp.py"
    script.write_text(text)
    db = tmp_path / "runs.db"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           str(script), str(db)]
    done = subprocess.run(cmd, env=child_env(), cwd=tmp_path, capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, done.stderr[-2000:]
    return db


def test_ranks_recording_into_one_store_outside_a_sweep_are_one_job(tmp_path):
    db = run_ddp(tmp_path, DDP_RECORD)
    rs = sorted(runs(db).values(), key=lambda r: r["rank"])
    assert [(r["rank"], r["world_size"], r["status"]) for r in rs] == [(0, 2, "ok"), (1, 2, "ok")]
    assert rs[0]["job_run"] is None and rs[1]["job_run"] == rs[0]["id"]
    assert rs[1]["label"] == "ddp rank 1"
    job = _offtune.job_summary(str(db), rs[0]["id"])
    assert job["step_ms_median"] == max(r["step_ms_median"] for r in rs)
    # The recorded sweep has the job's one point (rank 0's run), not one per rank.
    with sqlite3.connect(db) as con:
        points = con.execute("SELECT run FROM points").fetchall()
    assert points == [(rs[0]["id"],)], points


# Two ranks over gloo on host-sim, a DDP Linear and an offloader: what the scripts below share.
DDP_LINEAR = """
import sys, torch, torch.distributed as dist, offtune
dist.init_process_group("gloo")
offtune.host_sim.install()
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(64, 64))
off = offtune.Offloader(backend="host-sim", min_offload_size=0)
"""

DDP_RECORD_AFTER_AN_EVAL_ON_RANK_0 = DDP_LINEAR + """
if dist.get_rank() == 0:  # a recording the other rank does not make
    probe = torch.nn.Linear(64, 64)
    with offtune.record(sys.argv[1], name="eval", offloader=off, warmup=0) as rec:
        with off.scope():
            probe(torch.randn(8, 64)).sum().backward()
        rec.step()
with offtune.record(sys.argv[1], name="ddp", offloader=off, warmup=1) as rec:
    for step in range(4):
        with off.scope():
            loss = model(torch.randn(32, 64)).pow(2).mean()
        loss.backward()
        rec.step()
"""


def test_ranks_are_linked_by_the_recordings_name_not_by_counting(tmp_path):
    # Before: rank 1's first recording waited for rank 0's first, the evaluation, and named it as
    # its job.
    db = run_ddp(tmp_path, DDP_RECORD_AFTER_AN_EVAL_ON_RANK_0)
    by_label = {r["label"]: r for r in runs(db).values()}
    assert sorted(by_label) == ["ddp", "ddp rank 1", "eval"], sorted(by_label)
    assert by_label["ddp rank 1"]["job_run"] == by_label["ddp"]["id"]
    assert by_label["eval"]["job_run"] is None and by_label["ddp"]["job_run"] is None
    assert all(r["status"] == "ok" for r in by_label.values())


DDP_RECORD_ON_RANK_0 = DDP_LINEAR + """
import contextlib
recording = (offtune.record(sys.argv[1], name="ddp", offloader=off, warmup=1)
             if dist.get_rank() == 0 else contextlib.nullcontext())
with recording as rec:
    for step in range(4):
        with off.scope():
            loss = model(torch.randn(32, 64)).pow(2).mean()
        loss.backward()
        if rec is not None:
            rec.step()
"""


def test_recording_on_rank_0_only_never_waits_for_the_other_ranks(tmp_path):
    # The common pattern of logging on rank 0 alone: rank 0 must not wait for ranks that do not
    # record (a collective here made rank 0 wait for the others until the group's timeout).
    db = run_ddp(tmp_path, DDP_RECORD_ON_RANK_0, timeout=120)
    rs = list(runs(db).values())
    assert [(r["rank"], r["world_size"], r["status"], r["job_run"]) for r in rs] == [
        (0, 2, "ok", None)]
