"""offtune's exports read by third-party tools from PyPI, as their users run them: nsys-tui on the
Nsight-Systems-shaped SQLite file (every subcommand), and Holistic Trace Analysis (HTA) on the
Chrome trace (temporal, idle-time, kernel and memcpy breakdowns). A tiny host-sim run timed as an
H100 would (--device-model: every step the same, so figures are exact) is recorded with the CLI
and exported; the readers must find its NVTX tree, kernels and copies, and HTA's figures must agree
with offtune's own hidden-copy % and copy bytes."""

import gzip
import json
import os
import pathlib
import sqlite3
import subprocess
import sys

import pytest
from test_record import cli_binary

ROOT = pathlib.Path(__file__).resolve().parents[2]
STEPS = 3


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    d = tmp_path_factory.mktemp("exports")
    db = str(d / "run.db")
    run = subprocess.run(
        [cli_binary(), "run", "--db", db, "--model", "tiny", "--batch", "2", "--seq", "32",
         "--steps", str(STEPS), "--device-model", "h100-sxm", "--threads", "1", "--json"],
        capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout)["summary"]
    for fmt, name in (("nsys-sqlite", "run.sqlite"), ("chrome", "trace/run.json")):
        (d / name).parent.mkdir(exist_ok=True)
        out = subprocess.run([cli_binary(), "export", "--db", db, "--format", fmt, "-o",
                              str(d / name), "-q"], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
    return d, summary


# ---- nsys-tui ------------------------------------------------------------------------------------

def nsys_tui(*args):
    # Through the module, so that the venv's interpreter runs it; stdout is a pipe, which is what
    # makes `tui` and `timeline` render once instead of opening curses.
    r = subprocess.run([sys.executable, "-m", "nsys_tui", *args], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    return r.stdout


WINDOW = ["--gpu", "0", "--trim", "0", "1"]  # host-sim runs start at 0 and last milliseconds


def test_nsys_tui_runs_every_subcommand_and_shows_the_nvtx_tree(recorded, tmp_path):
    pytest.importorskip("nsys_tui")
    d, _ = recorded
    db = str(d / "run.sqlite")
    info = nsys_tui("info", db)
    assert "host-sim modelling NVIDIA H100" in info and "PCI=host-sim" in info, info
    assert "Kernels: " in info and "Kernels: 0 " not in info, info
    assert "compute" in nsys_tui("summary", db)
    assert "Compute only" in nsys_tui("overlap", db, *WINDOW)
    assert "No NCCL collectives" in nsys_tui("nccl", db, *WINDOW)
    tree = nsys_tui("tree", db, *WINDOW)
    for line in ("offtune:step 0", "offtune:step 2", "  📦 offtune:forward",
                 "  📦 offtune:backward",
                 "⚡ compute [stream 0]"):
        assert line in tree, tree[:2000]
    assert "## offtune:step 1" in nsys_tui("markdown", db, *WINDOW)
    assert "offtune:wait" in nsys_tui("search", db, "-q", "offtune:wait", "--type", "nvtx")
    assert "compute" in nsys_tui("search", db, "-q", "compute")
    csv = nsys_tui("export-csv", db, *WINDOW)
    assert "offtune:step 0 > offtune:forward" in csv, csv[:1000]
    assert '"nvtx_path"' in nsys_tui("export-json", db, *WINDOW)
    assert "kernels" in nsys_tui("export", db, "--trim", "0", "1", "-o", str(tmp_path / "p"))
    html = tmp_path / "tree.html"
    nsys_tui("viewer", db, *WINDOW, "-o", str(html))
    assert "offtune:forward" in html.read_text()
    assert "offtune:backward" in nsys_tui("tui", db, *WINDOW)
    assert "Stream 0" in nsys_tui("timeline", db, *WINDOW)
    # `iters` looks for its fixed marker "sample_0", and `search --type hierarchy` refuses GPU 0
    # (a falsy --gpu): their functions take the marker and the GPU directly.
    assert "No iterations detected" in nsys_tui("iters", db, *WINDOW)
    from nsys_tui import profile
    from nsys_tui.overlap import detect_iterations
    from nsys_tui.search import search_hierarchy

    prof = profile.open(db)
    try:
        iters = detect_iterations(prof, 0, (0, 10**9), marker="offtune:step")
        assert len(iters) == STEPS and all(i["kernel_count"] > 0 for i in iters), iters
        found = search_hierarchy(prof, "offtune:backward", "compute", 0, (0, 10**9))
        assert found and all("offtune:backward" in r["nvtx_path"] for r in found)
    finally:
        prof.close()


def test_the_copies_nsys_tui_does_not_draw_are_launched_like_nsights(recorded):
    # nsys-tui reads kernels and NVTX only (no memcpy table), as on a real capture; the copies are
    # where Nsight's own reports find them: each memcpy row joined to its runtime call.
    d, summary = recorded
    con = sqlite3.connect(d / "run.sqlite")
    rows = con.execute(
        "SELECT s.value, o.label, SUM(m.bytes) FROM CUPTI_ACTIVITY_KIND_MEMCPY m "
        "JOIN CUPTI_ACTIVITY_KIND_RUNTIME r USING (correlationId) JOIN StringIds s ON r.nameId = "
        "s.id JOIN ENUM_CUDA_MEMCPY_OPER o ON m.copyKind = o.id GROUP BY o.label").fetchall()
    con.close()
    assert dict((label, (name, b)) for name, label, b in rows) == {
        "Device-to-Host": ("cudaMemcpyAsync", STEPS * summary["offloaded_bytes"]),
        "Host-to-Device": ("cudaMemcpyAsync", STEPS * summary["reloaded_bytes"]),
    }


NSYS_PARSER = """
import json, sys
from nsys_parser.parser import NsysParser
parser = NsysParser(sys.argv[1])
steps = []
for step in range(int(sys.argv[2])):
    (event,) = parser.get_nvtx_events(f"offtune:step {step}")
    steps.append([event.start, len(event.cuda_api_events), event.cuda_start_time,
                  event.cuda_end_time])
print(json.dumps({"validated": parser.validated, "device": parser.device_name, "steps": steps}))
"""


def test_nsys_parser_opens_the_export_and_finds_each_steps_device_work(recorded):
    """nsys-parser (PyPI) reads ProcessStreams as it opens a file and joins NVTX ranges to the
    CUDA runtime calls on their thread and to the kernels they launched. Before (issue 44) it
    stopped at once: "no such table: ProcessStreams". In a process of its own: importing it
    reconfigures logging process-wide (dictConfig disables every logger that exists)."""
    pytest.importorskip("nsys_parser")
    d, _ = recorded
    r = subprocess.run([sys.executable, "-c", NSYS_PARSER, str(d / "run.sqlite"), str(STEPS)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["validated"]  # no error output recorded for the run
    assert out["device"].startswith("host-sim modelling NVIDIA H100"), out["device"]
    assert len(out["steps"]) == STEPS
    for start, api_calls, cuda_start, cuda_end in out["steps"]:
        assert api_calls > 0
        assert start <= cuda_start < cuda_end


# ---- Holistic Trace Analysis ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def hta(recorded):
    pytest.importorskip("hta")
    d, summary = recorded
    # HTA rounds ns-resolution times to whole microseconds unless told not to (pytorch#122425);
    # offtune's copies last ~10 us, so rounding alone would move the hidden share by several points.
    # It reads the variable while parsing, in the constructor.
    from hta.trace_analysis import TraceAnalysis

    before = os.environ.get("HTA_DISABLE_NS_ROUNDING")
    os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
    try:
        # HTA leaves out the last ProfilerStep's kernels unless asked: all three steps are measured.
        analysis = TraceAnalysis(trace_dir=str(d / "trace"), include_last_profiler_step=True)
    finally:
        if before is None:
            del os.environ["HTA_DISABLE_NS_ROUNDING"]
        else:
            os.environ["HTA_DISABLE_NS_ROUNDING"] = before
    return analysis, summary


def test_hta_finds_the_steps_and_the_gpu_work(hta):
    analysis, _ = hta
    assert list(analysis.get_profiler_steps()) == list(range(STEPS))
    temporal = analysis.get_temporal_breakdown(visualize=False)
    assert temporal.loc[0, "compute_time(us)"] > 0 and temporal.loc[0, "non_compute_time(us)"] > 0
    idle, _stats = analysis.get_idle_time_breakdown(visualize=False,
                                                    show_idle_interval_stats=True)
    assert set(idle["stream"]) == {0, 1}  # compute and the side copy stream
    launches = analysis.get_cuda_kernel_launch_stats(visualize=False)[0]
    assert len(launches) > 0


def test_hta_agrees_with_offtunes_hidden_copy_share_and_copy_bytes(hta):
    analysis, summary = hta
    by_type, by_kernel = analysis.get_gpu_kernel_breakdown(visualize=False)
    time = dict(zip(by_type["kernel_type"], by_type["sum"], strict=True))
    hidden = time["COMPUTATION overlapping MEMORY"]
    exposed = time["MEMORY"]
    # offtune: hidden copy % = |copy ∩ compute| / |copy| (docs/metrics.md); HTA's breakdown sweeps
    # the merged intervals of each kernel type and splits memory time into the part under
    # computation and the part alone, the same quantities. Tolerance: HTA truncates every segment of
    # its sweep to whole microseconds (`.astype(int)` in _get_gpu_kernel_type_time), and this run's
    # copies last ~10 us with segments of a few us, so the share moves by up to about a point (0.7
    # here) and the exposed time by some percent; 1.5 points and 10 % allow for that, not for copies
    # or kernels that went missing or were misclassified (0 % or 100 %).
    assert 100 * hidden / (hidden + exposed) == pytest.approx(summary["hidden_copy_pct"], abs=1.5)
    assert exposed * 1000 / STEPS == pytest.approx(summary["exposed_copy_ns"], rel=0.1)
    names = set(by_kernel["name"])
    assert {"Memcpy DtoH (Device -> Pinned)", "Memcpy HtoD (Pinned -> Device)"} <= names
    # Bytes: HTA reads each memcpy's bytes, and kineto's "memory bandwidth (GB/s)" (bytes per ns)
    # as memory_bw_gbps; bandwidth times duration gives the bytes back to double rounding.
    df = analysis.t.get_trace(0)
    sym = analysis.t.symbol_table.get_sym_table()
    copies = df[df["name"].map(lambda i: str(sym[i]).startswith("Memcpy"))]
    expected = STEPS * (summary["offloaded_bytes"] + summary["reloaded_bytes"])
    assert copies["bytes"].sum() == expected
    moved = (copies["memory_bw_gbps"] * copies["dur"] * 1000).sum()
    assert moved == pytest.approx(expected, rel=1e-9)
    bw = analysis.get_memory_bw_summary()
    assert bw is not None and len(bw) == 2


def load_hta(trace_dir):
    from hta.trace_analysis import TraceAnalysis

    return TraceAnalysis(trace_dir=str(trace_dir), include_last_profiler_step=True)


def test_hta_loads_every_runs_trace_plain_and_gzipped(tmp_path):
    """Every run of a sweep, each in a trace of its own under its default name, and all of them in
    one gzipped file, load in HTA. Before (issue 44): correlation ids counted from 1, so that HTA
    typed its correlation column int8 (int16 for a larger file) and pandas 3 refused the events'
    positions it then wrote there; two of this sweep's five runs failed so."""
    pytest.importorskip("hta")
    db = str(tmp_path / "s.db")
    sweep = subprocess.run(
        [cli_binary(), "sweep", "--db", db, "--model", "tiny", "--device-model", "h100-sxm",
         "--optimizer", "--steps", "3", "--threads", "1", "--min-offload-size", "16KiB,256KiB",
         "--max-fwd-stash-size", "1,4", "--quiet"], capture_output=True, text=True, timeout=600)
    assert sweep.returncode == 0, sweep.stderr
    runs = [r["id"] for r in json.loads(subprocess.run(
        [cli_binary(), "report", "--db", db, "--json"], capture_output=True, text=True,
        timeout=60, check=True).stdout)["runs"]]
    assert len(runs) == 5
    for run in runs:
        d = tmp_path / f"run{run}"
        d.mkdir()
        # No -o: the file is named after the run and the point it measured, in the directory.
        out = subprocess.run([cli_binary(), "export", "--db", db, "--format", "chrome", "--run",
                              str(run)], cwd=d, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        (name,) = [p.name for p in d.iterdir()]
        assert name.startswith(f"offtune-run{run}-sweep1-point") and name.endswith(".json"), name
        analysis = load_hta(d)
        assert list(analysis.get_profiler_steps()) == [0, 1, 2], run
    d = tmp_path / "all"
    d.mkdir()
    out = subprocess.run([cli_binary(), "export", "--db", db, "--format", "chrome", "-o",
                          str(d / "all.json.gz"), "-q"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    with gzip.open(d / "all.json.gz", "rt") as f:
        trace = json.load(f)
    assert len(trace["metadata"]["runs"]) == 5
    names = {e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "process_name"}
    assert all(n.endswith("[host-sim (modelled)]") for n in names), names
    load_hta(d)


# ---- points CSV in pandas ------------------------------------------------------------------------

def documented_dtypes():
    """The POINTS_CSV_DTYPES map of docs/export.md, as a reader copies it."""
    text = (ROOT / "docs" / "export.md").read_text()
    start = text.index("POINTS_CSV_DTYPES = {")
    scope = {}
    exec(text[start:text.index("}", start) + 1], scope)  # noqa: S102 (our own documentation)
    return scope["POINTS_CSV_DTYPES"]


def test_points_csv_reads_in_pandas_with_the_documented_dtypes(tmp_path):
    pandas = pytest.importorskip("pandas")
    db, out = str(tmp_path / "s.db"), str(tmp_path / "points.csv")
    sweep = subprocess.run(
        [cli_binary(), "sweep", "--db", db, "--model", "tiny", "--batch", "2", "--seq", "32",
         "--steps", "2", "--device-model", "h100-sxm", "--threads", "1", "--min-offload-size",
         "1KiB,1MiB", "--max-fwd-stash-size", "2", "--quiet"], capture_output=True, text=True,
        timeout=300)
    assert sweep.returncode == 0, sweep.stderr
    export = subprocess.run(
        [cli_binary(), "export", "--db", db, "--format", "csv", "-o", out, "-q"],
        capture_output=True, text=True, timeout=60)
    assert export.returncode == 0, export.stderr
    dtypes = documented_dtypes()
    points = pandas.read_csv(out, dtype=dtypes)
    # Every column is in the map, in the file's order; none is left to pandas' guess.
    assert list(points.columns) == list(dtypes)
    assert str(points["min_offload_size"].dtype) == "Int64"
    assert str(points["use_streams"].dtype) == "boolean"
    baseline = points[~points["offload"]].iloc[0]
    assert pandas.isna(baseline["min_offload_size"]) and pandas.isna(baseline["hidden_copy_pct"])
    assert baseline["offloaded_bytes"] == 0
    # Every point trains the same model on the same batches: its loss is the baseline's.
    assert (points["final_loss"] == baseline["final_loss"]).all()
    assert points["final_loss"].notna().all()
