#!/usr/bin/env bash
# `offtune sweep --script` end to end with the real child: the Python package's tiny training
# script (tests/python/scripts/train_tiny.py) on host-sim, every point a fresh Python process that
# records into the sweep's store; then resume, recommend and report read it. Skipped (exit 77)
# where that script, or a Python with torch and the built offtune package, is missing.
# Usage: cli_script_sweep.sh /path/to/offtune [/path/to/python-with-torch]
source "$(dirname "$0")/cli_test_lib.sh"
OFFTUNE="$1"
PY="${2:-python3}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SCRIPT="$ROOT/tests/python/scripts/train_tiny.py"
# The package as the build lays it out (python/CMakeLists.txt): beside the offtune binary's tree.
BUILD="$(cd "$(dirname "$OFFTUNE")/.." && pwd)"
[ -f "$SCRIPT" ] || { echo "skip: $SCRIPT is not there"; exit 77; }
export PYTHONPATH="$BUILD/python:${PYTHONPATH:-}"
"$PY" -c 'import torch, offtune' 2>/dev/null ||
  { echo "skip: $PY cannot import torch and offtune (PYTHONPATH=$PYTHONPATH)"; exit 77; }
cli_test_dir

# Activations dominate the peak at this shape (not the weights and AdamW's state), so that the
# offloading points' peaks are lower than the baseline's.
CMD="$PY $SCRIPT --steps 6 --seq 256 --batch 4"
GRID=(--backend host-sim --warmup 1 --min-offload-size 1KiB,1MiB --max-fwd-stash-size 1,2)

# The baseline and four points, each in its own process, all ok.
"$OFFTUNE" sweep --script "$CMD" "${GRID[@]}" --db s.db --json --timeout-per-point 300 \
  >sweep.json 2>sweep.err || fail "sweep: $(tail -5 sweep.err)"
py 'import json; d=json.load(open("sweep.json")); assert d["ran"]==5 and d["ok"]==5, d; ps=d["points"]; assert not ps[0]["config"]["offload"], ps[0]; assert all(p["summary"]["step_ms_median"] > 0 for p in ps), ps; assert any(p["summary"]["offloaded_bytes"] > 0 for p in ps[1:]), ps; base=ps[0]["summary"]["peak_allocated"]; assert min(p["summary"]["peak_allocated"] for p in ps[1:]) < base, [p["summary"]["peak_allocated"] for p in ps]' "sweep json"
ok

# offtune predict --script: the same script run once, its steps recorded by the Python package and
# replayed for the same grid. What does not depend on timing is the measured sweep's exactly: each
# point's offloaded bytes, and the baseline's peak; every offloading point's peak is at most the
# baseline's. (Before, predict took built-in models only.)
"$OFFTUNE" predict --script "$CMD" "${GRID[@]}" --json --timeout-per-point 300 \
  >predict.json 2>predict.err || fail "predict --script: $(tail -5 predict.err)"
py 'import json; p=json.load(open("predict.json")); s=json.load(open("sweep.json")); assert p["source"].startswith("your script, this CPU"), p["source"]; pp, sp = p["points"], s["points"]; assert len(pp)==5, pp; assert [a["offloaded_bytes"] for a in pp]==[b["summary"]["offloaded_bytes"] for b in sp], (pp, sp); assert pp[0]["peak_allocated"]==sp[0]["summary"]["peak_allocated"], (pp[0], sp[0]); assert all(a["peak_allocated"] <= pp[0]["peak_allocated"] and a["bound_ms"] <= a["step_ms"] * (1 + 1e-9) for a in pp), pp' "predict --script json"
ok
# A script that records no step: one error line naming how it ended, exit 1.
"$OFFTUNE" predict --script "echo no steps; exit 3" --backend host-sim --min-offload-size 1KiB \
  --max-fwd-stash-size 1 >nostep.out 2>nostep.err && fail "predict of a script with no step: exit 0"
grep -q "the script recorded no step for the predictor: it exited 3 (its last line: no steps)" \
  nostep.err || fail "no-step error: $(cat nostep.err)"
ok

# Under a device model without --backend (host-sim's), each point is told the sweep's link (pcie4)
# and its copies take the link's time: offloading points time apart from the baseline, as a
# built-in model's do. Before, every point timed alike (its copies took no time).
"$OFFTUNE" sweep --script "$PY $SCRIPT --steps 3 --seq 256 --batch 4" --device-model h100-sxm \
  --warmup 1 --min-offload-size 1KiB --max-fwd-stash-size 1,2 --db m.db --json \
  --timeout-per-point 300 >m.json 2>m.err || fail "device-model sweep: $(tail -5 m.err)"
py 'import json; d=json.load(open("m.json")); ps=d["points"]; assert d["ok"]==3, d; base=ps[0]["summary"]["step_ms_median"]; assert all(p["config"]["link"]=="pcie4" for p in ps[1:]), ps; assert all(p["summary"]["step_ms_median"] > base for p in ps[1:]), [p["summary"]["step_ms_median"] for p in ps]; assert all(p["summary"]["device_outside"] > 0 for p in ps), ps' "device-model json"
ok
# The same script predicted under the same device model: a device model's clock is the measured
# sweep's, so every point's step time and peak are the measured ones.
"$OFFTUNE" predict --script "$PY $SCRIPT --steps 3 --seq 256 --batch 4" --device-model h100-sxm \
  --warmup 1 --min-offload-size 1KiB --max-fwd-stash-size 1,2 --json --timeout-per-point 300 \
  >mp.json 2>mp.err || fail "predict --script --device-model: $(tail -5 mp.err)"
py 'import json; p=json.load(open("mp.json"))["points"]; m=json.load(open("m.json"))["points"]; assert len(p)==3, p; assert all(abs(a["step_ms"]-b["summary"]["step_ms_median"]) <= 0.01*b["summary"]["step_ms_median"] and a["peak_allocated"]==b["summary"]["peak_allocated"] for a,b in zip(p,m)), [(a["step_ms"], a["peak_allocated"], b["summary"]["step_ms_median"], b["summary"]["peak_allocated"]) for a,b in zip(p,m)]' "predict --script under a device model"
ok
# sweep --script --predict-first under a device model: the script runs once more to be recorded,
# then only the points that matter run, each beside its prediction (the same, to 1%). Before, a
# script sweep refused --predict-first.
"$OFFTUNE" sweep --script "$PY $SCRIPT --steps 3 --seq 256 --batch 4" --device-model h100-sxm \
  --warmup 1 --min-offload-size 1KiB,1MiB,16MiB --max-fwd-stash-size 1,2 --predict-first \
  --db pf.db --json --timeout-per-point 300 >pf.json 2>pf.err || fail "predict-first: $(tail -5 pf.err)"
py 'import json; d=json.load(open("pf.json")); f=d["predict_first"]; assert f["source"].startswith("your script, host-sim modelling"), f; assert len(f["predicted"])==7, f; m=f["measured"]; assert m[0]==0 and len(m) < 7, m; ps=d["points"]; assert len(ps)==len(m) and all(p["status"]=="ok" for p in ps), ps; assert all(abs(p["predicted"]["step_ms"]-p["summary"]["step_ms_median"]) <= 0.01*p["summary"]["step_ms_median"] for p in ps), [(p["predicted"], p["summary"]["step_ms_median"]) for p in ps]' "script predict-first json"
ok

# The same command again resumes it: nothing runs.
"$OFFTUNE" sweep --script "$CMD" "${GRID[@]}" --db s.db --json >again.json 2>again.err ||
  fail "resume: $(tail -5 again.err)"
py 'import json; d=json.load(open("again.json")); assert d["ran"]==0 and d["skipped"]==5, d' "resume"
ok

# A changed script is a new sweep, and the CLI says so.
cp "$SCRIPT" train_copy.py
CMD2="$PY $T/train_copy.py --steps 6"
ONE=(--backend host-sim --warmup 1 --min-offload-size 1KiB --max-fwd-stash-size 1)
"$OFFTUNE" sweep --script "$CMD2" "${ONE[@]}" --db c.db --quiet || fail "copy sweep"
echo "# changed" >>train_copy.py
"$OFFTUNE" sweep --script "$CMD2" "${ONE[@]}" --db c.db --json >changed.json 2>changed.err || fail "changed sweep: $(tail -5 changed.err)"
grep -q "script changed since sweep 1: starting a new sweep" changed.err ||
  fail "no changed note: $(cat changed.err)"
py 'import json; d=json.load(open("changed.json")); assert d["sweep"]==2 and d["ran"]==2, d' "changed json"
ok

# A script that never records fails each point with one clear line; the sweep goes on, and exits
# 1 since every point failed.
"$OFFTUNE" sweep --script "echo 1" --backend host-sim --min-offload-size 1KiB \
  --max-fwd-stash-size 1 --db n.db --json >none.json 2>none.err
rc=$?
[ "$rc" -eq 1 ] || fail "no-record sweep: exit $rc: $(cat none.err)"
grep -q "^error: the baseline failed" none.err || fail "no-record sweep's error: $(cat none.err)"
grep -q "names no script file" none.err || fail "no file note: $(cat none.err)"
py 'import json; d=json.load(open("none.json")); assert d["failed"]==2, d; assert all(p["error"].startswith("the script recorded no step") for p in d["points"]), d' "no-record json"
ok

# A distributed job under torchrun: each point is a 2-rank DDP job (gloo, host-sim), each rank
# records its run, and the point is the job's (its slowest rank's step time, its highest peak).
TRUN="$PY -m torch.distributed.run --standalone --nproc-per-node 2"
"$OFFTUNE" sweep --script "$TRUN $SCRIPT --steps 5 --seq 128 --batch 2" --backend host-sim \
  --warmup 1 --min-offload-size 1KiB --max-fwd-stash-size 1 --db t.db --json \
  --timeout-per-point 300 >t.json 2>t.err || fail "torchrun sweep: $(tail -5 t.err)"
py 'import json, sqlite3
d = json.load(open("t.json")); assert d["ran"] == 2 and d["ok"] == 2, d
db = sqlite3.connect("t.db")
points = db.execute("SELECT run, step_ms_median, peak_allocated FROM points").fetchall()
assert len(points) == 2, points
for run, step_ms, peak in points:
    ranks = db.execute("SELECT rank, world_size, status, step_ms_median, peak_allocated FROM runs "
                       "WHERE id = ? OR job_run = ? ORDER BY rank", (run, run)).fetchall()
    assert [r[:3] for r in ranks] == [(0, 2, "ok"), (1, 2, "ok")], ranks
    assert step_ms == max(r[3] for r in ranks), (step_ms, ranks)
    assert peak == max(r[4] for r in ranks), (peak, ranks)' "torchrun json"
"$OFFTUNE" report --db t.db --ranks >ranks.txt || fail "report --ranks"
grep -q "rank 1" ranks.txt || fail "report --ranks shows no rank 1: $(cat ranks.txt)"
ok

# The store reads as any sweep's.
"$OFFTUNE" recommend --db s.db >rec.txt || fail "recommend: $(cat rec.txt)"
"$OFFTUNE" report --db s.db >report.txt || fail "report"
ok
passed_summary
