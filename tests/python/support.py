"""Helpers shared by the Python tests: bitwise comparison and training steps."""

import copy

import torch
from conftest import BACKEND, DEBUG, DEVICE


def engine_options(**options):
    """Options for a test offloader: the test backend and its debug checks, then `options`."""
    return {"backend": BACKEND, **DEBUG, **options}


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.detach().reshape(-1).contiguous().view(torch.uint8).cpu()


def assert_bitwise_equal(ref, got, what=""):
    assert (ref is None) == (got is None), what
    if ref is None:
        return
    assert ref.dtype == got.dtype and ref.shape == got.shape, what
    assert torch.equal(bits(ref), bits(got)), f"{what}: values differ"


def train(model, batches, ctx=None, steps=3, autocast=False, lr=1e-2):
    """`steps` optimizer steps; returns per step the loss and every parameter's gradient."""
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    record = []
    for step in range(steps):
        batch = batches[step % len(batches)]
        torch.manual_seed(1000 + step)  # dropout masks: the same in both runs
        with torch.autocast(DEVICE.type, dtype=torch.bfloat16, enabled=autocast):
            if ctx is not None:
                with ctx:
                    loss = model(**batch).loss
            else:
                loss = model(**batch).loss
        loss.backward()
        grads = {n: (p.grad.clone() if p.grad is not None else None)
                 for n, p in model.named_parameters() if p.requires_grad}
        record.append((loss.detach().clone(), grads))
        opt.step()
        opt.zero_grad(set_to_none=True)
    return record


def assert_same_training(ref, got):
    assert len(ref) == len(got)
    pairs = zip(ref, got, strict=True)
    for step, ((ref_loss, ref_grads), (got_loss, got_grads)) in enumerate(pairs):
        assert_bitwise_equal(ref_loss, got_loss, f"step {step} loss")
        assert ref_grads.keys() == got_grads.keys()
        for name in ref_grads:
            assert_bitwise_equal(ref_grads[name], got_grads[name], f"step {step} grad {name}")


def twin(model):
    return copy.deepcopy(model)
