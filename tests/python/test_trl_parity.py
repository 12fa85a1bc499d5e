"""The drop-in picks the tensors TRL's own get_act_offloading_ctx_manager picks.

Both run on twins of one model, TRL's on the CPU as its "accelerator" (so that it offloads there);
every tensor that each one's pack hook sees is recorded with its decision, in order. The lists must
be equal: same tensors offloaded (count, shapes, dtypes, sizes), the output head outside both
(neither pack hook sees it), parameters kept by both.
"""

import itertools
import logging

import pytest
import torch
from conftest import BACKEND, DEVICE
from models import ARCHS, batches, build
from support import engine_options, twin

import offtune

pytestmark = pytest.mark.skipif(BACKEND != "host-sim", reason="TRL's side runs on the CPU")


def trl_context(model, monkeypatch, **kwargs):
    trl_ao = pytest.importorskip("trl.models.activation_offloading")
    # TRL offloads from the current accelerator's device type; make it the CPU, host-sim's device.
    with monkeypatch.context() as m:
        m.setattr(torch.accelerator, "current_accelerator", lambda *a, **k: DEVICE)
        ctx = trl_ao.get_act_offloading_ctx_manager(model, **kwargs)
    # torch's CPU stream stand-in has no synchronize(), which TRL's __exit__ calls; the CPU runs
    # everything in order anyway.
    monkeypatch.setattr(torch.cpu.Stream, "synchronize", lambda self: None, raising=False)
    decisions = []
    pack = ctx.pack_hook

    def recording_pack(t):
        tensor_id = pack(t)
        decisions.append(describe(t, offloaded=bool(ctx.tracker[tensor_id][1])))
        return tensor_id

    ctx.pack_hook = recording_pack
    return ctx, decisions


def offtune_context(model, **kwargs):
    ctx = offtune.get_act_offloading_ctx_manager(model, **kwargs, **engine_options())
    engine = ctx.offloader._engine
    decisions = []

    def make():
        forward = engine.forward()

        def recording_pack(t):
            before = engine.stats()["offloaded"]
            saved = forward.pack(t)
            decisions.append(describe(t, offloaded=engine.stats()["offloaded"] > before))
            return saved

        return recording_pack, offtune._offtune.unpack

    ctx._make = make
    return ctx, decisions


def describe(t, offloaded):
    return (tuple(t.shape), str(t.dtype), t.numel() * t.element_size(), offloaded)


def step(model, ctx, batch):
    with ctx:
        loss = model(**batch).loss
    loss.backward()


CASES = list(itertools.product(ARCHS, (False, True), (False, True)))


@pytest.mark.parametrize("arch, use_streams, lora", CASES,
                         ids=[f"{a}-{'streams' if s else 'single'}{'-lora' if lo else ''}"
                              for a, s, lo in CASES])
def test_same_tensors_offloaded_as_trl(arch, use_streams, lora, monkeypatch):
    model = build(arch, lora=lora)
    other = twin(model)
    batch = batches(n=1)[0]
    args = dict(use_pin_memory=False, use_streams=use_streams, min_offload_size=1024,
                max_fwd_stash_size=2, warn_if_no_head=False)
    trl_ctx, trl_decisions = trl_context(model, monkeypatch, **args)
    ours, our_decisions = offtune_context(other, **args)
    for _ in range(2):
        step(model, trl_ctx, batch)
        step(other, ours, batch)
    assert any(d[3] for d in trl_decisions), "TRL offloaded nothing: the comparison says nothing"
    assert our_decisions == trl_decisions


def test_without_a_head_it_warns_unless_told_not_to(caplog):
    model = torch.nn.Sequential(torch.nn.Linear(8, 8)).to(DEVICE)
    with caplog.at_level(logging.WARNING, logger="offtune.trl"):
        ctx = offtune.get_act_offloading_ctx_manager(model, **engine_options())
    assert ctx.excluded == []
    assert "no output head found" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="offtune.trl"):
        offtune.get_act_offloading_ctx_manager(model, warn_if_no_head=False, **engine_options())
    assert caplog.text == ""


def test_the_head_is_found_through_peft_and_liger_modules_are_kept_out():
    llama = build("llama", lora=True)
    llama.base_model.model.model.liger_fused = torch.nn.Linear(4, 4)
    ctx = offtune.get_act_offloading_ctx_manager(llama, **engine_options())
    assert ctx.excluded[0] is llama.base_model.model.lm_head
    assert ctx.excluded[1:] == [llama.base_model.model.model.liger_fused]
