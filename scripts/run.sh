#!/usr/bin/env bash
# The main job: set up, build (release), and train the built-in Llama-like model for a few steps with
# and without activation offloading, printing step time and peak device memory for each. On a machine
# without a GPU the engine runs on host-sim with a PCIe 4.0 link model. Extra arguments go to
# offtune-demo (see `offtune-demo --help`).
source "$(dirname "$0")/common.sh"
build_preset release
exec "$ROOT/build/release/samples/offtune-demo" "$@"
