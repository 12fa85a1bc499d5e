#!/usr/bin/env bash
# GPU bundle: builds here, against the torch of the GPU machine (not the pinned one), everything
# scripts/gpu-check.sh runs there, and stages it with the wheels that machine lacks in one folder
# (default .gpu/, ignored by git), so that no device minute is spent compiling or downloading.
#
#   scripts/gpu-bundle.sh [--torch 2.11.0] [--python 3.12] [--out .gpu]
#   then, on the GPU machine (device tool: carry .gpu):  bash scripts/gpu-check.sh --prebuilt .gpu
#
# --torch and --python: the GPU machine's `python3 -c 'import torch, sys; print(torch.__version__,
# sys.version)'` (2.11.0+cu130 on Python 3.12 as last seen; the wheel on PyPI is that CUDA build).
# A venv with that torch is made once under the cache (OFFTUNE_CACHE, ~4 GiB) from a Python of that
# version found on PATH or under pyenv (OFFTUNE_GPU_VENV: use another venv that has it). The build
# is Release, no GUI, in build/gpu-bundle (OFFTUNE_GPU_BUILD: another folder).
# Staged: bin/ (test_cuda, test_engine and test_disk for their cuda tests, test_instrumentation
# and the NVTX injection library, offtune,
# offtune-demo, offtune-bench; stripped), python/offtune (the package with its extension for that
# Python and torch), whl/ (TRL and the dependencies the GPU image lacks: datasets, dill,
# multiprocess), and the size of it all, which the device tool caps at 64 MiB with the work tree.
# Exit: 0 staged, 2 bad arguments or a missing prerequisite, 1 a build failure.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
TORCH=2.11.0
PYV=3.12
OUTDIR="$ROOT/.gpu"
while (($#)); do
  case "$1" in
    --torch) TORCH="$2"; shift 2 ;;
    --python) PYV="$2"; shift 2 ;;
    --out) OUTDIR="$(realpath -m "$2")"; shift 2 ;;
    -h|--help) sed -n 2,18p "$0"; exit 0 ;;
    *) echo "gpu-bundle: error: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
die() { echo "gpu-bundle: error: $*" >&2; exit 2; }
[[ "$TORCH" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "--torch takes a version such as 2.11.0, got '$TORCH'"
[[ "$PYV" =~ ^3\.[0-9]+$ ]] || die "--python takes a version such as 3.12, got '$PYV'"

CACHE="${OFFTUNE_CACHE:-$HOME/.cache/offtune}"
py=""
for cand in "$(command -v "python$PYV" || true)" "$HOME"/.pyenv/versions/"$PYV".*/bin/"python$PYV"; do
  [[ -n "$cand" && -x "$cand" ]] && { py="$cand"; break; }
done
[[ -n "$py" ]] || die "no Python $PYV on PATH or under ~/.pyenv (install python$PYV, or pass --python)"
VENV="${OFFTUNE_GPU_VENV:-$CACHE/venv-gpu-torch-$TORCH-py$PYV}"
if ! "$VENV/bin/python" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$TORCH')" \
    2>/dev/null; then
  echo "gpu-bundle: making $VENV (torch $TORCH for Python $PYV; downloads ~4 GiB once)"
  rm -rf "$VENV"
  "$py" -m venv "$VENV"
  "$VENV/bin/pip" install -q "torch==$TORCH" || die "pip could not install torch==$TORCH"
fi

export CCACHE_DIR="${CCACHE_DIR:-$CACHE/ccache}" CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=1
BUILD="${OFFTUNE_GPU_BUILD:-$ROOT/build/gpu-bundle}"
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DOFFTUNE_BUILD_GUI=OFF \
  -DOFFTUNE_PYTHON="$VENV/bin/python" >"$ROOT/build-gpu-bundle.configure.log" 2>&1 \
  || { tail -30 "$ROOT/build-gpu-bundle.configure.log" >&2; echo "gpu-bundle: configure failed" >&2; exit 1; }
rm -f "$ROOT/build-gpu-bundle.configure.log"
targets=(test_cuda test_engine test_disk test_instrumentation offtune_nvtx_injection offtune
         offtune-demo offtune-bench offtune_python)
cmake --build "$BUILD" --target "${targets[@]}" -- -k 0 \
  || { echo "gpu-bundle: build failed against torch $TORCH" >&2; exit 1; }

rm -rf "$OUTDIR/bin" "$OUTDIR/python"
mkdir -p "$OUTDIR/bin" "$OUTDIR/python" "$OUTDIR/whl"
for f in tests/test_cuda tests/test_engine tests/test_disk tests/test_instrumentation cli/offtune \
         samples/offtune-demo bench/offtune-bench; do
  strip -o "$OUTDIR/bin/$(basename "$f")" "$BUILD/$f"
done
inj=$(find "$BUILD/tests/nvtx_injection" -name '*.so' | head -1)
[[ -n "$inj" ]] && strip -o "$OUTDIR/bin/$(basename "$inj")" "$inj"
cp -r "$BUILD/python/offtune" "$OUTDIR/python/"
find "$OUTDIR/python" -name '*.so' -exec strip {} +
echo "$TORCH py$PYV $(git -C "$ROOT" rev-parse --short HEAD)" >"$OUTDIR/BUILT_FOR"

# TRL, at the version the cached venv tests against, and what the GPU image lacks of its needs.
ver() { "$CACHE/venv/bin/python" -c "import importlib.metadata as m; print(m.version('$1'))"; }
wheels=()
for pkg in trl datasets dill multiprocess; do wheels+=("$pkg==$(ver "$pkg")"); done
"$CACHE/venv/bin/python" -m pip download -q --no-deps --only-binary=:all: --python-version "$PYV" \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  -d "$OUTDIR/whl" "${wheels[@]}" || die "pip could not download ${wheels[*]}"

size=$(du -sm "$OUTDIR" | cut -f1)
echo "gpu-bundle: staged $OUTDIR (${size} MiB): $(ls "$OUTDIR/bin" | tr '\n' ' ')"
((size < 56)) || { echo "gpu-bundle: error: ${size} MiB is over the 56 MiB that leaves room for the work tree" >&2; exit 1; }
