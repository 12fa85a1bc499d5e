#!/usr/bin/env bash
# Crashes and concurrency through the built `offtune` (issue 11, "nothing lost, nothing hangs"):
#  1. a sweep killed with SIGKILL (or SIGTERM) at random moments, several times, then resumed: every
#     point is measured exactly once, no run is left `running`, and the killed runs are reported
#     as interrupted;
#  2. two identical sweeps started at once on one store: both exit 0, and every point is measured
#     once between them (they claim points instead of racing on them).
# The moments are random; the seed is printed so that a failure reproduces (OFFTUNE_CRASH_SEED).
# Usage: cli_crash_resume.sh /path/to/offtune
source "$(dirname "$0")/cli_test_lib.sh"
OFFTUNE="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
cli_test_dir 'kill -9 $(jobs -p) 2>/dev/null'
SEED="${OFFTUNE_CRASH_SEED:-$RANDOM}"
RANDOM=$SEED
echo "seed $SEED (OFFTUNE_CRASH_SEED=$SEED reproduces the kill moments)"
# 1 baseline + 4 x 2 = 9 points of a tiny model: each point well under a second. One run per
# point: no re-measured finalists (test_sweep's Sweep.Refine* covers those).
S=(sweep --model tiny --batch 2 --seq 64 --steps 3 --warmup 0 --link none
   --min-offload-size 1KiB,4KiB,64KiB,1MiB --max-fwd-stash-size 1,2 --refine-steps 0 --quiet)
q() { sqlite3 "$1" "$2"; }

# --- 1. kills at random moments, then resume --------------------------------------------------
# How long a whole sweep takes here (a sanitizer build is several times slower): the kills land at
# random moments within it, start-up (loading libtorch) included.
start=$(date +%s%N)
"$OFFTUNE" "${S[@]}" --db timing.db || fail "a sweep to time"
full_ms=$((($(date +%s%N) - start) / 1000000))
echo "a whole sweep takes ${full_ms} ms here"
# First a kill that surely lands inside a run: once the store shows one running, and checked after
# the kill (a killed run stays 'running' in the store until the next process opens it). A point takes
# a few tens of milliseconds here, so the run seen may finish before the kill lands: then again.
killed=0
inside=0
for _ in $(seq 20); do
  "$OFFTUNE" "${S[@]}" --db k.db 2>>err.txt &
  pid=$!
  for _ in $(seq 600); do
    [ "$(q k.db "SELECT count(*) FROM runs WHERE status = 'running'" 2>/dev/null)" = 1 ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.02
  done
  kill -KILL "$pid" 2>/dev/null && killed=$((killed + 1))
  wait "$pid" 2>/dev/null
  if [ "$(q k.db "SELECT count(*) FROM runs WHERE status = 'running'" 2>/dev/null)" = 1 ]; then
    inside=1
    break
  fi
done
[ "$inside" = 1 ] || fail "no kill landed inside a run in 20 tries"
for attempt in 1 2 3 4; do
  "$OFFTUNE" "${S[@]}" --db k.db 2>>err.txt &
  pid=$!
  # 15% .. 75% of a whole sweep; later attempts have fewer points left, so some may finish first.
  ms=$((full_ms * (15 + RANDOM % 61) / 100))
  sleep "$((ms / 1000)).$(printf '%03d' $((ms % 1000)))"
  signal=KILL
  [ "$attempt" -eq 3 ] && signal=TERM
  if kill -s "$signal" "$pid" 2>/dev/null; then killed=$((killed + 1)); fi
  wait "$pid" 2>/dev/null
done
"$OFFTUNE" "${S[@]}" --db k.db --json >final.json || fail "resume after kills: $(tail -3 err.txt)"
python3 -c '
import json, sys
d = json.load(open("final.json"))
assert d["interrupted"] is False, d
pts = d["points"]
assert [p["index"] for p in pts] == list(range(9)), [p["index"] for p in pts]
assert all(p["status"] == "ok" for p in pts), [p["status"] for p in pts]
' || fail "the resumed sweep is not complete"
ok
# Each point exactly once, each pointing at a run of its own that finished ok.
[ "$(q k.db 'SELECT count(*) FROM points')" = 9 ] || fail "points: $(q k.db 'SELECT count(*) FROM points')"
[ "$(q k.db "SELECT count(DISTINCT run) FROM points p JOIN runs r ON r.id = p.run WHERE r.status = 'ok'")" = 9 ] \
  || fail "points without their own ok run"
ok
# Nothing left running: the runs the kills cut short are interrupted, and report says so.
running=$(q k.db "SELECT count(*) FROM runs WHERE status = 'running'")
[ "$running" = 0 ] || fail "$running run(s) still 'running' after the store was reopened"
interrupted=$(q k.db "SELECT count(*) FROM runs WHERE status = 'interrupted'")
total=$(q k.db 'SELECT count(*) FROM runs')
[ "$total" -eq $((9 + interrupted)) ] || fail "runs: $total, want 9 ok + $interrupted interrupted"
[ "$interrupted" -ge 1 ] && [ "$interrupted" -le "$killed" ] \
  || fail "$interrupted interrupted runs from $killed kills (the first kill was inside a run)"
"$OFFTUNE" report --db k.db >report.txt || fail "report"
[ "$(grep -c ' interrupted ' report.txt)" -eq "$interrupted" ] || fail "report: $(cat report.txt)"
[ ! -e k.db-wal ] && [ ! -e k.db-shm ] || fail "side files left beside the store after the last close"
ok
echo "killed $killed time(s); $interrupted run(s) were cut short and are marked interrupted"

# --- 2. two identical sweeps at once -------------------------------------------------------------
"$OFFTUNE" "${S[@]}" --db c.db --json >a.json 2>a.err &
a=$!
"$OFFTUNE" "${S[@]}" --db c.db --json >b.json 2>b.err &
b=$!
wait "$a"; ra=$?
wait "$b"; rb=$?
[ "$ra" -eq 0 ] && [ "$rb" -eq 0 ] || fail "concurrent sweeps exited $ra and $rb: $(cat a.err b.err)"
ok
python3 -c '
import json
a, b = json.load(open("a.json")), json.load(open("b.json"))
assert a["sweep"] == b["sweep"], (a["sweep"], b["sweep"])
# Every point measured once between the two, and each saw all nine finished.
assert a["ran"] + b["ran"] == 9, (a["ran"], b["ran"])
for d in (a, b):
    assert [p["status"] for p in d["points"]] == ["ok"] * 9, d["points"]
' || fail "concurrent sweeps measured a point twice or lost one"
[ "$(q c.db 'SELECT count(*) FROM runs')" = 9 ] || fail "runs in c.db: $(q c.db 'SELECT count(*) FROM runs')"
ok
passed_summary
