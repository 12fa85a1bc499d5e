#!/usr/bin/env bash
# All tests: set up, build with warnings as errors, run the GoogleTest suites through ctest.
#   scripts/test.sh          the CI suite (preset ci)
#   scripts/test.sh --asan   the same suite under AddressSanitizer + UBSan (preset dev-asan)
# OFFTUNE_PROPERTY_CASES=N sets the number of random graphs in the property test (CI: 1000).
source "$(dirname "$0")/common.sh"
preset=ci
[[ "${1:-}" == "--asan" ]] && preset=dev-asan
export OFFTUNE_PROPERTY_CASES="${OFFTUNE_PROPERTY_CASES:-1000}"
build_preset "$preset"
ctest --preset "$preset" -j2
