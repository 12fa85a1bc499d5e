# Shared by scripts/*.sh: run setup quietly once, then configure and build a preset.
# Usage (sourced): build_preset PRESET [cmake -D args...] [-- TARGET...]
# With targets, only those (and what they need) are built: the main job builds the CLI and the
# dashboard, not the tests and benchmarks it does not run.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/offtune/ccache}"
export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-5G}"
# Paths relative to the checkout in ccache's keys: a fresh clone elsewhere (CI) hits the same cache.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$ROOT}"
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"

build_preset() {
  local preset="$1"; shift
  local configure=() targets=()
  while (($#)); do
    if [[ "$1" == -- ]]; then shift; targets=("$@"); break; fi
    configure+=("$1"); shift
  done
  cd "$ROOT"
  bash scripts/setup.sh
  cmake --preset "$preset" "${configure[@]}" >"build-$preset.configure.log" 2>&1 || {
    cat "build-$preset.configure.log" >&2; echo "error: cmake configure failed (preset $preset)" >&2; exit 1; }
  rm -f "build-$preset.configure.log"
  local only=()
  ((${#targets[@]})) && only=(--target "${targets[@]}")
  cmake --build --preset "$preset" "${only[@]}" -- -k 0 ||
    { echo "error: build failed (preset $preset)" >&2; exit 1; }
}
