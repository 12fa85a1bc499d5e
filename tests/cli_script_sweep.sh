#!/usr/bin/env bash
# `offtune sweep --script` end to end with the real child: the Python package's tiny training
# script (tests/python/scripts/train_tiny.py) on host-sim, every point a fresh Python process that
# records into the sweep's store; then resume, recommend and report read it. Skipped (exit 77)
# where that script, or a Python with torch and the built offtune package, is missing.
# Usage: cli_script_sweep.sh /path/to/offtune [/path/to/python-with-torch]
set -u
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
T="$(mktemp -d)"
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
passed=0
fail() { echo "FAIL: $*" >&2; echo "$passed passed, 1 failed"; exit 1; }
ok() { passed=$((passed + 1)); }
py() { "$PY" -c "$1" || fail "$2"; }

CMD="$PY $SCRIPT --steps 6"
GRID=(--backend host-sim --warmup 1 --min-offload-size 1KiB,1MiB --max-fwd-stash-size 1,2)

# The baseline and four points, each in its own process, all ok.
"$OFFTUNE" sweep --script "$CMD" "${GRID[@]}" --db s.db --json --timeout-per-point 300 \
  >sweep.json 2>sweep.err || fail "sweep: $(tail -5 sweep.err)"
py 'import json; d=json.load(open("sweep.json")); assert d["ran"]==5 and d["ok"]==5, d; ps=d["points"]; assert not ps[0]["config"]["offload"], ps[0]; assert all(p["summary"]["step_ms_median"] > 0 for p in ps), ps; assert any(p["summary"]["offloaded_bytes"] > 0 for p in ps[1:]), ps' "sweep json"
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

# A script that never records fails each point with one clear line; the sweep goes on.
"$OFFTUNE" sweep --script "$PY -c 'print(1)'" --backend host-sim --min-offload-size 1KiB \
  --max-fwd-stash-size 1 --db n.db --json >none.json 2>none.err || fail "no-record sweep"
grep -q "names no script file" none.err || fail "no file note: $(cat none.err)"
py 'import json; d=json.load(open("none.json")); assert d["failed"]==2, d; assert all(p["error"].startswith("the script recorded no step") for p in d["points"]), d' "no-record json"
ok

# The store reads as any sweep's.
"$OFFTUNE" recommend --db s.db >rec.txt || fail "recommend: $(cat rec.txt)"
"$OFFTUNE" report --db s.db >report.txt || fail "report"
ok
echo "$passed passed"
