"""A small training script as a user writes one: a random-weight Hugging Face Llama, AdamW, and
TRL's activation-offloading context (here offtune's drop-in, imported as TRL's would be).

    python train_tiny.py --steps 6
    python -m torch.distributed.run --standalone --nproc-per-node 2 train_tiny.py --steps 4

`offtune sweep --script "python train_tiny.py --steps 6"` measures it at every grid point: the
drop-in takes each point's settings and records the run (docs/python.md). Under torchrun
(WORLD_SIZE > 1) it trains with DDP over gloo, on the CPU or one GPU per rank. --out DIR writes
each rank's last gradients and final weights to DIR/rank<R>.pt, for comparing runs.
"""

import argparse
import contextlib
import os

import torch
import transformers as tf


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seq", type=int, default=32)
    parser.add_argument("--no-offload", action="store_true", help="train without offloading")
    parser.add_argument("--min-offload-size", type=int, default=1024)
    parser.add_argument("--out", help="write each rank's gradients and weights here")
    parser.add_argument("--fail-at", type=int, default=-1, help="raise at this step (tests)")
    args = parser.parse_args()

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world > 1:
        torch.distributed.init_process_group("gloo")
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) \
        if torch.cuda.is_available() else torch.device("cpu")
    torch.set_num_threads(1)  # the runs compared bit for bit use the same kernels

    torch.manual_seed(0)
    config = tf.LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128,
                            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                            max_position_embeddings=128)
    model = tf.LlamaForCausalLM(config).to(device)
    model.train()
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    if args.no_offload:
        ctx = contextlib.nullcontext()
    else:
        from offtune import get_act_offloading_ctx_manager

        ctx = get_act_offloading_ctx_manager(model, min_offload_size=args.min_offload_size)

    data = torch.Generator().manual_seed(1 + rank)  # each rank its own batches
    grads = {}
    for step in range(args.steps):
        ids = torch.randint(0, config.vocab_size, (args.batch, args.seq), generator=data)
        ids = ids.to(device)
        if step == args.fail_at:
            raise RuntimeError(f"train_tiny: failing at step {step} as asked")
        with ctx:
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()
                 if p.grad is not None}
        opt.step()
        opt.zero_grad(set_to_none=True)
        if rank == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)

    if args.out:
        weights = {n: p.detach().clone() for n, p in model.named_parameters()}
        torch.save({"grads": grads, "weights": weights}, os.path.join(args.out, f"rank{rank}.pt"))
    # No destroy_process_group(): with gloo, torch 2.15 aborts in it now and then ("terminate
    # called without an active exception", 1 run in 8 of a plain DDP script without offtune);
    # the process's exit ends the group as well.


if __name__ == "__main__":
    main()
