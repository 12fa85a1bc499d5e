#!/usr/bin/env bash
# Installs everything offtune needs on a fresh Debian 12 machine, idempotently.
#
# - Debian packages: compilers and tools, Qt6 (+ charts), SQLite, GoogleTest, CLI11, nlohmann-json,
#   fmt, ccache, Xvfb.
# - The CUDA-enabled libtorch from the PyPI `torch` wheel, pinned, in a virtual environment that lives
#   in a cache outside the work tree ($OFFTUNE_CACHE, default ~/.cache/offtune), so that a fresh clone
#   (CI) reuses it. Heavy downloads stay in pip's cache too.
# - The Python test packages (pytest, transformers, peft, trl, scikit-build-core), pinned, in the same
#   environment.
# - Checks that the local CUDA toolkit has what the build needs, and that its major version matches the
#   one the wheel was built for (one CUDA runtime per process).
#
# Exit codes: 0 ready; 2 a prerequisite is missing (the message names the fix); 3 a download failed.
set -euo pipefail

TORCH_VERSION="${OFFTUNE_TORCH_VERSION:-2.15.0}"
CACHE="${OFFTUNE_CACHE:-$HOME/.cache/offtune}"
VENV="$CACHE/venv-torch-$TORCH_VERSION"
CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"

say() { [[ -n "${OFFTUNE_QUIET:-}" ]] || echo "setup: $*"; }
die() { echo "setup: error: $1" >&2; [[ -n "${2:-}" ]] && echo "setup: hint: $2" >&2; exit "${3:-2}"; }

# ---- Debian packages ---------------------------------------------------------------------------
APT_PACKAGES=(
  build-essential cmake ninja-build ccache git pkg-config clang-format
  qt6-base-dev qt6-charts-dev libgl-dev
  libsqlite3-dev sqlite3 zlib1g-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev libfmt-dev libxxhash-dev
  xvfb xauth
)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  say "installing Debian packages: ${missing[*]}"
  SUDO=""; [[ $(id -u) -eq 0 ]] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq >/dev/null || die "apt-get update failed" "check the network to the Debian mirror" 3
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || die "apt-get install failed for: ${missing[*]}" "run it by hand to see why" 3
else
  say "Debian packages present"
fi

# ---- CUDA toolkit ------------------------------------------------------------------------------
[[ -x "$CUDA_HOME/bin/nvcc" ]] || die "no CUDA toolkit at $CUDA_HOME (nvcc missing)" \
  "install the CUDA toolkit 13 or set CUDA_HOME to its root"
for h in include/cuda_runtime_api.h include/cupti.h include/nvtx3/nvToolsExt.h; do
  [[ -f "$CUDA_HOME/$h" ]] || die "the CUDA toolkit at $CUDA_HOME lacks $h" \
    "install the toolkit's runtime, CUPTI and NVTX components (cuda-cudart-dev, cuda-cupti-dev, cuda-nvtx)"
done
toolkit_major=$("$CUDA_HOME/bin/nvcc" --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p')

# ---- libtorch from the PyPI wheel ----------------------------------------------------------------
PY="${OFFTUNE_BASE_PYTHON:-$(command -v python3 || true)}"
[[ -n "$PY" ]] || die "python3 not found" "install python3 (3.10 or newer) with venv"
mkdir -p "$CACHE"
if [[ ! -f "$VENV/.offtune-ready" ]]; then
  say "creating $VENV with torch==$TORCH_VERSION (first run downloads ~4 GB; cached afterwards)"
  rm -rf "$VENV"
  "$PY" -m venv "$VENV" || die "could not create a virtual environment" "install python3-venv"
  "$VENV/bin/pip" install -q --disable-pip-version-check "torch==$TORCH_VERSION" numpy \
    || die "pip could not install torch==$TORCH_VERSION" "check access to PyPI; pip's own message is above" 3
  touch "$VENV/.offtune-ready"
else
  say "torch $TORCH_VERSION present in $VENV"
fi
read -r torch_ver torch_cuda < <("$VENV/bin/python" -c \
  'import torch; print(torch.__version__, torch.version.cuda or "none")')
[[ "$torch_cuda" != none ]] || die "the torch wheel in $VENV is a CPU-only build" \
  "remove $VENV and rerun; offtune needs the CUDA build from PyPI"
wheel_major=${torch_cuda%%.*}
[[ "$wheel_major" == "$toolkit_major" ]] || die \
  "torch $torch_ver is built for CUDA $torch_cuda but the toolkit at $CUDA_HOME is CUDA $toolkit_major" \
  "pin a torch built for CUDA $toolkit_major (OFFTUNE_TORCH_VERSION) or point CUDA_HOME at a CUDA $wheel_major toolkit"

# ---- Python test dependencies ------------------------------------------------------------------
# The pytest suite (tests/python) trains Hugging Face models from configs, with PEFT adapters, and
# compares with TRL's own offloading; scikit-build-core builds `pip install ./python`; nsys-tui,
# nsys-parser and holistictraceanalysis read offtune's exports
# (tests/python/test_exports_readers.py); torchao's NF4 is the quantised base of
# tests/python/test_tensor_kinds.py; wheel pins torch in the wheel scripts/build-wheel.sh writes;
# ruff checks the Python code's style (ruff.toml; scripts/test.sh runs it). Pinned like
# torch (and torch named again so that pip never replaces it); cached in the same environment.
PY_TEST_PACKAGES=(pytest==9.2.0 transformers==5.24.0 peft==0.21.2 trl==1.16.0
                  scikit-build-core==1.1.2 nsys-tui==0.1.5 holistictraceanalysis==0.5.0
                  ruff==0.17.6 torchao==0.18.0 wheel==0.48.0 nsys-parser==0.0.1.post1)
py_stamp="$VENV/.offtune-python-${PY_TEST_PACKAGES[*]// /_}"
py_stamp="${py_stamp// /+}"
if [[ ! -f "$py_stamp" ]]; then
  say "installing the Python test packages: ${PY_TEST_PACKAGES[*]}"
  "$VENV/bin/pip" install -q --disable-pip-version-check "torch==$TORCH_VERSION" \
      "${PY_TEST_PACKAGES[@]}" \
    || die "pip could not install ${PY_TEST_PACKAGES[*]}" "check access to PyPI; pip's own message is above" 3
  rm -f "$VENV"/.offtune-python-*
  touch "$py_stamp"
else
  say "Python test packages present"
fi

# Where CMake looks for the environment (see cmake/OfftuneTorch.cmake).
ln -sfn "$VENV" "$CACHE/venv"
say "ready: torch $torch_ver (CUDA $torch_cuda), toolkit CUDA $toolkit_major, venv $VENV"
