"""Hugging Face decoders trained under offtune: loss and every gradient bit for bit as without it.

Llama, GPT-2 and GPT-NeoX from tiny configs, fp32 and CPU autocast bf16, with and without Hugging
Face's non-reentrant gradient checkpointing, full fine-tuning and a PEFT LoRA adapter; 3 AdamW
steps each, on host-sim with poisoned frees, immediate reuse and stream-order checks.
"""

import itertools

import pytest
from models import ARCHS, batches, build
from support import assert_same_training, engine_options, train, twin

import offtune

CASES = list(itertools.product(ARCHS, (False, True), (False, True), (False, True)))


def case_id(case):
    arch, bf16, ckpt, lora = case
    return f"{arch}-{'bf16' if bf16 else 'fp32'}{'-ckpt' if ckpt else ''}{'-lora' if lora else ''}"


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_the_drop_in_trains_bit_identically(case):
    arch, bf16, ckpt, lora = case
    model = build(arch, lora=lora, checkpointing=ckpt)
    other = twin(model)
    data = batches()
    ref = train(model, data, autocast=bf16)
    ctx = offtune.get_act_offloading_ctx_manager(other, min_offload_size=256, max_fwd_stash_size=2,
                                                 warn_if_no_head=False, **engine_options())
    got = train(other, data, ctx=ctx, autocast=bf16)
    assert_same_training(ref, got)
    off = ctx.offloader
    assert off.stats()["offloaded"] > 0
    off.synchronize()
    assert off.resident()["resting"], off.resident()


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("bf16", (False, True), ids=("fp32", "bf16"))
def test_offtune_semantics_with_prefetch_train_bit_identically(arch, bf16):
    model = build(arch, lora=True)
    other = twin(model)
    data = batches()
    ref = train(model, data, autocast=bf16)
    off = offtune.Offloader(**engine_options(min_offload_size=0, max_fwd_stash_size=3,
                                             max_fwd_stash_bytes="16KiB", prefetch=2,
                                             semantics="offtune"))
    off.never_offload_parameters(other)
    got = train(other, data, ctx=off.scope(), autocast=bf16)
    assert_same_training(ref, got)
    stats = off.stats()
    assert stats["offloaded"] > 0 and stats["prefetched"] > 0
    off.synchronize()
    assert off.resident()["resting"], off.resident()


@pytest.mark.parametrize("ckpt", (False, True), ids=("plain", "ckpt"))
def test_layer_offloading_of_a_lora_base_trains_bit_identically(ckpt):
    model = build("llama", lora=True, checkpointing=ckpt)
    other = twin(model)
    data = batches()
    ref = train(model, data)
    off = offtune.Offloader(**engine_options(min_offload_size=256))
    layers = offtune.offload_decoder_layers(other, off, depth=1)
    assert layers.blocks == 2
    got = train(other, data, ctx=off.scope())
    assert_same_training(ref, got)
    stats = layers.stats()
    assert stats["frozen_bytes"] > 0 and stats["loads"] > 0
