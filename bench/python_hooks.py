"""Per saved tensor: offtune's Python-path hooks next to TRL's pure-Python hooks, one model,
one run.

Both keep every tensor (min_offload_size above any tensor: nothing offloaded), so what is measured
is the hooks' own cost: TRL's OffloadActivations (pip package trl) with the CPU as its
accelerator, and offtune's drop-in (C++ pack/unpack through torch's saved_tensors_hooks, TRL
semantics), beside two floors: Python no-op hooks (lambda t: t) and offtune's C++ keep-as-is hook.
Each repetition runs one forward+backward of every variant, interleaved, on one intra-op thread;
a variant's cost per saved tensor is (its pass - the plain pass of the same repetition) / saved
tensors per pass. Prints a table (median and the spread between the 25th and 75th percentiles, in
ns per saved tensor) and, with --json, one JSON object.

    PYTHONPATH=build/ci/python ~/.cache/offtune/venv/bin/python bench/python_hooks.py

Target (issue 31): offtune's cost at most TRL's. It measures; it asserts nothing.
"""

import argparse
import json
import statistics
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=30)
    parser.add_argument("--layers", type=int, default=4, help="decoder layers of the tiny Llama")
    parser.add_argument("--seq", type=int, default=32)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.repetitions < 3 or args.layers < 1 or args.seq < 1:
        print("error: --repetitions >= 3, --layers and --seq >= 1", file=sys.stderr)
        return 2

    import torch
    import transformers as tf
    from torch.autograd.graph import saved_tensors_hooks

    import offtune

    try:
        from trl.models import activation_offloading as trl_ao
    except ImportError:
        print("error: TRL is not installed (pip install trl)", file=sys.stderr)
        return 2

    torch.set_num_threads(1)
    offtune.host_sim.install()
    torch.manual_seed(0)
    config = tf.LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128,
                            num_hidden_layers=args.layers, num_attention_heads=4,
                            num_key_value_heads=2, max_position_embeddings=max(64, args.seq))
    model = tf.AutoModelForCausalLM.from_config(config)
    model.train()
    ids = torch.randint(0, 256, (2, args.seq))
    batch = {"input_ids": ids, "labels": ids}
    never = 1 << 40  # above any tensor: both keep everything
    # Each drop-in registers hooks on its model's head: one twin each, so that no pass runs the
    # other's. The twins are copies of one model (same weights, same ops).
    import copy

    trl_model, our_model = copy.deepcopy(model), copy.deepcopy(model)

    # TRL's context, with the CPU as its accelerator so that its rules run in full.
    real = torch.accelerator.current_accelerator
    torch.accelerator.current_accelerator = lambda *a, **k: torch.device("cpu")
    try:
        trl_ctx = trl_ao.get_act_offloading_ctx_manager(trl_model, use_pin_memory=False,
                                                        min_offload_size=never,
                                                        warn_if_no_head=False)
    finally:
        torch.accelerator.current_accelerator = real
    if not hasattr(torch.cpu.Stream, "synchronize"):
        # TRL's __exit__ synchronizes its streams; torch's CPU stand-in has no synchronize().
        torch.cpu.Stream.synchronize = lambda self: None
    ours = offtune.get_act_offloading_ctx_manager(our_model, min_offload_size=never,
                                                  warn_if_no_head=False, backend="host-sim")

    def identity(t):
        return t

    # name: (model, context maker)
    variants = {
        "plain": (model, None),
        "python no-op hooks": (model, lambda: saved_tensors_hooks(identity, identity)),
        "offtune C++ keep hook": (model, lambda: saved_tensors_hooks(offtune._offtune.pack_kept,
                                                                     offtune._offtune.unpack)),
        "TRL OffloadActivations": (trl_model, lambda: trl_ctx),
        "offtune drop-in": (our_model, lambda: ours),
    }

    counted = []

    def count(t):
        counted.append(1)
        return t

    with saved_tensors_hooks(count, identity):
        model(**batch).loss.backward()
    saved = len(counted)
    model.zero_grad(set_to_none=True)

    def one_pass(variant) -> int:
        net, make = variant
        start = time.perf_counter_ns()
        if make is None:
            loss = net(**batch).loss
        else:
            with make():
                loss = net(**batch).loss
        loss.backward()
        elapsed = time.perf_counter_ns() - start
        net.zero_grad(set_to_none=True)
        return elapsed

    for variant in variants.values():  # warm-up
        one_pass(variant)
    per_tensor = {name: [] for name in variants if name != "plain"}
    passes = {name: [] for name in variants}
    for _ in range(args.repetitions):
        times = {name: one_pass(variant) for name, variant in variants.items()}
        for name, t in times.items():
            passes[name].append(t)
            if name != "plain":
                per_tensor[name].append((t - times["plain"]) / saved)

    def quartiles(values):
        q = statistics.quantiles(values, n=4)
        return q[0], statistics.median(values), q[2]

    result = {"saved_tensors_per_pass": saved, "repetitions": args.repetitions,
              "plain_pass_ms": statistics.median(passes["plain"]) / 1e6, "ns_per_saved_tensor": {}}
    print(f"tiny Llama ({args.layers} layers, seq {args.seq}): {saved} saved tensors per "
          f"forward+backward, plain pass {result['plain_pass_ms']:.2f} ms (median of "
          f"{args.repetitions})")
    print(f"{'hooks':<26}{'ns per saved tensor above plain: median':>42}{'  [p25, p75]':>20}")
    for name, values in per_tensor.items():
        lo, med, hi = quartiles(values)
        result["ns_per_saved_tensor"][name] = {"median": med, "p25": lo, "p75": hi}
        print(f"{name:<26}{med:>42.0f}  [{lo:>7.0f}, {hi:>7.0f}]")
    ratio = (result["ns_per_saved_tensor"]["offtune drop-in"]["median"]
             / result["ns_per_saved_tensor"]["TRL OffloadActivations"]["median"])
    result["offtune_over_trl"] = ratio
    print(f"offtune drop-in / TRL: {ratio:.2f} (target: at most 1)")
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
