#!/usr/bin/env bash
# All tests: set up, build with warnings as errors and run the GoogleTest suites through ctest (preset
# ci), then build and run the same suites under AddressSanitizer + UBSan (preset dev-asan).
#   scripts/test.sh           both (what CI runs)
#   scripts/test.sh --fast    the ci preset only
#   scripts/test.sh --asan    the sanitizer run only
# OFFTUNE_PROPERTY_CASES=N sets the number of random graphs in the property test (here: 1000 in
# the ci preset, 300 under the sanitizers: they look for memory errors, which 300 random graphs
# reach as well, at a quarter of the 70 s that 1000 take there).
source "$(dirname "$0")/common.sh"
presets=(ci dev-asan)
case "${1:-}" in
  "") ;;
  --fast) presets=(ci) ;;
  --asan) presets=(dev-asan) ;;
  *) echo "error: unknown argument '$1' (valid: --fast, --asan)" >&2; exit 2 ;;
esac
for preset in "${presets[@]}"; do
  echo "== tests: preset $preset"
  build_preset "$preset"
  cases=1000
  [[ "$preset" == dev-asan ]] && cases=300
  OFFTUNE_PROPERTY_CASES="${OFFTUNE_PROPERTY_CASES:-$cases}" ctest --preset "$preset" -j2
done
