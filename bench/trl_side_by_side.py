"""offtune beside TRL's OffloadActivations on one Hugging Face Llama: step time, peak memory,
gradients.

One random-weight LlamaForCausalLM (the shapes of offtune's `1b` preset by default: hidden 2048,
16 layers, 32 heads, 8 KV heads, FFN 8192, vocabulary 128256), one fixed batch, and these
configurations, each on a fresh copy of the model built from the same seed:

- ``none``: no offloading (the baseline, run twice: the second run is the noise floor of the
  gradient comparison, since some attention kernels' backward is not bit-reproducible);
- ``trl``: TRL's get_act_offloading_ctx_manager with its defaults (pinned, streams, 1 KiB, 5);
- ``offtune-trl-knobs``: offtune's drop-in with the same knobs (TRL's semantics);
- ``offtune-*``: offtune's own semantics (prefetch) at a few larger thresholds and windows;
  ``best`` names the fastest of them whose peak is at most TRL's.

Per configuration: warm-up steps, then measured steps (forward + backward, gradients dropped after
each), each timed between two device synchronisations; the median and range of the step time,
the peak allocated device memory over the measured steps (the allocator's peak, reset at each
step, less what was allocated before this configuration's model was built, after a garbage
collection: the model, its gradients and its activations; also the peak by the end of the forward,
to tell the window's share from the reloads'), the peak reserved memory, the offloaded bytes, and
the largest gradient difference from the baseline.
Prints a Markdown table, and with --json one JSON object. It measures; it asserts nothing.

    python bench/trl_side_by_side.py --batch 1 --seq 4096          # on a GPU
    python bench/trl_side_by_side.py --device cpu --preset tiny    # a smoke run anywhere

Also measures the pinned host link (--bandwidth): device-to-host and host-to-device copies of
256 MiB, the median of 10, in bytes per second.
"""

import argparse
import gc
import json
import statistics
import sys
import time

PRESETS = {
    # hidden, layers, heads, kv heads, ffn, vocabulary
    "1b": (2048, 16, 32, 8, 8192, 128256),
    "small": (256, 4, 8, 4, 688, 4096),
    "tiny": (64, 2, 4, 2, 172, 512),
}


def link_bandwidth(torch, nbytes: int = 256 << 20, reps: int = 10) -> dict:
    dev = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    out = {}
    for name, dst, src in (("d2h", host, dev), ("h2d", dev, host)):
        times = []
        for _ in range(reps + 2):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            dst.copy_(src, non_blocking=True)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        med = statistics.median(times[2:])
        out[name] = {"bytes": nbytes, "seconds_median": med, "bytes_per_second": nbytes / med,
                     "min_s": min(times[2:]), "max_s": max(times[2:])}
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", choices=sorted(PRESETS), default="1b")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--seq", type=int, default=4096)
    p.add_argument("--dtype", choices=("bf16", "fp32"), default="bf16")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--only", default="", help="comma-separated configuration names to run")
    p.add_argument("--bandwidth", action="store_true", help="also measure the pinned link")
    p.add_argument("--attn", choices=("sdpa", "eager"), default="sdpa",
                   help="attention implementation "
                        "(eager with --deterministic: a bit-exact baseline)")
    p.add_argument("--deterministic", action="store_true",
                   help="torch.use_deterministic_algorithms (warn only), so that two baseline runs "
                        "agree bit for bit and any gradient difference is offloading's")
    p.add_argument("--json", default="", help="write the results to this file")
    args = p.parse_args()
    if args.batch < 1 or args.seq < 2 or args.steps < 1 or args.warmup < 0:
        print("error: --batch >= 1, --seq >= 2, --steps >= 1, --warmup >= 0", file=sys.stderr)
        return 2

    if args.deterministic:
        import os

        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # before CUDA starts
    import torch
    import transformers as tf

    import offtune

    if args.deterministic:
        torch.use_deterministic_algorithms(True, warn_only=True)

    try:
        from trl.models import activation_offloading as trl_ao
    except ImportError as e:
        print(f"error: TRL cannot be imported ({e}); pip install trl", file=sys.stderr)
        return 2
    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        print("error: --device cuda but torch sees no GPU", file=sys.stderr)
        return 2
    if not cuda:
        offtune.host_sim.install()
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    hidden, layers, heads, kv, ffn, vocab = PRESETS[args.preset]
    config = tf.LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=ffn,
                            num_hidden_layers=layers, num_attention_heads=heads,
                            num_key_value_heads=kv, max_position_embeddings=max(args.seq, 128),
                            rope_theta=500000.0, attn_implementation=args.attn)
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, vocab, (args.batch, args.seq), generator=gen).to(args.device)

    def sync():
        if cuda:
            torch.cuda.synchronize()

    def fresh_model():
        torch.manual_seed(0)
        with torch.device(args.device):
            m = tf.LlamaForCausalLM(config).to(dtype)
        m.train()
        return m

    def trl_ctx(m):
        if cuda:
            return trl_ao.get_act_offloading_ctx_manager(m)
        return None

    never = 1 << 50
    configs = [
        ("none", lambda m: None),
        ("none-again", lambda m: None),
        ("trl", trl_ctx),
        ("offtune-trl-knobs", lambda m: offtune.get_act_offloading_ctx_manager(m)),
        ("offtune-keep-all", lambda m: offtune.get_act_offloading_ctx_manager(
            m, min_offload_size=never)),
    ]
    for size in ("1MiB", "16MiB"):
        for window in (2, 5):
            configs.append((f"offtune-{size}-w{window}", lambda m, s=size, w=window:
                            offtune.get_act_offloading_ctx_manager(
                                m, semantics="offtune", min_offload_size=s,
                                max_fwd_stash_size=w, prefetch=1)))
    if args.only:
        wanted = set(args.only.split(","))
        configs = [c for c in configs if c[0] in wanted or c[0] == "none"]

    results = {}
    baseline_grads = None
    first_start = None
    for name, make in configs:
        # What the previous configuration left (a model kept alive by a reference cycle of hooks
        # until the collector runs) must not count against this one: collect it, and measure
        # peaks above what is allocated before this configuration's model exists.
        gc.collect()
        if cuda:
            torch.cuda.empty_cache()
            start = torch.cuda.memory_allocated()
            first_start = start if first_start is None else first_start
        model = fresh_model()
        ctx = make(model)
        if name == "trl" and ctx is None:
            continue
        import contextlib

        peaks = {"forward": 0, "step": 0}

        def step(model=model, ctx=ctx, peaks=peaks):
            if cuda:
                torch.cuda.reset_peak_memory_stats()
            with ctx if ctx is not None else contextlib.nullcontext():
                loss = model(input_ids=ids, labels=ids).loss
            if cuda:  # where the peak is: forward (the window) or backward (the reloads)
                peaks["forward"] = max(peaks["forward"], torch.cuda.max_memory_allocated())
            loss.backward()
            if cuda:
                peaks["step"] = max(peaks["step"], torch.cuda.max_memory_allocated())
            return loss

        loss0 = step().item()
        grads = [q.grad.detach().clone() for q in model.parameters()]
        model.zero_grad(set_to_none=True)
        diff, identical = None, None
        if baseline_grads is None:
            baseline_grads, baseline_loss = grads, loss0
        else:
            diff = max((a.float() - b.float()).abs().max().item()
                       for a, b in zip(grads, baseline_grads, strict=True))
            identical = all(torch.equal(a, b) for a, b in zip(grads, baseline_grads, strict=True))
        del grads
        for _ in range(max(args.warmup - 1, 0)):
            step()
            model.zero_grad(set_to_none=True)
        sync()
        if cuda:
            torch.cuda.reset_peak_memory_stats()
            reserved0 = torch.cuda.memory_reserved()
        peaks.update(forward=0, step=0)
        times = []
        for _ in range(args.steps):
            sync()
            t0 = time.perf_counter()
            step()
            model.zero_grad(set_to_none=True)
            sync()
            times.append((time.perf_counter() - t0) * 1e3)
        r = {"step_ms_median": statistics.median(times), "step_ms_min": min(times),
             "step_ms_max": max(times), "loss": loss0, "loss_equal": loss0 == baseline_loss,
             "max_grad_diff": diff, "grads_identical": identical}
        if cuda:
            r["peak_allocated"] = peaks["step"] - start
            r["peak_allocated_forward"] = peaks["forward"] - start
            r["left_by_earlier"] = start - first_start
            r["peak_reserved"] = max(torch.cuda.max_memory_reserved(), reserved0)
        off = getattr(ctx, "offloader", None)
        if off is not None:
            s = off.stats()
            r.update({k: s.get(k) for k in ("offloaded", "offloaded_bytes", "prefetch_dropped",
                                              "pageable_fallbacks")})
        results[name] = r
        print(f"{name}: {r}", flush=True)
        del model, ctx, step, off
        if cuda:
            torch.cuda.empty_cache()

    trl = results.get("trl")
    fits = {k: v for k, v in results.items() if k.startswith("offtune-") and k != "offtune-keep-all"
            and (trl is None or v.get("peak_allocated", 0) <= trl.get("peak_allocated", 0))}
    best = min(fits, key=lambda k: fits[k]["step_ms_median"]) if fits else None
    out = {"device": torch.cuda.get_device_name(0) if cuda else "cpu (host-sim)",
           "torch": torch.__version__, "preset": args.preset, "batch": args.batch,
           "seq": args.seq, "dtype": args.dtype, "attn": args.attn,
           "deterministic": args.deterministic, "steps": args.steps, "warmup": args.warmup,
           "results": results, "best": best}
    if cuda and args.bandwidth:
        out["link"] = link_bandwidth(torch)

    gib = 1 << 30
    print(f"\n{out['device']}, torch {out['torch']}, Llama {args.preset}, batch {args.batch}, "
          f"seq {args.seq}, {args.dtype}, attention {args.attn}"
          f"{', deterministic' if args.deterministic else ''}; {args.steps} measured steps after "
          f"{args.warmup}")
    print("| configuration | step ms median (min-max) | vs TRL | peak alloc GiB (forward) "
          "| peak reserved GiB | offloaded | loss equal | gradients identical (max diff) |")
    print("|---|---|---|---|---|---|---|---|")
    for name, r in results.items():
        rel = (f"{r['step_ms_median'] / trl['step_ms_median']:.2f}x" if trl else "")
        tag = " (best)" if name == best else ""
        print(f"| {name}{tag} | {r['step_ms_median']:.1f} ({r['step_ms_min']:.1f}-"
              f"{r['step_ms_max']:.1f}) | {rel} | {r.get('peak_allocated', 0) / gib:.2f} "
              f"({r.get('peak_allocated_forward', 0) / gib:.2f}) | "
              f"{r.get('peak_reserved', 0) / gib:.2f} | {r.get('offloaded', '')} | "
              f"{r['loss_equal']} | {r['grads_identical']} ({r['max_grad_diff']}) |")
    left = {k: v["left_by_earlier"] for k, v in results.items() if v.get("left_by_earlier")}
    if left:
        print("still allocated from earlier configurations after a collection (not counted above): "
              + ", ".join(f"{k} {v / gib:.2f} GiB" for k, v in left.items()))
    if "link" in out:
        for k, v in out["link"].items():
            print(f"pinned {k}: {v['bytes_per_second'] / 1e9:.1f} GB/s (median of 10 x 256 MiB)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
