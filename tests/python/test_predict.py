"""offtune.predict over your own training step: a Hugging Face decoder's step recorded on host-sim
and every point of a grid replayed, against the same points measured where the figures must agree
(peak memory on any clock), and the refusals."""

import models
import pytest
import torch
from conftest import BACKEND

import offtune

pytestmark = pytest.mark.skipif(
    BACKEND != "host-sim", reason="offtune.predict records on host-sim"
)


def make_step(model, batch):
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(off, index):
        with off.scope():
            loss = model(**batch).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=False)

    return step


def test_a_grid_of_a_hugging_face_step_on_a_device_models_clock():
    model = models.build("llama")
    step = make_step(model, models.batches(1, batch=2, seq=32)[0])
    grid = {"min_offload_size": ["1KiB", "64MiB"], "max_fwd_stash_size": [1, 2]}
    r = offtune.predict(step, grid, device_model="h100-sxm")
    assert "host-sim modelling h100-sxm" in r["source"], r["source"]
    points = r["points"]
    assert len(points) == 5  # the baseline, then 2 sizes x 2 windows
    base = points[0]
    assert base["config"]["offload"] is False
    assert base["offloaded_bytes"] == 0
    for p in points:
        assert p["bound_ms"] <= p["step_ms"] * (1 + 1e-9), p
        assert p["compute_ms"] <= p["bound_ms"] * (1 + 1e-9), p
    small, big = points[1:3], points[3:5]
    for p in small:  # every activation of this model is over 1 KiB: offloaded, peak lower
        assert p["offloaded_bytes"] > 0, p
        assert p["peak_allocated"] < base["peak_allocated"], p
    for p in big:  # none is 64 MiB: nothing moves, the baseline's figures
        assert p["offloaded_bytes"] == 0, p
        assert p["peak_allocated"] == base["peak_allocated"], p
    assert any(p["front"] for p in points)


def measured_peak(step, off, index):
    """Peak device bytes of one step after a warm-up step, as host-sim counts them."""
    step(off, index)
    off.synchronize()
    offtune.host_sim.reset_peak()
    step(off, index + 1)
    off.synchronize()
    return offtune.host_sim.counters()["peak"]


def test_predicted_peaks_are_the_measured_ones_on_this_cpus_clock():
    model = models.build("gpt2")
    step = make_step(model, models.batches(1, batch=2, seq=32)[0])
    grid = {"min_offload_size": ["1KiB"], "max_fwd_stash_size": [1], "use_streams": [False]}
    r = offtune.predict(step, grid, backend="host-sim")
    assert "this CPU's clock" in r["source"], r["source"]
    baseline, single = r["points"]
    assert baseline["config"]["offload"] is False
    assert single["config"]["use_streams"] is False
    # Without streams no copy holds a block: memory does not depend on timing, to the byte.
    assert baseline["peak_allocated"] == measured_peak(step, offtune.Offloader(offload=False), 0)
    off = offtune.Offloader(backend="host-sim", min_offload_size="1KiB", use_streams=False)
    assert single["peak_allocated"] == measured_peak(step, off, 0)
    assert single["offloaded_bytes"] == off.stats()["offloaded_bytes"] // 2
    # Reserved, replayed through the caching allocator's model: whole 2 MiB segments, at least the
    # allocated bytes.
    for p in (baseline, single):
        assert p["peak_reserved"] >= p["peak_allocated"] > 0, p
        assert p["peak_reserved"] % (2 << 20) == 0, p


def test_refusals_are_one_input_error_and_a_failing_step_leaves_predict_usable():
    model = models.build("llama")
    step = make_step(model, models.batches(1, batch=1, seq=8)[0])
    bad = [
        ({"checkpoint": ["none", "all"]}, {}),
        ({"no_such_knob": [1]}, {}),
        ({"min_offload_size": ["1 parsec"]}, {}),
        ({"max_fwd_stash_size": [0]}, {}),
        ({}, {"backend": "cuda"}),
        ({}, {"device_model": "no-such-gpu"}),
    ]
    for grid, kwargs in bad:
        with pytest.raises(offtune.InputError):
            offtune.predict(step, grid, **kwargs)
    with pytest.raises(offtune.InputError):
        offtune.predict(step, {}, warmup=-1)
    with pytest.raises(TypeError):
        offtune.predict("not a step", {})

    def failing(off, index):
        raise RuntimeError("the user's step failed")

    with pytest.raises(RuntimeError, match="the user's step failed"):
        offtune.predict(failing, {"min_offload_size": ["1KiB"]}, device_model="h100-sxm")
    # Nothing left installed: the next prediction is the same as one made before any failure.
    r = offtune.predict(step, {"min_offload_size": ["1KiB"]}, device_model="h100-sxm")
    assert len(r["points"]) == 2
