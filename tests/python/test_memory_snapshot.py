"""offtune's memory snapshots (`offtune run --memory-history`, `offtune export --format
memory-snapshot`) read by PyTorch's own memory visualiser, torch.cuda._memory_viz of the pinned
torch: both plots render, its text views read the segments and the trace, the curve it draws peaks
at the run's peak allocated, and the engine's offloads and reloads are named on their blocks."""

import base64
import json
import pickle
import re
import subprocess
import sys

import pytest
from test_record import BACKEND, HOST_SIM, cli_binary, offloader, tiny_llama, train

import offtune

RUN = ["--model", "tiny", "--batch", "2", "--seq", "32", "--steps", "2", "--device-model",
       "h100-sxm", "--threads", "1", "--min-offload-size", "16KiB"]


def cli(*args, cwd=None):
    return subprocess.run([cli_binary(), *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd)


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory):
    d = tmp_path_factory.mktemp("snapshot")
    run = cli("run", "--db", str(d / "m.db"), *RUN, "--memory-history", "--json")
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout)["summary"]
    # No -o: named after the run, in the directory.
    out = cli("export", "--db", str(d / "m.db"), "--format", "memory-snapshot", "-q", cwd=d)
    assert out.returncode == 0, out.stderr
    path = d / "offtune-run1.pickle"
    with open(path, "rb") as f:
        data = pickle.load(f)
    return path, data, summary


def memory_viz(*args):
    r = subprocess.run([sys.executable, "-m", "torch.cuda._memory_viz", *map(str, args)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    return r.stdout


def test_the_curve_peaks_at_the_runs_peak_allocated(snapshot):
    _, data, summary = snapshot
    (trace,) = data["device_traces"]
    # What the visualiser draws: the blocks allocated where the history ends, walked back through
    # the trace to where it began (a block freed in the trace but never allocated there was live
    # before it), then forward, alloc by alloc and free by free.
    live = {b["address"]: b["requested_size"] for s in data["segments"] for b in s["blocks"]
            if b["state"] == "active_allocated"}
    for e in reversed(trace):
        if e["action"] == "alloc":
            live.pop(e["addr"], None)
        elif e["action"] == "free_requested":
            live[e["addr"]] = e["size"]
    current = peak = sum(live.values())
    for e in trace:
        if e["action"] == "alloc":
            current += e["size"]
        elif e["action"] == "free_requested":
            current -= e["size"]
        peak = max(peak, current)
    assert peak == summary["peak_allocated"]
    # The segments are the modelled allocator's: what it holds where the history ends, at most
    # the run's peak reserved.
    assert 0 < sum(s["total_size"] for s in data["segments"]) <= summary["peak_reserved"]


def test_offloads_and_reloads_are_named_on_their_blocks(snapshot):
    _, data, _ = snapshot
    (trace,) = data["device_traces"]
    names = [f["name"] for e in trace for f in e["frames"]]
    offloaded = [n for n in names if n.startswith("offloaded by offtune: tensor ")]
    reloaded = [n for n in names if n.startswith("reloaded by offtune: tensor ")]
    assert offloaded and reloaded
    assert all(re.search(r"\(step [01]\)$", n) for n in offloaded + reloaded)
    # And when: torch's "annotate" entries, on a block allocated before them.
    annotations = [e for e in trace if e["action"] == "annotate"]
    assert annotations
    allocated = set()
    for e in trace:
        if e["action"] == "alloc":
            allocated.add(e["addr"])
        elif e["action"] == "annotate":
            assert e["addr"] in allocated, e
            assert "by offtune" in e["user_metadata"]


def test_torchs_memory_viz_renders_both_plots_and_reads_the_snapshot(snapshot, tmp_path):
    path, data, _ = snapshot
    for plot in ("trace_plot", "segment_plot"):
        html = tmp_path / f"{plot}.html"
        memory_viz(plot, path, "-o", html)
        # The page embeds the snapshot for MemoryViz.js: it unpickles to what was exported.
        payload = json.loads(re.search(r"const local_files = (\[.*?\])\n", html.read_text())[1])
        embedded = base64.b64decode(payload[0]["base64"]).rstrip(b"\0")
        assert pickle.loads(embedded) == data
    stats = memory_viz("stats", path)
    assert f"segments: {len(data['segments'])}" in stats
    assert "Segment size mismatch" not in stats
    text = memory_viz("trace", path)
    assert f"{len(data['device_traces'][0])} entries" in text


def test_a_run_without_history_says_how_to_record_one(tmp_path):
    db = str(tmp_path / "m.db")
    assert cli("run", "--db", db, *RUN, "-q").returncode == 0
    out = cli("export", "--db", db, "--format", "memory-snapshot", "-o",
                  str(tmp_path / "s.pickle"))
    assert out.returncode == 2, out.stderr
    assert "no memory history" in out.stderr and "--memory-history" in out.stderr
    assert not (tmp_path / "s.pickle").exists()
    # On cuda the history is torch's own: refused before anything runs.
    cuda = cli("run", "--db", str(tmp_path / "c.db"), "--backend", "cuda", "--memory-history")
    assert cuda.returncode == 2
    assert "torch.cuda.memory._record_memory_history" in cuda.stderr
    assert not (tmp_path / "c.db").exists()


def test_from_python_a_recorded_loop_keeps_its_history_and_exports_it(tmp_path):
    """offtune.record(..., memory_history=True) on a Hugging Face model, then
    offtune.export_memory_snapshot: the snapshot of the loop's measured steps, with the engine's
    offloads and reloads named, peaking at the run's peak allocated."""
    if not HOST_SIM:
        pytest.skip("the memory history is host-sim's (on cuda, torch's own)")
    db = tmp_path / "runs.db"
    model = tiny_llama()
    off = offloader()
    with offtune.record(db, name="tiny-llama", model=model, offloader=off, warmup=1,
                        backend=BACKEND, memory_history=True) as rec:
        train(rec, model, off, steps=3)
    with offtune.record(db, name="tiny-llama", model=model, offloader=(), warmup=1,
                        backend=BACKEND) as base:
        train(base, model, steps=2)
    path = tmp_path / "snap.pickle"
    assert offtune.export_memory_snapshot(db, path, run=rec.id) == rec.id
    with open(path, "rb") as f:
        data = pickle.load(f)
    names = {f["name"].split(":")[0] for e in data["device_traces"][0] for f in e["frames"]}
    assert {"offloaded by offtune", "reloaded by offtune"} <= names, names
    memory_viz("stats", path)
    # The baseline was recorded without one: refused, saying how to record one, nothing written.
    with pytest.raises(offtune.InputError, match="memory_history=True"):
        offtune.export_memory_snapshot(db, tmp_path / "base.pickle", run=base.id)
    assert not (tmp_path / "base.pickle").exists()
    # The default run is the latest: the baseline's.
    with pytest.raises(offtune.InputError, match="no memory history"):
        offtune.export_memory_snapshot(db, tmp_path / "latest.pickle")
    # On cuda the history is torch's own: refused as a value, before the run begins.
    runs = len(offtune._offtune.read_runs(str(db)))
    with pytest.raises(offtune.InputError, match="_record_memory_history"):
        offtune.record(db, offloader=(), backend="cuda", memory_history=True).start()
    assert len(offtune._offtune.read_runs(str(db))) == runs
