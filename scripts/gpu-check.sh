#!/usr/bin/env bash
# GPU check: on a machine with an NVIDIA GPU and a Python `torch` (any recent CUDA build), builds
# core, samples and the tests against *that* torch, runs every suite with the cuda backend available
# (test_cuda exercises it; the rest run as everywhere), the demo on the GPU, and prints a summary:
# tests run/failed, the decoder's step time and peak device memory with and without offloading, the
# hook cost (on the GPU, and on host-sim beside no-op Python hooks: README's ratios), and (when the
# CLI was built and the GPU has a device-model profile) the same sweep measured on the GPU and
# modelled on host-sim, with the error per point.
#
#   scripts/gpu-check.sh [--python /path/to/python] [--out DIR]
#
# Needs: cmake >= 3.25, a C++20 compiler, ninja or make, the CUDA toolkit headers of torch's CUDA major
# (CUDA_HOME, default /usr/local/cuda), GoogleTest, CLI11, nlohmann-json, fmt, xxHash (Debian:
# libgtest-dev libcli11-dev nlohmann-json3-dev libfmt-dev libxxhash-dev). Exit: 0 all passed, 1 failures, 2 setup.
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY="$(command -v python3 || true)"
OUT="${OUT:-$ROOT/build/gpu-check}"
while (($#)); do
  case "$1" in
    --python) PY="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    -h|--help) sed -n 2,12p "$0"; exit 0 ;;
    *) echo "error: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT"
die() { echo "gpu-check: error: $*" >&2; exit 2; }
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 || die "no NVIDIA GPU found (nvidia-smi -L failed)"
[[ -n "$PY" ]] || die "no python3; pass --python"
"$PY" -c 'import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)' \
  || die "$PY has no CUDA-capable torch (torch.cuda.is_available() is False)"
CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
[[ -f "$CUDA_HOME/include/cuda_runtime_api.h" ]] || die "CUDA toolkit headers not found at $CUDA_HOME (set CUDA_HOME)"
torch_info=$("$PY" -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))')
echo "gpu-check: torch/cuda/device: $torch_info"

gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S "$ROOT" -B "$OUT/build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DOFFTUNE_PYTHON="$PY" \
  -DCUDAToolkit_ROOT="$CUDA_HOME" -DTORCH_CUDA_ARCH_LIST="8.0;9.0" >"$OUT/configure.log" 2>&1 \
  || { tail -30 "$OUT/configure.log"; die "configure failed (log: $OUT/configure.log)"; }
cmake --build "$OUT/build" -j"$(nproc)" >"$OUT/build.log" 2>&1 \
  || { grep -m20 -E 'error' "$OUT/build.log"; die "build failed (log: $OUT/build.log)"; }

(cd "$OUT/build" && ctest --output-on-failure -j4 --output-junit "$OUT/ctest.xml") >"$OUT/ctest.log" 2>&1
ctest_rc=$?
"$OUT/build/tests/test_cuda" >"$OUT/test_cuda.log" 2>&1
cuda_rc=$?
"$OUT/build/samples/offtune-demo" --backend cuda --preset small --batch 8 --seq 512 --steps 5 \
  >"$OUT/demo.log" 2>&1
demo_rc=$?
# Hook cost on the GPU (per saved tensor; prints figures, asserts nothing).
"$OUT/build/bench/offtune-bench" --backend cuda --section hooks --repetitions 21 \
  >"$OUT/bench-hooks.log" 2>&1
# The same on host-sim, beside the no-op Python hooks of this machine's torch: the hook-cost ratios
# of README's "What a hook costs" on a CPU that is not shared by a second tenant (the development
# machine has two shared cores, where the spreads are wide).
"$OUT/build/bench/offtune-bench" --backend host-sim --section hooks --repetitions 31 \
  --python "$PY" >"$OUT/bench-hooks-host-sim.log" 2>&1
# The device model against this GPU (docs/device-model.md): one sweep measured here, the same
# sweep on host-sim modelling this GPU, and the error per point (prints figures, asserts nothing).
model=""
case "$torch_info" in
  *H200*) model=h200 ;; *H100*) model=h100-sxm ;; *A100*) model=a100-80gb ;;
  *" L4"*) model=l4 ;; *4090*) model=rtx4090 ;;
esac
cli="$OUT/build/cli/offtune"
if [[ -n "$model" && -x "$cli" ]]; then
  grid=(--model small --batch 8 --seq 512 --steps 10 --warmup 2 --refine-steps 0
        --min-offload-size 64KiB,1MiB,16MiB --max-fwd-stash-size 1,2,5 --quiet)
  rm -f "$OUT/dm-gpu.db" "$OUT/dm-model.db"
  "$cli" sweep "${grid[@]}" --backend cuda --db "$OUT/dm-gpu.db" >"$OUT/dm-gpu.log" 2>&1
  "$cli" sweep "${grid[@]}" --backend host-sim --device-model "$model" --db "$OUT/dm-model.db" \
    >"$OUT/dm-model.log" 2>&1
  "$PY" - "$OUT/dm-gpu.db" "$OUT/dm-model.db" "$model" >"$OUT/device-model-check.md" <<'PYEOF'
import sqlite3, sys
q = ("SELECT point_index, offload, min_offload_size, max_fwd_stash_size, step_ms_median, "
     "peak_allocated FROM points WHERE status = 'ok' ORDER BY point_index")
def load(path):
    try:
        return {row[0]: row[1:] for row in sqlite3.connect(path).execute(q)}
    except sqlite3.Error as e:
        sys.exit(f"cannot read {path}: {e}")
gpu, model = load(sys.argv[1]), load(sys.argv[2])
print(f"| point | min_offload_size / window | GPU ms | {sys.argv[3]} model ms | error "
      "| GPU peak B | model peak B | error |")
print("|---|---|---|---|---|---|---|---|")
for i in sorted(set(gpu) & set(model)):
    g, m = gpu[i], model[i]
    config = f"{g[1]} / {g[2]}" if g[0] else "baseline"
    te = (m[3] - g[3]) / g[3] * 100 if g[3] else float("nan")
    pe = (m[4] - g[4]) / g[4] * 100 if g[4] else float("nan")
    print(f"| {i} | {config} | {g[3]:.2f} | {m[3]:.2f} | {te:+.1f}% | {g[4]} | {m[4]} | {pe:+.1f}% |")
PYEOF
fi

# The Python package on the GPU: tests/python with the cuda backend (where this Python has pytest,
# transformers and peft), and its hook cost beside TRL's (where it has trl).
py_rc=0
if [[ -d "$OUT/build/python/offtune" ]] && "$PY" -c 'import pytest, transformers, peft' 2>/dev/null; then
  OFFTUNE_PYTHON_PATH="$OUT/build/python" OFFTUNE_TEST_BACKEND=cuda \
    "$PY" -m pytest -q -p no:cacheprovider "$ROOT/tests/python" >"$OUT/pytest-cuda.log" 2>&1
  py_rc=$?
  "$PY" -c 'import trl' 2>/dev/null && PYTHONPATH="$OUT/build/python" \
    "$PY" "$ROOT/bench/python_hooks.py" >"$OUT/bench-python-hooks.log" 2>&1
else
  echo "no Python tests: the extension was not built, or $PY lacks pytest, transformers or peft" \
    >"$OUT/pytest-cuda.log"
fi

echo "=== offtune GPU check summary ==="
echo "torch/cuda/device: $torch_info"
grep -E 'tests passed|tests failed' "$OUT/ctest.log" | tail -1
grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/test_cuda.log" | sed 's/^/test_cuda: /'
grep -E 'decoder small' "$OUT/test_cuda.log"
echo "--- demo (decoder, step time and peak device memory) ---"
cat "$OUT/demo.log"
echo "--- hook cost (offtune-bench --section hooks) ---"
grep -E 'scope|baseline' "$OUT/bench-hooks.log"
echo "--- hook cost on host-sim, this machine's CPU, beside no-op Python hooks ---"
grep -E 'scope|baseline|hook|python|offloaded|copy floor|best passes' "$OUT/bench-hooks-host-sim.log"
echo "--- Python package on cuda (tests/python) ---"
tail -1 "$OUT/pytest-cuda.log"
[[ -s "$OUT/bench-python-hooks.log" ]] && cat "$OUT/bench-python-hooks.log"
if [[ -s "$OUT/device-model-check.md" ]]; then
  echo "--- device model ($model) against this GPU, per point ---"
  cat "$OUT/device-model-check.md"
fi
((ctest_rc == 0 && cuda_rc == 0 && demo_rc == 0 && py_rc == 0)) && exit 0
echo "gpu-check: failures (logs in $OUT)" >&2
exit 1
