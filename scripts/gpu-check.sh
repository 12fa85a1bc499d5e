#!/usr/bin/env bash
# GPU check: on a machine with an NVIDIA GPU and a Python `torch` (any recent CUDA build), runs the
# cuda backend's tests, the CLI with CUPTI at realistic shapes (exports included), the Python package's
# tests on cuda, offtune beside TRL on one Hugging Face Llama, the pinned link's bandwidth, the hook
# cost, and the device model against the GPU; prints a summary and leaves every log in --out.
#
#   scripts/gpu-check.sh [--python PY] [--out DIR]                # builds here first (all cores)
#   scripts/gpu-check.sh --prebuilt .gpu [--python PY] [--out DIR]  # what scripts/gpu-bundle.sh built
#
# Each part runs under its own time limit and writes its log as it goes, so a part that hangs or
# fails costs only itself. --quick runs only the C++ tests; --parts a,b runs only the parts named
# (the names the summary prints: test_cuda, pytest_cuda, trl_identity, dm_gpu, ...).
# Building here needs cmake >= 3.25, a C++20 compiler, the CUDA toolkit headers of torch's CUDA major
# (CUDA_HOME, default /usr/local/cuda), GoogleTest, CLI11, nlohmann-json, fmt, xxHash (Debian:
# libgtest-dev libcli11-dev nlohmann-json3-dev libfmt-dev libxxhash-dev); --prebuilt needs none.
# Exit: 0 all passed, 1 failures, 2 setup.
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY="$(command -v python3 || true)"
OUT="${OUT:-$ROOT/build/gpu-check}"
PREBUILT=""
QUICK=0
PARTS=""
while (($#)); do
  case "$1" in
    --python) PY="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --prebuilt) PREBUILT="$(realpath "$2")"; shift 2 ;;
    --quick) QUICK=1; shift ;;
    --parts) PARTS=",$2,"; shift 2 ;;
    -h|--help) sed -n 2,16p "$0"; exit 0 ;;
    *) echo "error: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT"
die() { echo "gpu-check: error: $*" >&2; exit 2; }
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 || die "no NVIDIA GPU found (nvidia-smi -L failed)"
[[ -n "$PY" ]] || die "no python3; pass --python"
"$PY" -c 'import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)' \
  || die "$PY has no CUDA-capable torch (torch.cuda.is_available() is False)"
torch_info=$("$PY" -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))')
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)
echo "gpu-check: $(date -u +%FT%TZ) torch/cuda/device: $torch_info, driver $driver" | tee "$OUT/summary.txt"

if [[ -n "$PREBUILT" ]]; then
  [[ -x "$PREBUILT/bin/test_cuda" ]] || die "$PREBUILT/bin/test_cuda missing: run scripts/gpu-bundle.sh here first"
  BIN="$PREBUILT/bin"
  PYPKG="$PREBUILT/python"
  built_for=$(cat "$PREBUILT/BUILT_FOR" 2>/dev/null)
  have=$("$PY" -c 'import torch; print(torch.__version__.split("+")[0])')
  [[ "${built_for%% *}" == "$have" ]] || die "the bundle was built for torch ${built_for%% *}, this Python has $have"
  # The binaries find libtorch, CUDA's runtime and CUPTI where this Python's torch has them.
  tlib=$("$PY" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
  nv=$("$PY" -c 'import os, torch; print(os.path.join(os.path.dirname(os.path.dirname(torch.__file__)), "nvidia"))')
  extra=$(find "$nv" -maxdepth 3 -type d -name lib 2>/dev/null | tr '\n' ':')
  export LD_LIBRARY_PATH="$tlib:$extra${CUDA_HOME:-/usr/local/cuda}/lib64:${CUDA_HOME:-/usr/local/cuda}/extras/CUPTI/lib64:${LD_LIBRARY_PATH:-}"
  if compgen -G "$PREBUILT/whl/*.whl" >/dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/offtune-site "$PREBUILT"/whl/*.whl >"$OUT/wheels.log" 2>&1 \
      && export PYTHONPATH="/tmp/offtune-site:${PYTHONPATH:-}"
  fi
  export OFFTUNE_TEST_NVTX_INJECTION="$BIN/libofftune_nvtx_injection.so"
  echo "gpu-check: prebuilt for ${built_for}" | tee -a "$OUT/summary.txt"
else
  CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
  [[ -f "$CUDA_HOME/include/cuda_runtime_api.h" ]] || die "CUDA toolkit headers not found at $CUDA_HOME (set CUDA_HOME)"
  gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
  cmake -S "$ROOT" -B "$OUT/build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DOFFTUNE_PYTHON="$PY" \
    -DOFFTUNE_BUILD_GUI=OFF -DCUDAToolkit_ROOT="$CUDA_HOME" -DTORCH_CUDA_ARCH_LIST="8.0;9.0" \
    >"$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; die "configure failed (log: $OUT/configure.log)"; }
  cmake --build "$OUT/build" -j"$(nproc)" >"$OUT/build.log" 2>&1 \
    || { grep -m20 -E 'error' "$OUT/build.log"; die "build failed (log: $OUT/build.log)"; }
  (cd "$OUT/build" && ctest --output-on-failure -j4 --output-junit "$OUT/ctest.xml") >"$OUT/ctest.log" 2>&1
  echo "ctest rc=$?" >>"$OUT/summary.txt"
  BIN="$OUT/bin"
  mkdir -p "$BIN"
  for f in tests/test_cuda tests/test_engine tests/test_disk tests/test_instrumentation cli/offtune \
           samples/offtune-demo bench/offtune-bench; do
    ln -sf "$OUT/build/$f" "$BIN/"
  done
  PYPKG="$OUT/build/python"
fi

failed=()
# part NAME LIMIT_S CMD...: runs CMD into $OUT/NAME.log under a time limit; records rc and seconds.
part() {
  local name="$1" limit="$2"; shift 2
  [[ -z "$PARTS" || "$PARTS" == *",$name,"* ]] || return 0
  local t0=$SECONDS
  timeout --kill-after=10 "$limit" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  echo "part $name: rc=$rc in $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
  ((rc == 0)) || failed+=("$name")
  return 0
}

# 1. The cuda backend (identity across modes, the copy-delay race hunt, layer offloading,
#    checkpointing, verify, device memory) and the CUPTI/NVTX collectors on the GPU.
part test_cuda 180 "$BIN/test_cuda"
part test_engine_cuda 120 "$BIN/test_engine" --gtest_filter='*Cuda*'
part test_disk_cuda 60 "$BIN/test_disk" --gtest_filter='*Cuda*'
part test_instrumentation 60 "$BIN/test_instrumentation"
if ((QUICK == 0)); then
  # 3. offtune beside TRL on a Hugging Face Llama with the 1b preset's shapes, and the pinned link.
  PYTHONPATH="$PYPKG:${PYTHONPATH:-}" part trl_side_by_side 180 "$PY" "$ROOT/bench/trl_side_by_side.py" \
    --preset 1b --batch 1 --seq 4096 --steps 5 --warmup 2 --bandwidth --json "$OUT/trl_side_by_side.json"
  # Where TRL's and offtune's peaks differ at TRL's knobs: forward (the window) or backward.
  PYTHONPATH="$PYPKG:${PYTHONPATH:-}" part trl_peaks 120 "$PY" "$ROOT/bench/trl_side_by_side.py" \
    --preset 1b --batch 1 --seq 4096 --steps 3 --warmup 1 --only trl,offtune-trl-knobs \
    --json "$OUT/trl_peaks.json"
  # The same models bit for bit: eager attention and deterministic kernels, so that two baseline
  # runs agree exactly and any gradient difference is the offloading's.
  PYTHONPATH="$PYPKG:${PYTHONPATH:-}" part trl_identity 180 "$PY" "$ROOT/bench/trl_side_by_side.py" \
    --preset 1b --batch 1 --seq 1024 --steps 1 --warmup 0 --attn eager --deterministic \
    --only none-again,trl,offtune-trl-knobs,offtune-16MiB-w5 --json "$OUT/trl_identity.json"
  # 4. The CLI on cuda with CUPTI: the 1b preset at a realistic shape, bf16; its exports.
  cli="$BIN/offtune"
  rm -f "$OUT/cli-1b.db"
  part cli_sweep_1b 150 "$cli" sweep --model 1b --dtype bf16 --batch 1 --seq 4096 --steps 4 --warmup 1 \
    --backend cuda --collector cupti --min-offload-size 1MiB,16MiB --max-fwd-stash-size 2,5 \
    --refine-steps 0 --db "$OUT/cli-1b.db"
  part cli_report_1b 60 "$cli" report --db "$OUT/cli-1b.db"
  part cli_export_chrome 60 "$cli" export --db "$OUT/cli-1b.db" --run 2 --format chrome -o "$OUT/trace-1b.json"
  part cli_export_nsys 60 "$cli" export --db "$OUT/cli-1b.db" --run 2 --format nsys-sqlite -o "$OUT/trace-1b.sqlite"
  # The GPU's link measured through the engine's copy path (issue 41): pinned and pageable, each
  # way; its --link value is what host-sim and the predictor should be given for this machine.
  rm -f "$OUT/link.txt"
  part cli_calibrate 60 "$cli" calibrate --backend cuda --output "$OUT/link.txt"
  # CUPTI's copies against the engine's bytes, per run (what CUPTI saw is in events; the engine's
  # count is in steps.offloaded_bytes).
  "$PY" - "$OUT/cli-1b.db" >"$OUT/cupti-vs-engine.md" 2>&1 <<'PYEOF'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
print("| run | config | engine offloaded B / reloaded B | copy events by source: kind name count bytes pinned |")
print("|---|---|---|---|")
for run, label, mos, win in db.execute(
        "SELECT id, label, min_offload_size, max_fwd_stash_size FROM runs ORDER BY id"):
    off, rel = db.execute("SELECT COALESCE(SUM(offloaded_bytes),0), COALESCE(SUM(reloaded_bytes),0) "
                          "FROM steps WHERE run=?", (run,)).fetchone()
    rows = db.execute("SELECT kind, name, COUNT(*), SUM(bytes), SUM(pinned) FROM events WHERE run=? "
                      "AND kind IN ('copy_d2h','copy_h2d') GROUP BY kind, name", (run,)).fetchall()
    kinds = dict(db.execute("SELECT kind, COUNT(*) FROM events WHERE run=? GROUP BY kind",
                            (run,)).fetchall())
    print(f"| {run} | {label} {mos}/{win} | {off} / {rel} | {rows} {kinds} |")
PYEOF
  # The Python package on cuda (tests/python, TRL parity included where trl imports).
  if "$PY" -c 'import pytest, transformers, peft' 2>/dev/null; then
    OFFTUNE_PYTHON_PATH="$PYPKG" OFFTUNE_TEST_BACKEND=cuda \
      part pytest_cuda 180 "$PY" -m pytest -q -p no:cacheprovider "$ROOT/tests/python"
  fi
  # 5. Hook cost on the GPU (prints figures, asserts nothing), and on this CPU beside no-op Python hooks.
  part bench_hooks 120 "$BIN/offtune-bench" --backend cuda --section hooks --repetitions 21
  part demo 120 "$BIN/offtune-demo" --backend cuda --preset small --batch 8 --seq 512 --steps 5
  # 6. The device model against this GPU (docs/device-model.md): one sweep measured here, the same
  #    sweep on host-sim modelling this GPU, and the error per point.
  model=""
  case "$torch_info" in
    *H200*) model=h200 ;; *H100*) model=h100-sxm ;; *A100*) model=a100-80gb ;;
    *" L4"*) model=l4 ;; *4090*) model=rtx4090 ;;
  esac
  if [[ -n "$model" ]]; then
    grid=(--model small --dtype bf16 --batch 8 --seq 512 --steps 6 --warmup 2 --refine-steps 0
          --min-offload-size 64KiB,1MiB,16MiB --max-fwd-stash-size 1,2,5 --quiet)
    rm -f "$OUT/dm-gpu.db" "$OUT/dm-model.db"
    part dm_gpu 180 "$cli" sweep "${grid[@]}" --backend cuda --db "$OUT/dm-gpu.db"
    part dm_model 180 "$cli" sweep "${grid[@]}" --backend host-sim --device-model "$model" --link pcie5 \
      --db "$OUT/dm-model.db"
    "$PY" - "$OUT/dm-gpu.db" "$OUT/dm-model.db" "$model" >"$OUT/device-model-check.md" <<'PYEOF'
import sqlite3, sys
q = ("SELECT point_index, offload, min_offload_size, max_fwd_stash_size, step_ms_median, "
     "peak_allocated, peak_reserved, device_outside FROM points WHERE status = 'ok' "
     "ORDER BY point_index")
def load(path):
    try:
        return {row[0]: row[1:] for row in sqlite3.connect(path).execute(q)}
    except sqlite3.Error as e:
        sys.exit(f"cannot read {path}: {e}")
def err(model, gpu):
    return f"{(model - gpu) / gpu * 100:+.1f}%" if gpu else "n/a"
gpu, model = load(sys.argv[1]), load(sys.argv[2])
# Time, peak allocated (cuBLAS's workspaces included), peak reserved (the allocator model), and
# the memory outside the allocator (measured here: the CUDA context and libraries, with any other
# process on this GPU; modelled: the profile's context_bytes estimate, docs/memory.md).
print(f"| point | min_offload_size / window | GPU ms | {sys.argv[3]} model ms | error "
      "| GPU peak alloc B | model | error | GPU peak reserved B | model | error "
      "| GPU outside B | model | error |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for i in sorted(set(gpu) & set(model)):
    g, m = gpu[i], model[i]
    config = f"{g[1]} / {g[2]}" if g[0] else "baseline"
    print(f"| {i} | {config} | {g[3]:.2f} | {m[3]:.2f} | {err(m[3], g[3])} "
          f"| {g[4]} | {m[4]} | {err(m[4], g[4])} | {g[5]} | {m[5]} | {err(m[5], g[5])} "
          f"| {g[6]} | {m[6]} | {err(m[6], g[6])} |")
PYEOF
  fi
  part bench_hooks_host_sim 120 "$BIN/offtune-bench" --backend host-sim --section hooks \
    --repetitions 31 --python "$PY"
fi

{
  echo "=== offtune GPU check summary ==="
  cat "$OUT/summary.txt"
  grep -E '^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED  \]' "$OUT/test_cuda.log" | sed 's/^/test_cuda: /'
  for t in test_engine_cuda test_disk_cuda test_instrumentation; do
    grep -E '^\[  (PASSED|FAILED|SKIPPED) |^\[       OK \]' "$OUT/$t.log" 2>/dev/null | sed "s/^/$t: /"
  done
  [[ -f "$OUT/pytest_cuda.log" ]] && tail -3 "$OUT/pytest_cuda.log"
  for f in trl_side_by_side.log trl_peaks.log trl_identity.log cupti-vs-engine.md cli_report_1b.log demo.log device-model-check.md; do
    [[ -s "$OUT/$f" ]] && { echo "--- $f"; grep -v "^[a-z0-9-]*: {" "$OUT/$f" | tail -40; }
  done
  [[ -s "$OUT/bench_hooks.log" ]] && { echo "--- hook cost on cuda"; grep -E 'scope|baseline' "$OUT/bench_hooks.log"; }
} | tee "$OUT/report.txt"
((${#failed[@]} == 0)) && exit 0
echo "gpu-check: failed parts: ${failed[*]} (logs in $OUT)" >&2
exit 1
