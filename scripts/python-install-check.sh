#!/usr/bin/env bash
# The Python package's real install, as docs/python.md's "Install" says: a fresh virtual environment
# holding only torch (pinned; from pip's cache where it has it, else from PyPI: about 4 GB), then
# `pip install ./python` (pip builds the extension against that torch with scikit-build-core), then
# `import offtune` and one offloaded training step, and a torch it was not built for refused.
# Slow (the libraries and the extension are built from scratch: 10-20 minutes on two cores), so it
# is not part of scripts/test.sh; run it after changing the packaging.
#
#   scripts/python-install-check.sh [--keep]     --keep leaves the environment in place
#
# Exit: 0 installed and trained, 1 a step failed (its output is above).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CACHE="${OFFTUNE_CACHE:-$HOME/.cache/offtune}"
TORCH_VERSION="${OFFTUNE_TORCH_VERSION:-2.15.0}"
keep=0
case "${1:-}" in
  "") ;;
  --keep) keep=1 ;;
  *) echo "error: unknown argument '$1' (valid: --keep)" >&2; exit 2 ;;
esac
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
echo "install-check: $("$py" -m pip list --disable-pip-version-check 2>/dev/null | grep -ci '^torch ') torch, nothing else of offtune's; pip install ./python"
(cd "$ROOT" && "$py" -m pip install --disable-pip-version-check ./python)
cd "$work"  # not the checkout: the installed package, not python/offtune
"$py" - <<'PY'
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
