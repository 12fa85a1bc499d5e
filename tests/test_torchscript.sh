#!/usr/bin/env bash
# `offtune` on TorchScript models (host-sim): a causal LM exported by samples/export_torchscript.py
# through run, gradient checkpointing of its blocks and a 2x1 sweep, a dense model with a float
# input spec, and bad files and specs with their exit codes.
# Usage: test_torchscript.sh /path/to/offtune /path/to/python-with-torch
source "$(dirname "$0")/cli_test_lib.sh"
OFFTUNE="$1"
PYTHON="$2"
EXPORT="$(cd "$(dirname "$0")/.." && pwd)/samples/export_torchscript.py"
cli_test_dir
# Host-sim whatever the machine, so that the test means the same with and without a GPU.
W=(--backend host-sim --batch 2 --seq 16 --steps 1 --warmup 1)

# Export: the script prints the path it wrote.
out=$("$PYTHON" "$EXPORT" --out "$T/lm.pt" --vocab 512 --dim 32 --layers 2 --heads 4 --seq 32 \
  --seed 1) || fail "export_torchscript.py"
[ "$out" = "$T/lm.pt" ] || fail "export printed '$out'"
[ -s lm.pt ] || fail "export wrote no lm.pt"
ok

# One run: ok, something offloaded, and the head warning once.
"$OFFTUNE" run --model lm.pt "${W[@]}" --db x.db --json >run.json 2>run.err || fail "run: $(cat run.err)"
py 'import json; d=json.load(open("run.json")); assert d["status"]=="ok", d; assert d["summary"]["offloaded_bytes"] > 0, d' "run json"
[ "$(grep -c "can't exclude" run.err)" -eq 1 ] || fail "head warning: $(cat run.err)"
ok

# A 2x1 sweep: the baseline and two points, all ok, still one warning.
"$OFFTUNE" sweep --model lm.pt "${W[@]}" --min-offload-size 1KiB,1MiB --max-fwd-stash-size 2 \
  --db s.db --json >sweep.json 2>sweep.err || fail "sweep: $(cat sweep.err)"
py 'import json; d=json.load(open("sweep.json")); assert d["ran"]==3 and d["ok"]==3, d; assert d["points"][1]["summary"]["offloaded_bytes"] > 0, d' "sweep json"
[ "$(grep -c "can't exclude" sweep.err)" -eq 1 ] || fail "sweep head warning: $(cat sweep.err)"
ok

# The head warning is for a command that offloads and is not --quiet.
"$OFFTUNE" run --model lm.pt "${W[@]}" --db x.db --quiet 2>quiet.err || fail "run --quiet: $(cat quiet.err)"
"$OFFTUNE" run --model lm.pt "${W[@]}" --db x.db --no-offload >/dev/null 2>none.err ||
  fail "run --no-offload: $(cat none.err)"
! grep -q "can't exclude" quiet.err none.err || fail "head warning under --quiet or --no-offload"
ok

# Under a device model every point of a TorchScript sweep is exact (its executor is warmed
# outside the steps), and with --optimizer every point's first step sees the same weights.
"$OFFTUNE" sweep --model lm.pt --backend host-sim --batch 2 --seq 16 --steps 3 --warmup 0 --optimizer --device-model h100 \
  --min-offload-size 1KiB,1MiB --max-fwd-stash-size 2 --db dm.db --json >dm.json 2>dm.err ||
  fail "device-model sweep: $(cat dm.err)"
py '
import json, sqlite3
d = json.load(open("dm.json"))
assert d["ok"] == 3, d
for p in d["points"]:
    s = p["summary"]
    assert s["step_ms_ci_level"] == 1.0 and s["step_ms_ci_low"] == s["step_ms_ci_high"], p
first = {r[0] for r in sqlite3.connect("dm.db").execute("select loss from steps where step = 0")}
assert len(first) == 1, first
' "device-model sweep json"
ok

# Dropout (traced in training mode) draws the same masks from run to run: the same losses.
"$PYTHON" "$EXPORT" --out "$T/drop.pt" --vocab 512 --dim 32 --layers 2 --heads 4 --seq 32 \
  --dropout 0.1 --seed 1 >/dev/null || fail "export --dropout"
for i in 1 2; do
  "$OFFTUNE" run --model drop.pt --backend host-sim --batch 2 --seq 16 --steps 2 --db x.db --json >"drop$i.json" 2>/dev/null ||
    fail "dropout run $i"
done
py '
import json
a, b = (json.load(open(f"drop{i}.json"))["summary"]["final_loss"] for i in (1, 2))
assert a == b, (a, b)
' "dropout runs"
ok

# --dtype bf16: a model traced in bf16 runs; one traced in fp32 whose trace fixed an fp32 tensor
# (as Hugging Face models' masks are) fails at every point with the cause and what to do, and
# the sweep exits 1.
"$PYTHON" "$EXPORT" --out "$T/lm16.pt" --vocab 512 --dim 32 --layers 2 --heads 4 --seq 32 \
  --dtype bf16 >/dev/null || fail "export --dtype bf16"
"$OFFTUNE" run --model lm16.pt "${W[@]}" --dtype bf16 --db x.db --json >bf16.json 2>/dev/null ||
  fail "bf16 run of a bf16 trace"
py 'import json; d=json.load(open("bf16.json")); assert d["status"]=="ok", d' "bf16 json"
ok
"$PYTHON" - <<'EOF' || fail "mixed export"
import warnings
import torch
warnings.filterwarnings("ignore", category=FutureWarning)
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(512, 32)
        self.head = torch.nn.Linear(32, 512)
    def forward(self, ids):
        h = self.emb(ids)
        return self.head(h * torch.ones(h.shape[-1]))  # the trace keeps this tensor's fp32
torch.manual_seed(0)
torch.jit.save(torch.jit.trace(Net(), (torch.randint(0, 512, (2, 8)),)), "mixed.pt")
EOF
"$OFFTUNE" sweep --model mixed.pt "${W[@]}" --dtype bf16 --min-offload-size 1KiB \
  --max-fwd-stash-size 2 --db mixed.db >mixed.out 2>mixed.err
rc=$?
[ "$rc" -eq 1 ] || fail "sweep of a fp32 trace in bf16: exit $rc :: $(cat mixed.err)"
grep -q "^error: the baseline failed, so no point can be judged: the TorchScript model failed: .*same dtype.*samples/export_torchscript.py --dtype bf16" mixed.err ||
  fail "no cause in: $(cat mixed.err)"
ok

# Gradient checkpointing of the LM's blocks, found in the model (model.layers, its 2 decoder
# layers): the loss is the same; the peak is lower with every:2 and lower again with all; and with
# only the boundaries offloaded, all moves two blocks' inputs where every:2 moves one (block 0).
for c in none all every:2; do
  "$OFFTUNE" run --model lm.pt "${W[@]}" --no-offload --checkpoint "$c" --db x.db --json \
    >"peak_$c.json" 2>ckpt.err || fail "run --checkpoint $c: $(cat ckpt.err)"
done
for c in all every:2; do
  "$OFFTUNE" run --model lm.pt "${W[@]}" --checkpoint "$c" --offload boundaries --db x.db --json \
    >"bounds_$c.json" 2>ckpt.err || fail "run --checkpoint $c --offload boundaries: $(cat ckpt.err)"
done
py '
import json
p = {c: json.load(open(f"peak_{c}.json")) for c in ("none", "all", "every:2")}
b = {c: json.load(open(f"bounds_{c}.json")) for c in ("all", "every:2")}
for d in list(p.values()) + list(b.values()):
    assert d["status"] == "ok", d
peak = {c: d["summary"]["peak_allocated"] for c, d in p.items()}
assert peak["all"] < peak["every:2"] < peak["none"], peak
loss = {d["summary"]["final_loss"] for d in list(p.values()) + list(b.values())}
assert len(loss) == 1, loss
moved = {c: d["summary"]["offloaded_bytes"] for c, d in b.items()}
assert moved["every:2"] > 0 and moved["all"] == 2 * moved["every:2"], moved
' "checkpoint json"
ok

# The blocks named (--blocks) give the same as found; a path that is not there is one error line
# naming the flag (exit 2, nothing run).
"$OFFTUNE" run --model lm.pt "${W[@]}" --no-offload --checkpoint all --blocks model.layers \
  --db x.db --json >named.json 2>ckpt.err || fail "run --blocks model.layers: $(cat ckpt.err)"
py '
import json
a, b = json.load(open("named.json")), json.load(open("peak_all.json"))
assert a["status"] == "ok", a
assert a["summary"]["peak_allocated"] == b["summary"]["peak_allocated"], (a, b)
assert a["summary"]["final_loss"] == b["summary"]["final_loss"], (a, b)
' "named blocks json"
ok
"$OFFTUNE" run --model lm.pt "${W[@]}" --checkpoint all --blocks model.nothing --db x.db \
  >out.txt 2>err.txt
rc=$?
[ "$rc" -eq 2 ] || fail "--blocks model.nothing: exit $rc :: $(cat err.txt)"
[ "$(grep -c "^error: --blocks: blocks path 'model.nothing' " err.txt)" -eq 1 ] && [ "$(wc -l <err.txt)" -eq 1 ] \
  || fail "--blocks model.nothing: $(cat err.txt)"
ok

# An explicit token spec with a smaller vocabulary than the model's (ids stay in range).
"$OFFTUNE" run --model lm.pt "${W[@]}" --input-spec 'input_ids:int64[B,T]:vocab=100' --db x.db \
  --json >spec.json 2>/dev/null || fail "run with --input-spec"
py 'import json; d=json.load(open("spec.json")); assert d["status"]=="ok", d' "spec run json"
ok

# A dense model: x [B, T, 32] in, any tensor out (loss: its mean square).
"$PYTHON" - <<'EOF' || fail "dense export"
import warnings
import torch
warnings.filterwarnings("ignore", category=FutureWarning)
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 8))
torch.jit.save(torch.jit.trace(net, (torch.randn(2, 4, 32),)), "dense.pt")
EOF
"$OFFTUNE" run --model ./dense.pt "${W[@]}" --input-spec 'x:float32[B,T,32]' --db x.db --json \
  >dense.json 2>dense.err || fail "dense run: $(cat dense.err)"
py 'import json; d=json.load(open("dense.json")); assert d["status"]=="ok", d; assert d["summary"]["offloaded_bytes"] > 0, d' "dense json"
ok

# A model without blocks to find (a Sequential of three different layers) cannot checkpoint: a
# failed run saying to name them.
"$OFFTUNE" run --model ./dense.pt "${W[@]}" --input-spec 'x:float32[B,T,32]' --checkpoint all \
  --db x.db --json >dense_ckpt.json 2>/dev/null
rc=$?
[ "$rc" -eq 1 ] || fail "checkpointing a model without blocks: exit $rc"
py 'import json; d=json.load(open("dense_ckpt.json")); assert d["status"]=="failed" and "pass --blocks PATH" in d["error"] and "\n" not in d["error"], d' "dense checkpoint json"
ok

# A model whose output does not fit the spec is a failed run (exit 1), recorded with its error.
"$OFFTUNE" run --model ./dense.pt "${W[@]}" --db x.db --json >mismatch.json 2>/dev/null
rc=$?
[ "$rc" -eq 1 ] || fail "token spec on a dense model: exit $rc"
py 'import json; d=json.load(open("mismatch.json")); assert d["status"]=="failed" and d["error"], d' "mismatch json"
ok

expect_exit() {
  local code=$1 pattern=$2
  shift 2
  "$@" >out.txt 2>err.txt
  local rc=$?
  [ "$rc" -eq "$code" ] || fail "expected exit $code, got $rc: $* :: $(cat err.txt)"
  [ "$(grep -c "$pattern" err.txt)" -eq 1 ] || fail "no '$pattern' line for: $* :: $(cat err.txt)"
  ok
}
printf 'not a TorchScript archive\n' >bad.pt
expect_exit 2 "^error: cannot load TorchScript model 'bad.pt': " \
  "$OFFTUNE" run --model bad.pt "${W[@]}" --db x.db
expect_exit 2 "^error: cannot load TorchScript model 'nosuch.pt': no such file" \
  "$OFFTUNE" sweep --model nosuch.pt "${W[@]}" --db x.db
expect_exit 2 "^error: bad --input-spec 'tokens:int32\[B,T\]'" \
  "$OFFTUNE" run --model lm.pt "${W[@]}" --input-spec 'tokens:int32[B,T]' --db x.db
expect_exit 2 "^error: bad --input-spec" \
  "$OFFTUNE" run --model lm.pt "${W[@]}" --input-spec 'tokens:int64[B,T]' --db x.db
expect_exit 2 "^error: --input-spec applies to TorchScript models" \
  "$OFFTUNE" run --model gpt-tiny "${W[@]}" --input-spec 'x:float32[B,8]' --db x.db
expect_exit 2 "a .pt TorchScript file" "$OFFTUNE" run --model nosuch "${W[@]}" --db x.db

# The built-in GPT presets run too.
"$OFFTUNE" run --model gpt-tiny "${W[@]}" --db x.db --json >gpt.json 2>/dev/null || fail "gpt-tiny"
py 'import json; d=json.load(open("gpt.json")); assert d["status"]=="ok" and d["summary"]["offloaded_bytes"] > 0, d' "gpt-tiny json"
ok

passed_summary
