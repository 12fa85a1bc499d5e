#!/usr/bin/env python3
"""Export a tiny causal language model as a TorchScript file for `offtune --model PATH.pt`.

The model is written here in plain torch, laid out the way Hugging Face causal LMs are (a config
object, a base model with token and position embeddings, pre-LayerNorm decoder blocks and a final
norm, and a `lm_head` on top; `forward(input_ids)` returns logits [batch, seq, vocab]), so that
`offtune` can be tried on a TorchScript workload without the `transformers` package. It is traced
with torch.jit.trace and saved; the script prints the path. Then:

    offtune sweep --model tiny_lm.pt --input-spec "input_ids:int64[B,T]:vocab=512" --db s.db

(the default --input-spec is "tokens:int64[B,T]:vocab=512"; give --vocab's value there).

A trace fixes the dtype of what it records besides the parameters (constants, masks, casts), so
`offtune --dtype bf16` on a model traced in fp32 fails in the TorchScript interpreter (`expected m1
and m2 to have the same dtype`): trace in the dtype you will run, `--dtype bf16` here (or
`model.to(torch.bfloat16)` before torch.jit.trace for a Hugging Face model), and give offtune the
same `--dtype`.

Exporting a real Hugging Face model instead: load it with `torchscript=True` in its config
(`AutoModelForCausalLM.from_pretrained(name, torchscript=True)`), which makes its forward return a
plain tuple whose first element is the logits, and puts it in a state that tracing accepts. Wrap
it in a small torch.nn.Module whose forward(input_ids) calls the model with that one argument (no
attention mask, no cache: `use_cache=False`) and returns element 0 of the result, call `.train()`
on the wrapper if the model should be traced in training mode (dropout is baked into the trace as
it was), then torch.jit.trace the wrapper on an example int64 tensor of token ids of shape [batch,
seq] on the CPU, and torch.jit.save the result. Give offtune the tokenizer's vocabulary size in
`--input-spec "input_ids:int64[B,T]:vocab=V"`. A trace records the code path taken for the
example input, so shapes that change control flow (a sequence longer than the model's positions,
for instance) need an example that takes the same path as the runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
import warnings

import torch
from torch import nn
from torch.nn import functional as F


@dataclasses.dataclass
class TinyLMConfig:
    vocab_size: int = 512
    hidden_size: int = 64
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    max_position_embeddings: int = 128
    layer_norm_eps: float = 1e-5
    dropout: float = 0.0  # on each residual branch, as GPT-2's resid_pdrop

    @property
    def intermediate_size(self) -> int:
        return 4 * self.hidden_size

    def validate(self) -> None:
        for field in ("vocab_size", "hidden_size", "num_attention_heads",
                      "max_position_embeddings"):
            if getattr(self, field) <= 0:
                raise ValueError(f"{field} must be > 0, got {getattr(self, field)}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.num_hidden_layers < 0:
            raise ValueError(f"num_hidden_layers must be >= 0, got {self.num_hidden_layers}")
        if self.hidden_size % self.num_attention_heads != 0:
            raise ValueError(f"num_attention_heads ({self.num_attention_heads}) must divide "
                             f"hidden_size ({self.hidden_size})")


class TinyEmbeddings(nn.Module):
    """Token plus learned position embeddings."""

    def __init__(self, config: TinyLMConfig) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        # Positions derived from the input itself rather than torch.arange: a trace would record
        # arange's length and device as constants, and the file would then only run at the example's
        # sequence length and on the device it was traced on.
        position_ids = torch.cumsum(torch.ones_like(input_ids), dim=1) - 1
        return self.word_embeddings(input_ids) + self.position_embeddings(position_ids)


class TinySelfAttention(nn.Module):
    def __init__(self, config: TinyLMConfig) -> None:
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.head_dim = config.hidden_size // config.num_attention_heads
        self.query_key_value = nn.Linear(config.hidden_size, 3 * config.hidden_size)
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        batch, seq, width = hidden.shape
        q, k, v = self.query_key_value(hidden).split(width, dim=-1)
        # [B, T, heads * d] -> [B, heads, T, d] for scaled_dot_product_attention.
        q, k, v = (x.view(batch, seq, self.num_heads, self.head_dim).transpose(1, 2)
                   for x in (q, k, v))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.dense(out.transpose(1, 2).reshape(batch, seq, width))


class TinyFeedForward(nn.Module):
    def __init__(self, config: TinyLMConfig) -> None:
        super().__init__()
        self.up_proj = nn.Linear(config.hidden_size, config.intermediate_size)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.gelu(self.up_proj(hidden), approximate="tanh"))


class TinyDecoderLayer(nn.Module):
    """Pre-norm residual block: attention then feed-forward, each behind its own LayerNorm."""

    def __init__(self, config: TinyLMConfig) -> None:
        super().__init__()
        self.input_layernorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.self_attn = TinySelfAttention(config)
        self.post_attention_layernorm = nn.LayerNorm(config.hidden_size,
                                                     eps=config.layer_norm_eps)
        self.mlp = TinyFeedForward(config)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        hidden = hidden + self.dropout(self.self_attn(self.input_layernorm(hidden)))
        return hidden + self.dropout(self.mlp(self.post_attention_layernorm(hidden)))


class TinyModel(nn.Module):
    """The base model: embeddings, decoder layers, final norm; returns hidden states."""

    def __init__(self, config: TinyLMConfig) -> None:
        super().__init__()
        self.embeddings = TinyEmbeddings(config)
        self.layers = nn.ModuleList(TinyDecoderLayer(config)
                                    for _ in range(config.num_hidden_layers))
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        hidden = self.embeddings(input_ids)
        for layer in self.layers:
            hidden = layer(hidden)
        return self.norm(hidden)


class TinyForCausalLM(nn.Module):
    def __init__(self, config: TinyLMConfig) -> None:
        super().__init__()
        config.validate()
        self.config = config
        self.model = TinyModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self._init_weights()

    def _init_weights(self) -> None:
        # N(0, 0.02) for matrices and embeddings, output projections of the residual branches
        # scaled down with depth so that the residual stream's variance does not grow; zero
        # biases; LayerNorms at identity.
        residual_std = 0.02 / math.sqrt(2 * max(self.config.num_hidden_layers, 1))
        for name, param in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(param)
            elif param.dim() == 1:
                nn.init.ones_(param)
            else:
                residual = name.endswith(("dense.weight", "down_proj.weight"))
                nn.init.normal_(param, 0.0, residual_std if residual else 0.02)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.lm_head(self.model(input_ids))


# offtune's --dtype names.
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="TorchScript file to write (e.g. tiny_lm.pt)")
    parser.add_argument("--vocab", type=int, default=512, help="vocabulary size")
    parser.add_argument("--dim", type=int, default=64, help="hidden size")
    parser.add_argument("--layers", type=int, default=2, help="decoder layers")
    parser.add_argument("--heads", type=int, default=4, help="attention heads (divide --dim)")
    parser.add_argument("--seq", type=int, default=128, help="maximum sequence length")
    parser.add_argument("--seed", type=int, default=0, help="seed of the weights")
    parser.add_argument("--dropout", type=float, default=0.0,
                        help="dropout probability on each residual branch (traced in training "
                             "mode: offtune seeds it per step from --seed)")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="fp32",
                        help="dtype to trace in: run the file with the same offtune --dtype")
    args = parser.parse_args(argv)
    # torch 2.x marks torch.jit deprecated in favour of torch.export; libtorch still loads
    # TorchScript files and torch.export has no C++ loader for training, so the notice is noise.
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"torch\.jit")

    config = TinyLMConfig(vocab_size=args.vocab, hidden_size=args.dim,
                          num_hidden_layers=args.layers, num_attention_heads=args.heads,
                          max_position_embeddings=args.seq, dropout=args.dropout)
    try:
        torch.manual_seed(args.seed)
        model = TinyForCausalLM(config).to(DTYPES[args.dtype]).train()
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    generator = torch.Generator().manual_seed(args.seed)
    example = torch.randint(0, args.vocab, (2, min(8, args.seq)), generator=generator)
    # Dropout draws differ from call to call: trace's own check of two calls would fail on them.
    traced = torch.jit.trace(model, (example,), check_trace=args.dropout == 0)
    # The trace must not have frozen the example's shape: check it against the eager model at
    # another batch size and the longest sequence.
    probe = torch.randint(0, args.vocab, (3, args.seq), generator=generator)
    with torch.no_grad():
        # The same kernels run in both: only reduced precision's rounding may differ. Each call
        # draws the same dropout masks from the same seed.
        tolerance = 1e-5 if args.dtype == "fp32" else 2e-2
        torch.manual_seed(args.seed)
        got = traced(probe).float()
        torch.manual_seed(args.seed)
        want = model(probe).float()
        if not torch.allclose(got, want, atol=tolerance, rtol=100 * tolerance):
            print("error: the traced model differs from the eager one at another shape",
                  file=sys.stderr)
            return 1

    out_dir = os.path.dirname(os.path.abspath(args.out))
    os.makedirs(out_dir, exist_ok=True)
    torch.jit.save(traced, args.out)
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
