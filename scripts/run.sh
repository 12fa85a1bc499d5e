#!/usr/bin/env bash
# The main job: set up, build (release), then ask the question of a fine-tune that does not fit:
# which settings fit a memory budget, and how much slower are they? It sweeps the built-in `small`
# Llama-like model (4 layers, hidden 256, 5M parameters) at 8 x 512 tokens, a shape whose
# activations are most of its memory (a 726 MiB peak reserved beside 20 MB of weights), across
# gradient checkpointing (none, all), what is offloaded (every saved tensor, or only the
# checkpointed blocks' inputs) and min_offload_size x max_fwd_stash_size; prints the measured grid
# and the sweep's recommendation, then the fastest point under the budget (OFFTUNE_BUDGET, default
# 910MiB of device total: peak reserved plus the CUDA context, what a GPU runs out of; less than
# checkpointing alone takes)
# in one line with every memory figure of that point, and the command that opens the store in the
# dashboard. Where there is no GPU it runs on host-sim with the H100 SXM device model behind a
# PCIe 5.0 link (docs/device-model.md): step times are those an H100 would take, the same on every
# run. Arguments replace the sweep's defaults below (see `offtune sweep --help`); OFFTUNE_DB sets
# the store (default: offtune.db here).
source "$(dirname "$0")/common.sh"
db="${OFFTUNE_DB:-$PWD/offtune.db}"
budget="${OFFTUNE_BUDGET:-910MiB}"
# Only what the job runs: the CLI, and the dashboard it points to (when Qt is there).
targets=(offtune)
build_preset release -- "${targets[@]}"
if grep -q '^OFFTUNE_BUILD_GUI:BOOL=ON' "$ROOT/build/release/CMakeCache.txt" 2>/dev/null; then
  cmake --build --preset release --target offtune-gui -- -k 0 ||
    { echo "error: build failed (offtune-gui)" >&2; exit 1; }
fi
offtune="$ROOT/build/release/cli/offtune"
if (($#)); then
  exec "$offtune" sweep --db "$db" "$@"
fi
device=()
if ! { command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; }; then
  device=(--backend host-sim --device-model h100-sxm)
fi
"$offtune" sweep --db "$db" --model small --batch 8 --seq 512 --steps 3 --warmup 1 --link pcie5 \
  --checkpoint none,all --offload all,boundaries --min-offload-size 64KiB,4MiB \
  --max-fwd-stash-size 1,4 "${device[@]}"
# The decision under the budget: recommend's line that says which point and why (its table and
# the snippets for C++, TRL and Axolotl are one command away).
# The budget is judged on the peak device total (peak reserved plus what lies outside the caching
# allocator: what a GPU runs out of); the Memory line names every figure of the chosen point.
answer=$("$offtune" recommend --db "$db" --memory-budget "$budget" || true)
decision=$(grep -m1 -E '^(fastest point whose|under the budget|no measured point)' <<<"$answer" || true)
memory=$(grep -m1 '^Memory: ' <<<"$answer" || true)
echo
echo "memory budget $budget (peak device total): ${decision:-see offtune recommend --db $db --memory-budget $budget}"
if [[ -n "$memory" ]]; then echo "  $memory"; fi
echo "  settings to paste: offtune recommend --db $db --memory-budget $budget"
if [[ -x "$ROOT/build/release/gui/offtune-gui" ]]; then
  echo "  dashboard: $ROOT/build/release/gui/offtune-gui $db"
else
  echo "  dashboard: build the GUI (Qt 6, -DOFFTUNE_BUILD_GUI=ON), then offtune-gui $db"
fi
