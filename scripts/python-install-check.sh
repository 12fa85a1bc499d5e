#!/usr/bin/env bash
# The Python package's real install, as docs/python.md's "Install" says: a fresh virtual environment
# holding only torch (pinned; from pip's cache where it has it, else from PyPI: about 4 GB), then
# `pip install ./python` (pip builds the extension against that torch with scikit-build-core), then
# `import offtune` and one offloaded training step, and a torch it was not built for refused.
# Slow (the libraries and the extension are built from scratch: 10-20 minutes on two cores), so it
# is not part of scripts/test.sh; run it after changing the packaging.
#
#   scripts/python-install-check.sh [--keep] [--wheel [FILE]]
#     --keep          leaves the environment in place
#     --wheel [FILE]  installs the wheel FILE (default: one built now by scripts/build-wheel.sh)
#                     instead of pip install ./python, with no compiler on PATH (the environment's
#                     own bin/ only: checked that no cc, c++, gcc, g++, clang, nvcc, cmake or ninja
#                     is found), and trains under that PATH too
#
# Exit: 0 installed and trained, 1 a step failed (its output is above), 2 bad arguments.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CACHE="${OFFTUNE_CACHE:-$HOME/.cache/offtune}"
TORCH_VERSION="${OFFTUNE_TORCH_VERSION:-2.15.0}"
keep=0 wheel_mode=0 wheel_file=""
while (($#)); do
  case "$1" in
    --keep) keep=1; shift ;;
    --wheel) wheel_mode=1; shift
             if [[ $# -gt 0 && "$1" != --* ]]; then wheel_file="$(realpath "$1")"; shift; fi
             [[ -z "$wheel_file" || -f "$wheel_file" ]] || { echo "error: no wheel at $wheel_file" >&2; exit 2; } ;;
    *) echo "error: unknown argument '$1' (valid: --keep, --wheel [FILE])" >&2; exit 2 ;;
  esac
done
# The compiler cache shared with the CMake builds (scripts/common.sh).
export CCACHE_DIR="${CCACHE_DIR:-$CACHE/ccache}" CCACHE_BASEDIR="${CCACHE_BASEDIR:-$ROOT}"
export CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-5G}"

# The interpreter scripts/setup.sh made its environment from (the torch wheel in pip's cache is
# for that Python version).
base=$("$CACHE/venv/bin/python" -c 'import sys; print(sys._base_executable)')
work=$(mktemp -d "${TMPDIR:-/tmp}/offtune-install.XXXXXX")
((keep)) || trap 'rm -rf "$work"' EXIT
echo "install-check: fresh environment $work/venv (from $base)"
"$base" -m venv "$work/venv"
py="$work/venv/bin/python"
"$py" -m pip install -q --disable-pip-version-check "torch==$TORCH_VERSION"
run=()  # how the installed package is run: as it is, or with no compiler on PATH (--wheel)
if ((wheel_mode)); then
  if [[ -z "$wheel_file" ]]; then
    bash "$ROOT/scripts/build-wheel.sh" -o "$work/dist"
    wheel_file=$(ls "$work"/dist/offtune-*.whl)
  fi
  bare="$work/venv/bin"  # the PATH of a machine without a compiler: the environment's own scripts
  for tool in cc c++ gcc g++ clang clang++ nvcc cmake ninja; do
    if found=$(env PATH="$bare" /bin/bash -c "command -v $tool"); then
      echo "install-check: error: $tool is on the bare PATH ($found)" >&2; exit 1
    fi
  done
  run=(env -u CC -u CXX -u CUDACXX -u CMAKE_GENERATOR PATH="$bare")
  echo "install-check: no compiler on PATH ($bare); pip install $(basename "$wheel_file")"
  start=$(date +%s)
  "${run[@]}" "$py" -m pip install --disable-pip-version-check "$wheel_file"
  echo "install-check: the wheel installed in $(($(date +%s) - start)) s"
else
  echo "install-check: $("$py" -m pip list --disable-pip-version-check 2>/dev/null | grep -ci '^torch ') torch, nothing else of offtune's; pip install ./python"
  (cd "$ROOT" && "$py" -m pip install --disable-pip-version-check ./python)
fi
cd "$work"  # not the checkout: the installed package, not python/offtune
"${run[@]}" "$py" - <<'PY'
import subprocess, sys
import torch
import offtune

print("install-check: offtune", offtune.__version__, "from", offtune.__file__)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 8))
off = offtune.Offloader(min_offload_size="1KiB", max_fwd_stash_size=2)
device = "cuda" if off.backend == "cuda" else "cpu"
model = model.to(device)
x = torch.randn(32, 64, device=device)
loss_ref = model(x).square().mean()
loss_ref.backward()
ref = [p.grad.clone() for p in model.parameters()]
model.zero_grad()
with off.scope():
    loss = model(x).square().mean()
loss.backward()
assert torch.equal(loss, loss_ref), "loss differs"
assert all(torch.equal(a, p.grad) for a, p in zip(ref, model.parameters())), "gradients differ"
stats = off.stats()
assert stats["offloaded"] > 0, stats
print("install-check: one step on", off.backend, "- offloaded", stats["offloaded"],
      "tensors, gradients identical")
code = "import torch; torch.__version__ = '0.0.1'\nimport offtune"
out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
assert out.returncode != 0 and "ImportError: offtune was built against torch" in out.stderr, out
print("install-check: another torch is refused:", out.stderr.strip().splitlines()[-1])
PY
echo "install-check: ok"
