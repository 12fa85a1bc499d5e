#!/usr/bin/env bash
# `offtune` end to end on the tiny built-in model (host-sim): the acceptance commands, resume, shards
# + merge, exports, bad input and bad stores with their exit codes, --fail-if, SIGINT then resume.
# Usage: cli_end_to_end.sh /path/to/offtune
source "$(dirname "$0")/cli_test_lib.sh"
OFFTUNE="$1"
cli_test_dir
W=(--model tiny --batch 2 --seq 32 --steps 1 --warmup 1)
G=(--min-offload-size 1KiB,1MiB --max-fwd-stash-size 1,4)

"$OFFTUNE" --version >v.txt || fail "--version"
grep -Eq '^offtune [0-9]+\.[0-9]+\.[0-9]+$' v.txt || fail "--version printed: $(cat v.txt)"
ok
"$OFFTUNE" sweep "${W[@]}" "${G[@]}" --db s.db --quiet || fail "sweep"
ok
# Every point of a sweep with --memory-history has its snapshot.
"$OFFTUNE" sweep "${W[@]}" "${G[@]}" --db mh.db --memory-history --quiet || fail "sweep --memory-history"
for run in 1 5; do
  "$OFFTUNE" export --db mh.db --format memory-snapshot --run $run -o "mh$run.pickle" ||
    fail "memory snapshot of sweep run $run"
  py "b = open('mh$run.pickle', 'rb').read(2); assert b == bytes([0x80, 2]), b" "snapshot $run"
done
ok
# The run's recorded version is the one --version prints (one source: project(VERSION)).
recorded=$(sqlite3 s.db 'SELECT DISTINCT env_offtune_version FROM runs')
[ "offtune $recorded" = "$(cat v.txt)" ] || fail "runs recorded version '$recorded', --version says $(cat v.txt)"
ok
"$OFFTUNE" sweep "${W[@]}" "${G[@]}" --db s.db --json >resume.json || fail "resume"
py 'import json; d=json.load(open("resume.json")); assert d["ran"]==0 and d["skipped"]==5, d' "resume ran points"
ok
"$OFFTUNE" recommend --db s.db --json >r.json || fail "recommend"
py 'import json; d=json.load(open("r.json")); assert "min_offload_size" in d and "max_fwd_stash_size" in d, d' "recommend json"
ok
"$OFFTUNE" export --db s.db --format chrome -o t.json --quiet || fail "export chrome"
py 'import json; d=json.load(open("t.json")); assert len(d["traceEvents"]) > 0' "chrome json"
ok
"$OFFTUNE" export --db s.db --format nsys-sqlite -o n.sqlite --quiet || fail "export nsys"
rows=$(sqlite3 n.sqlite 'SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY m JOIN ENUM_CUDA_MEMCPY_OPER e ON m.copyKind = e.id')
[ "${rows:-0}" -gt 0 ] || fail "nsys memcpy join gave $rows rows"
ok
"$OFFTUNE" export --db s.db --format csv -o p.csv --quiet || fail "export csv"
[ "$(wc -l <p.csv)" -eq 6 ] || fail "csv rows: $(wc -l <p.csv)"
ok

for i in 1 2; do
  "$OFFTUNE" sweep "${W[@]}" "${G[@]}" --shard "$i/2" --db "sh$i.db" --quiet || fail "shard $i"
done
"$OFFTUNE" merge --db m.db sh1.db sh2.db --quiet || fail "merge"
"$OFFTUNE" report --db m.db --json >m.json || fail "report"
py 'import json; d=json.load(open("m.json")); assert d["sweeps"][0]["points"]==5, d' "merged points"
ok

# The device model: the same sweep twice, into two stores, gives the same step times to the
# nanosecond and no re-measured finalists; the recommendation says there is no noise.
for i in 1 2; do
  "$OFFTUNE" sweep --model tiny --batch 2 --seq 32 --steps 2 --warmup 1 "${G[@]}" \
    --device-model h100 --db "dm$i.db" --json >"dm$i.json" ||
    fail "sweep --device-model ($i)"
done
py 'import json
a, b = (json.load(open(f"dm{i}.json")) for i in (1, 2))
ms = lambda d: [(p["index"], p["summary"]["step_ms_median"], p["summary"]["peak_allocated"]) for p in d["points"]]
assert ms(a) == ms(b), (ms(a), ms(b))
assert all(p["summary"]["step_ms_ci_low"] == p["summary"]["step_ms_ci_high"] for p in a["points"]), a
assert not a.get("refined"), a' "modelled sweeps differ"
"$OFFTUNE" recommend --db dm1.db --json >dmr.json || fail "recommend modelled"
py 'import json; d=json.load(open("dmr.json")); assert d["deterministic"] and not d["within_noise"], d' "modelled recommendation"
sqlite3 dm1.db 'SELECT DISTINCT env_device FROM runs' | grep -q 'modelling NVIDIA H100 SXM5 80GB' ||
  fail "runs do not record the modelled device"
ok

# Semantics as an axis: each pair once under TRL's rules and once under offtune's; each tool's
# snippet from its own points.
"$OFFTUNE" sweep "${W[@]}" "${G[@]}" --semantics trl,offtune --device-model h100 --db sem.db --quiet ||
  fail "sweep --semantics trl,offtune"
"$OFFTUNE" recommend --db sem.db --memory-budget 1GiB --json >sem.json || fail "recommend mixed"
py 'import json; d=json.load(open("sem.json")); pts={p["index"]: p for p in d["front"]}
sp=d["snippet_points"]; assert sp["trl"] is not None and sp["cpp"] is not None, d
assert "From point" in d["snippets"]["trl"] and "From point" in d["snippets"]["cpp"], d' "mixed snippets"
[ "$(sqlite3 sem.db 'SELECT count(*) FROM points')" -eq 9 ] || fail "mixed sweep points"
ok

expect_exit() {
  local code=$1; shift
  "$@" >out.txt 2>err.txt
  local rc=$?
  [ "$rc" -eq "$code" ] || fail "expected exit $code, got $rc: $* :: $(cat err.txt)"
  [ "$(grep -c . err.txt)" -ge 1 ] || fail "no error line for: $*"
  ok
}
expect_exit 2 "$OFFTUNE" sweep --db x.db --bogus
expect_exit 2 "$OFFTUNE" sweep "${W[@]}" --db x.db --min-offload-size 12XB
expect_exit 2 "$OFFTUNE" sweep "${W[@]}" --db x.db --max-fwd-stash-size 0
expect_exit 2 "$OFFTUNE" sweep "${W[@]}" --db x.db --min-offload-size 1KiB:1MiB:x1
expect_exit 2 "$OFFTUNE" run "${W[@]}" --db x.db --model nosuch
expect_exit 2 "$OFFTUNE" run "${W[@]}" --db x.db --device-model h800
expect_exit 2 "$OFFTUNE" run "${W[@]}" --db x.db --semantics trl,offtune
expect_exit 2 "$OFFTUNE" run "${W[@]}" --db x.db --device-model missing.json
expect_exit 2 "$OFFTUNE" recommend --db s.db --memory-budget 1GiB --max-slowdown 2

printf 'not a database, just text\n%.0s' {1..200} >bad.db
cp bad.db bad.orig
expect_exit 3 "$OFFTUNE" sweep "${W[@]}" "${G[@]}" --db bad.db
cmp -s bad.db bad.orig || fail "a non-SQLite file was modified"
[ ! -e bad.db-wal ] || fail "a refused store got a WAL file"
expect_exit 3 "$OFFTUNE" recommend --db missing.db
cp s.db newer.db
sqlite3 newer.db 'PRAGMA user_version=99;'
cp newer.db newer.orig
expect_exit 3 "$OFFTUNE" sweep "${W[@]}" "${G[@]}" --db newer.db
cmp -s newer.db newer.orig || fail "a newer-schema store was modified"
cp s.db corrupt.db
size=$(stat -c %s corrupt.db)
# The middle third of the file, header page intact: 2 KiB at the middle could land in a page's
# unused gap, which is no corruption at all (and the layout varies with the run's event count).
dd if=/dev/urandom of=corrupt.db bs=1 seek=$((size / 3)) count=$((size / 3)) conv=notrunc 2>/dev/null
cp corrupt.db corrupt.orig
expect_exit 3 "$OFFTUNE" report --db corrupt.db
cmp -s corrupt.db corrupt.orig || fail "a corrupt store was modified"

expect_exit 4 "$OFFTUNE" run "${W[@]}" --db f.db --fail-if 'peak>1B'

# SIGINT in the middle of a sweep, then the same command resumes: every point once.
# Points take ~1 s each, so the signal lands mid-sweep; the point in progress completes first.
I=(--model tiny --batch 4 --seq 128 --steps 40 --warmup 1 --min-offload-size 1KiB,4KiB,16KiB,64KiB
   --max-fwd-stash-size 1,2 --db int.db)
"$OFFTUNE" sweep "${I[@]}" --quiet &
pid=$!
for _ in $(seq 100); do  # wait until at least one point is recorded
  sleep 0.2
  n=$(sqlite3 int.db "SELECT count(*) FROM points WHERE status = 'ok'" 2>/dev/null || echo 0)
  [ "${n:-0}" -ge 1 ] && break
done
kill -INT "$pid" || fail "the sweep ended before it could be interrupted"
wait "$pid"
rc=$?
[ "$rc" -eq 130 ] || fail "SIGINT exit $rc (want 130)"
"$OFFTUNE" sweep "${I[@]}" --json >int.json || fail "resume after SIGINT"
py 'import json; d=json.load(open("int.json")); assert d["ran"] > 0 and d["skipped"] > 0 and d["ran"]+d["skipped"]==9 and len(d["points"])==9 and all(p["status"]=="ok" for p in d["points"]), d' "resume after SIGINT"
# Each point's first measurement once; when the machine is noisy the resumed sweep also re-measures
# its finalists and the baseline (refine_finalists: 3 interleaved rounds each, labelled "re-measured"),
# which are runs of their own (before: counted as duplicates, a failure under load).
runs=$(sqlite3 int.db "SELECT count(*) FROM runs WHERE label NOT LIKE '%re-measured%'")
[ "$runs" -eq 9 ] || fail "runs after SIGINT and resume: $runs (want 9: none lost or duplicated)"
rounds=$(sqlite3 int.db "SELECT count(*) FROM runs WHERE label LIKE '%re-measured%'")
refined=$("${PY:-python3}" -c 'import json; print(len(json.load(open("int.json")).get("refined", [])))')
[ "$rounds" -eq $((refined * 3)) ] ||
  fail "re-measured rounds after resume: $rounds (want 3 for each of $refined refined points)"
# A second SIGINT stops at once, and says so (before: silently). A run of many steps goes on after
# the first one, so that the second always finds it running.
"$OFFTUNE" run --model tiny --batch 1 --seq 16 --steps 100000 --warmup 0 --db int2.db --quiet \
  2>int2.err &
pid=$!
for _ in $(seq 100); do  # wait until the run is recorded
  sleep 0.2
  n=$(sqlite3 int2.db "SELECT count(*) FROM runs" 2>/dev/null || echo 0)
  [ "${n:-0}" -ge 1 ] && break
done
kill -INT "$pid" && sleep 0.3 && kill -INT "$pid" || fail "the run ended before a second SIGINT"
wait "$pid"
rc=$?
[ "$rc" -eq 130 ] || fail "second SIGINT exit $rc (want 130)"
grep -q "stopped at once (second Ctrl-C)" int2.err || fail "second SIGINT said: $(cat int2.err)"
ok

# A store on a full file system: one error line, exit 3, and the store stays consistent.
mkdir -p full
if mount -t tmpfs -o size=192k tmpfs full 2>/dev/null; then
  "$OFFTUNE" sweep "${W[@]}" --min-offload-size 1KiB:1MiB:x4 --max-fwd-stash-size 1:4 \
    --db full/s.db >out.txt 2>err.txt
  rc=$?
  [ "$rc" -eq 3 ] || { umount full; fail "full disk: exit $rc, want 3 :: $(cat err.txt)"; }
  grep -qi 'full' err.txt || { umount full; fail "full disk: no clear error: $(cat err.txt)"; }
  check=$(sqlite3 full/s.db 'PRAGMA integrity_check' 2>&1)
  umount full
  [ "$check" = ok ] || fail "store after a full disk: $check"
  ok
else
  echo "skip: cannot mount a tmpfs here (not root?); the store's own tests cover SQLITE_FULL"
fi
# A new store on a file system with no room at all: one error line, exit 3, and no file left
# behind (before: a 0-byte store stayed).
mkdir -p nospace
if mount -t tmpfs -o size=64k tmpfs nospace 2>/dev/null; then
  dd if=/dev/zero of=nospace/filler bs=4k 2>/dev/null
  "$OFFTUNE" sweep "${W[@]}" --min-offload-size 1KiB --max-fwd-stash-size 1 \
    --db nospace/new.db >out.txt 2>err.txt
  rc=$?
  left=$(ls -A nospace | tr '\n' ' ')
  umount nospace
  [ "$rc" -eq 3 ] || fail "no space: exit $rc, want 3 :: $(cat err.txt)"
  [ "$(wc -l <err.txt)" -eq 1 ] && grep -q '^error: ' err.txt || fail "no space: $(cat err.txt)"
  [ "$left" = "filler " ] || fail "no space: left behind: $left"
  ok
fi

passed_summary cli_end_to_end
