"""The Python floor of saved-tensor hooks, for offtune-bench's hook section.

Runs the hook section's workload in PyTorch: a forward+backward of a chain of `sin` on float32
tensors of a given size (each sin saves its input), once without hooks and once under
torch.autograd.graph.saved_tensors_hooks with no-op pack/unpack functions, interleaved, on one
intra-op thread. Prints one JSON object: the median pass times, and the median over repetitions of
(hooked - plain) / chain in ns per saved tensor, with its spread (min and max over repetitions) and
the same from the fastest pass of each (noise only adds time).

    python bench/python_floor.py --chain 2000 --tensor-bytes 4096 --repetitions 15

It measures; it asserts nothing. offtune-bench runs it with the Python that has torch.
"""

import argparse
import json
import statistics
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chain", type=int, default=2000)
    parser.add_argument("--tensor-bytes", type=int, default=4096)
    parser.add_argument("--repetitions", type=int, default=15)
    args = parser.parse_args()
    if args.chain < 1 or args.tensor_bytes < 4 or args.repetitions < 1:
        print("error: --chain, --repetitions must be >= 1 and --tensor-bytes >= 4", file=sys.stderr)
        return 2

    import torch  # imported late: --help works without it

    torch.set_num_threads(1)
    x = torch.randn(args.tensor_bytes // 4).requires_grad_()

    def one_pass(hooked: bool) -> float:
        start = time.perf_counter_ns()
        y = x
        if hooked:
            with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
                for _ in range(args.chain):
                    y = y.sin()
        else:
            for _ in range(args.chain):
                y = y.sin()
        y.sum().backward()
        elapsed = time.perf_counter_ns() - start
        x.grad = None
        return float(elapsed)

    one_pass(False)
    one_pass(True)
    plain, hooked = [], []
    for _ in range(args.repetitions):
        plain.append(one_pass(False))
        hooked.append(one_pass(True))
    per_tensor = [(h - p) / args.chain for p, h in zip(plain, hooked, strict=True)]
    print(
        json.dumps(
            {
                "torch": torch.__version__,
                "chain": args.chain,
                "tensor_bytes": args.tensor_bytes,
                "repetitions": args.repetitions,
                "plain_pass_ms": statistics.median(plain) / 1e6,
                "hooked_pass_ms": statistics.median(hooked) / 1e6,
                "ns_per_saved_tensor": statistics.median(per_tensor),
                "ns_per_saved_tensor_min": min(per_tensor),
                "ns_per_saved_tensor_max": max(per_tensor),
                "ns_per_saved_tensor_best": (min(hooked) - min(plain)) / args.chain,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
