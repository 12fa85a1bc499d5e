#!/usr/bin/env bash
# Builds the Python package once, as a wheel that installs without a compiler: the extension for
# the pinned torch (built against the torch in scripts/setup.sh's environment), the shared libraries
# it needs beyond torch and the C/C++ runtimes inside it (SQLite: python/CMakeLists.txt), and
# that exact torch pinned in its metadata (`Requires-Dist: torch==X.Y.Z`), since the extension
# works with that torch only. `pip install dist/offtune-*.whl` then takes seconds where
# `pip install ./python` compiles for minutes (docs/python.md, "Install").
#
#   scripts/build-wheel.sh [-o DIR]     the wheel goes to DIR (default: dist/ in the checkout)
#
# The wheel is for this Python version, Linux x86-64 and the CUDA major of the pinned torch
# (its tag says the first two); scripts/python-install-check.sh --wheel installs it into a fresh
# environment with no compiler on PATH and trains one step.
# Exit: 0 written, 1 the build or a check of the wheel failed, 2 bad arguments.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CACHE="${OFFTUNE_CACHE:-$HOME/.cache/offtune}"
out="$ROOT/dist"
while (($#)); do
  case "$1" in
    -o) [[ $# -ge 2 && -n "$2" ]] || { echo "error: -o needs a directory" >&2; exit 2; }
        out="$2"; shift 2 ;;
    *) echo "error: unknown argument '$1' (valid: -o DIR)" >&2; exit 2 ;;
  esac
done
say() { echo "build-wheel: $*"; }
fail() { echo "build-wheel: error: $*" >&2; exit 1; }

OFFTUNE_QUIET=1 bash "$ROOT/scripts/setup.sh"
py="$CACHE/venv/bin/python"
# The compiler cache shared with the CMake builds (scripts/common.sh).
export CCACHE_DIR="${CCACHE_DIR:-$CACHE/ccache}" CCACHE_BASEDIR="${CCACHE_BASEDIR:-$ROOT}"
export CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-5G}"

# The torch the extension is built against, without a local label (== matches any local build).
torch_version=$("$py" -c 'import torch; print(torch.__version__.split("+")[0])')
work=$(mktemp -d "${TMPDIR:-/tmp}/offtune-wheel.XXXXXX")
trap 'rm -rf "$work"' EXIT

say "building the extension against torch $torch_version (scikit-build-core; the build directory python/build/ is reused)"
"$py" -m pip wheel --no-build-isolation --no-deps --disable-pip-version-check -q \
  -w "$work/built" "$ROOT/python" || fail "pip wheel failed (its output is above)"
built=("$work"/built/offtune-*.whl)
[[ -f "${built[0]}" ]] || fail "pip wrote no wheel"

# Pin torch in the metadata: unpacked, METADATA edited, packed again (wheel pack writes RECORD).
mkdir -p "$work/tree" "$work/packed"
"$py" -m wheel unpack -d "$work/tree" "${built[0]}" >/dev/null || fail "wheel unpack failed"
meta=("$work"/tree/offtune-*/offtune-*.dist-info/METADATA)
grep -qx 'Requires-Dist: torch' "${meta[0]}" || fail "METADATA has no plain 'Requires-Dist: torch' to pin"
sed -i "s/^Requires-Dist: torch\$/Requires-Dist: torch==$torch_version/" "${meta[0]}"
mkdir -p "$out"
tree=("$work"/tree/offtune-*)
"$py" -m wheel pack -d "$work/packed" "${tree[0]}" >/dev/null || fail "wheel pack failed"
packed=("$work"/packed/offtune-*.whl)
wheel="$out/$(basename "${packed[0]}")"

# What the wheel must hold: the module; beside it every shared library the module needs that is
# not torch's, the NVIDIA wheels' (CUDA runtime, CUPTI) or the C/C++ runtime's; torch pinned.
module=("${tree[0]}"/offtune/_offtune*.so)
[[ -f "${module[0]}" ]] || fail "no extension module offtune/_offtune*.so in the wheel"
bundled=()
while read -r lib; do
  case "$lib" in
    libtorch*|libc10*|libcudart.so.*|libcupti.so.*|libstdc++.so.*|libgcc_s.so.*|libm.so.*|libc.so.*|ld-linux*|libpthread.so.*|libdl.so.*|librt.so.*) ;;
    *) [[ -f "${tree[0]}/offtune/$lib" ]] || fail "the module needs $lib, which is not in the wheel"
       bundled+=("$lib") ;;
  esac
done < <(readelf -d "${module[0]}" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
grep -qx "Requires-Dist: torch==$torch_version" "${meta[0]}" || fail "torch is not pinned to $torch_version"
mv -f "${packed[0]}" "$wheel"
say "wrote $wheel ($(du -h "$wheel" | cut -f1); torch==$torch_version pinned; inside: ${bundled[*]:-no other library})"
