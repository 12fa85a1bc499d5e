#!/usr/bin/env bash
# The main job: set up, build (release), then sweep min_offload_size x max_fwd_stash_size on the
# built-in tiny Llama-like model and print the measured grid, the recommendation and the path of the
# store. Where there is no GPU it runs on host-sim with a PCIe 4.0 link model and the H100 SXM device
# model (docs/device-model.md): step times are those an H100 would take, the same on every run.
# Arguments replace the defaults below (see `offtune sweep --help`); OFFTUNE_DB sets the store
# (default: offtune.db here).
source "$(dirname "$0")/common.sh"
db="${OFFTUNE_DB:-$PWD/offtune.db}"
build_preset release
if (($#)); then
  exec "$ROOT/build/release/cli/offtune" sweep --db "$db" "$@"
fi
device=()
if ! { command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; }; then
  device=(--backend host-sim --device-model h100-sxm)
fi
exec "$ROOT/build/release/cli/offtune" sweep --db "$db" --model tiny --batch 8 --seq 128 \
  --steps 5 --warmup 1 --min-offload-size 1KiB:16MiB:x16 --max-fwd-stash-size 1,2,5 "${device[@]}"
