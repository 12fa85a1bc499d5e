#!/usr/bin/env bash
# All tests: set up, build with warnings as errors and run the GoogleTest suites through ctest (preset
# ci) and the Python package's pytest suite (tests/python, against the build tree's package), then
# build and run the same GoogleTest suites under AddressSanitizer + UBSan (preset dev-asan; the
# Python extension is not built there: an unsanitized Python cannot load a sanitized module).
#   scripts/test.sh           both (what CI runs)
#   scripts/test.sh --fast    the ci preset only
#   scripts/test.sh --asan    the sanitizer run only
# OFFTUNE_PROPERTY_CASES=N sets the number of random graphs in the property test (here: 1000 in
# the ci preset, 300 under the sanitizers: they look for memory errors, which 300 random graphs
# reach as well, at a quarter of the 70 s that 1000 take there).
# OMP_WAIT_POLICY=PASSIVE (also in CMakePresets.json's test presets): two suites at once on two
# cores left torch's OpenMP threads spinning at their barriers against each other; one suite took
# 43 s busy-waiting and 5 s without (LayerOffloadModels.ModelledStepTimeOnAnH100OverPcie4).
source "$(dirname "$0")/common.sh"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
presets=(ci dev-asan)
case "${1:-}" in
  "") ;;
  --fast) presets=(ci) ;;
  --asan) presets=(dev-asan) ;;
  *) echo "error: unknown argument '$1' (valid: --fast, --asan)" >&2; exit 2 ;;
esac
# The pytest suite against build/PRESET/python, with the Python that provides torch. pytest's exit 5
# (no tests collected) is a failure here, not a pass.
run_pytest() {
  local preset="$1" cache="$ROOT/build/$1/CMakeCache.txt" py rc=0
  grep -q '^OFFTUNE_BUILD_PYTHON:BOOL=ON' "$cache" || return 0
  py=$(sed -n 's/^OFFTUNE_PYTHON:FILEPATH=//p' "$cache")
  echo "== tests: pytest tests/python (preset $preset)"
  OFFTUNE_PYTHON_PATH="$ROOT/build/$preset/python" "$py" -m pytest -q -p no:cacheprovider \
    "$ROOT/tests/python" || rc=$?
  if ((rc == 5)); then
    echo "error: pytest collected no tests in tests/python" >&2; exit 1
  elif ((rc != 0)); then
    echo "error: the pytest suite failed (exit $rc)" >&2; exit "$rc"
  fi
}

# The Python code's style (a second): ruff from the cached environment that setup made.
run_ruff() {
  echo "== ruff check (ruff.toml)"
  "${OFFTUNE_CACHE:-$HOME/.cache/offtune}/venv/bin/ruff" check --quiet "$ROOT" ||
    { echo "error: ruff check found style errors in the Python code (listed above)" >&2; exit 1; }
}

checked_style=0
for preset in "${presets[@]}"; do
  echo "== tests: preset $preset"
  build_preset "$preset"
  ((checked_style)) || { run_ruff; checked_style=1; }
  cases=1000
  [[ "$preset" == dev-asan ]] && cases=300
  OFFTUNE_PROPERTY_CASES="${OFFTUNE_PROPERTY_CASES:-$cases}" ctest --preset "$preset" -j2
  run_pytest "$preset"
done
