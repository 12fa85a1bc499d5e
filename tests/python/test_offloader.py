"""offtune.Offloader: options by name, the scope, stats, the engine's Python path in backward."""

import json
import os
import subprocess
import sys

import pytest
import torch
from conftest import BACKEND, DEVICE
from support import assert_bitwise_equal, engine_options
from torch.utils.checkpoint import checkpoint

import offtune


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(32, 64)
        self.b = torch.nn.Linear(64, 64)
        self.c = torch.nn.Linear(64, 4)

    def forward(self, x):
        h = torch.tanh(self.a(x))
        h = torch.sigmoid(self.b(h)) * h.sin()
        return self.c(h).pow(2).mean()


def grads_of(net, x, ctx=None, retain=False):
    if ctx is not None:
        with ctx:
            loss = net(x)
    else:
        loss = net(x)
    loss.backward(retain_graph=retain)
    out = [loss.detach().clone()] + [p.grad.clone() for p in net.parameters()]
    for p in net.parameters():
        p.grad = None
    return out, loss


@pytest.fixture
def net():
    torch.manual_seed(0)
    return Net().to(DEVICE)


def test_scope_gives_bit_identical_gradients_and_returns_to_rest(net):
    off = offtune.Offloader(**engine_options(min_offload_size=0, max_fwd_stash_size=2, prefetch=2))
    x = torch.randn(16, 32, device=DEVICE)
    for _ in range(3):
        ref, _ = grads_of(net, x)
        got, _ = grads_of(net, x, off.scope())
        for i, (r, g) in enumerate(zip(ref, got, strict=True)):
            assert_bitwise_equal(r, g, f"tensor {i}")
    stats = off.stats()
    assert stats["offloaded"] > 0 and stats["reloaded"] > 0
    off.synchronize()
    assert off.resident()["resting"], off.resident()
    assert off.backend == BACKEND


def test_verify_checks_every_copy_and_changes_no_gradient(net):
    off = offtune.Offloader(**engine_options(min_offload_size=0, verify=True))
    x = torch.randn(16, 32, device=DEVICE)
    ref, _ = grads_of(net, x)
    got, _ = grads_of(net, x, off.scope())
    for i, (r, g) in enumerate(zip(ref, got, strict=True)):
        assert_bitwise_equal(r, g, f"tensor {i}")
    stats = off.stats()
    assert stats["offloaded"] > 0
    assert stats["verified"] > 0, stats
    assert stats["disk_write_failures"] == 0


def test_sizes_are_taken_as_the_cli_writes_them(net):
    off = offtune.Offloader(**engine_options(min_offload_size="4KiB"))
    x = torch.randn(16, 32, device=DEVICE)
    with off.scope():
        loss = net(x)
    loss.backward()
    stats = off.stats()
    # 16 x 64 float32 activations are 4 KiB: offloaded; the 16 x 4 output is not.
    assert stats["offloaded"] > 0 and stats["kept"] > 0


def test_end_of_backward_gives_back_what_a_retained_graph_brought_in(net):
    # Under Python's engine the first unpack queues the engine's end-of-backward as a final
    # callback: no reloaded buffer outlives the backward, though the graph (and its host copies)
    # is retained.
    off = offtune.Offloader(**engine_options(min_offload_size=0, prefetch=2))
    x = torch.randn(16, 32, device=DEVICE)
    with off.scope():
        loss = net(x)
    off.synchronize()
    loss.backward(retain_graph=True)
    r = off.resident()
    assert r["tracked"] > 0
    assert r["bwd_stash_count"] == 0 and r["bwd_stash_bytes"] == 0, r
    loss.backward()
    del loss
    off.synchronize()
    assert off.resident()["resting"], off.resident()


def test_a_failed_backward_returns_to_rest_when_its_graph_is_dropped(net):
    off = offtune.Offloader(**engine_options(min_offload_size=0, prefetch=2))
    x = torch.randn(16, 32, device=DEVICE)

    def boom(_):
        raise RuntimeError("boom")

    with off.scope():
        h = torch.tanh(net.a(x))
        h.register_hook(boom)
        loss = torch.sigmoid(net.b(h)).sin().sum()
    with pytest.raises(RuntimeError, match="boom"):
        loss.backward()
    del loss, h
    off.synchronize()
    assert off.resident()["resting"], off.resident()


def test_tensors_saved_on_autograds_threads_reach_the_offloader(net):
    # A reentrant checkpoint recomputes its function inside backward; Python carries the hooks of
    # the thread that called backward() to the recompute, wherever it runs.
    off = offtune.Offloader(**engine_options(min_offload_size=0))
    x = torch.randn(16, 32, device=DEVICE, requires_grad=True)

    def run(ctx):
        def body(t):
            return torch.sigmoid(net.b(torch.tanh(net.a(t))))

        if ctx is None:
            loss = checkpoint(body, x, use_reentrant=True).pow(2).mean()
            loss.backward()
        else:
            with ctx:
                loss = checkpoint(body, x, use_reentrant=True).pow(2).mean()
                packed_in_forward = off.stats()["packed"]
                loss.backward()
            assert off.stats()["packed"] > packed_in_forward  # the recompute's tensors
        used = list(net.a.parameters()) + list(net.b.parameters())
        out = [loss.detach().clone(), x.grad.clone()] + [p.grad.clone() for p in used]
        x.grad = None
        for p in used:
            p.grad = None
        return out

    ref = run(None)
    got = run(off.scope())
    for i, (r, g) in enumerate(zip(ref, got, strict=True)):
        assert_bitwise_equal(r, g, f"tensor {i}")
    off.synchronize()
    assert off.resident()["resting"], off.resident()


def test_no_offload_region_keeps_what_is_saved_inside_it(net):
    off = offtune.Offloader(**engine_options(min_offload_size=0))
    x = torch.randn(16, 32, device=DEVICE)
    with off.scope():
        with offtune.no_offload():
            loss = net(x)
    assert off.stats()["packed"] == 0
    loss.backward()


def test_no_offload_region_keeps_autograds_in_place_check(net):
    # torch skips its version check for every tensor saved through hooks; a no-offload region (the
    # drop-in's output head) must not lose it. Before: a silently wrong gradient, no error.
    off = offtune.Offloader(**engine_options(min_offload_size=0))
    x = torch.randn(3, device=DEVICE, requires_grad=True)
    with off.scope(), offtune.no_offload():
        h = x.exp()
        y = h * 1.0
        h.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
    # Unchanged tensors pass, and the gradient is autograd's.
    with off.scope(), offtune.no_offload():
        y = x.exp() * x.sin()
    y.sum().backward()
    ref = x.detach().exp() * (x.detach().sin() + x.detach().cos())
    assert torch.allclose(x.grad, ref)


def test_parameters_are_never_offloaded_even_frozen_or_as_views(net):
    # A frozen weight is no autograd leaf that requires grad, and linear saves a view of it
    # (weight.t()): under TRL's rules only its registered storage keeps it.
    for p in net.parameters():
        p.requires_grad_(False)
    x = torch.randn(16, 32, device=DEVICE, requires_grad=True)

    def offloaded_bytes(register):
        off = offtune.Offloader(**engine_options(min_offload_size=0, semantics="trl"))
        if register:
            off.never_offload_parameters(net)
        with off.scope():
            y = net.a(x)
        y.sum().backward()
        return off.stats()["offloaded_bytes"]

    assert offloaded_bytes(register=False) >= net.a.weight.numel() * 4
    assert offloaded_bytes(register=True) == 0


def test_from_env_reads_a_json_object_of_options(monkeypatch):
    monkeypatch.setenv("OFFTUNE_POINT", json.dumps({"min_offload_size": "64KiB",
                                                    "max_fwd_stash_size": 3}))
    off = offtune.Offloader.from_env(**engine_options())
    assert off.options["min_offload_size"] == "64KiB"
    monkeypatch.setenv("OFFTUNE_POINT", "[1, 2]")
    with pytest.raises(ValueError, match="OFFTUNE_POINT must hold a JSON object"):
        offtune.Offloader.from_env()
    monkeypatch.setenv("OFFTUNE_POINT", "{min_offload_size: 1}")
    with pytest.raises(ValueError, match="OFFTUNE_POINT is not JSON"):
        offtune.Offloader.from_env()
    monkeypatch.setenv("OFFTUNE_POINT", '{"min_offload_sise": 1}')
    with pytest.raises(ValueError, match="unknown option 'min_offload_sise'"):
        offtune.Offloader.from_env()


def test_every_engine_option_is_taken_by_name():
    names = offtune.option_names()
    for expected in ("use_pin_memory", "use_streams", "min_offload_size", "max_fwd_stash_size",
                     "max_fwd_stash_bytes", "prefetch", "max_prefetch_bytes", "backend",
                     "device_index", "host_ram_warn_percent", "host_pool_slab_bytes", "tier",
                     "host_budget_bytes", "disk_dir", "disk_arena_bytes", "disk_read_ahead_bytes",
                     "disk_min_gbps", "link", "semantics", "offload", "poison_freed",
                     "reuse_freed", "check_streams", "debug_copy_delay_ns", "alloc_segments"):
        assert expected in names
    off = offtune.Offloader(**engine_options(
        use_pin_memory=False, use_streams=True, min_offload_size="1KiB", max_fwd_stash_size=3,
        max_fwd_stash_bytes="1MiB", prefetch=0, max_prefetch_bytes=0, device_index=-1,
        host_ram_warn_percent=80.0, host_pool_slab_bytes="2MiB", tier="host",
        host_budget_bytes=0, disk_dir="", disk_arena_bytes=0, disk_read_ahead_bytes="64MiB",
        disk_min_gbps=0, link="pcie4", semantics="offtune", offload="all",
        debug_copy_delay_ns=0, alloc_segments="env"))
    assert off.semantics == "offtune"


# ---- bad input: one clear Python exception ------------------------------------------------------

@pytest.mark.parametrize("options, message", [
    (dict(min_offload_sise=1), "unknown option 'min_offload_sise' (valid: min_offload_size"),
    (dict(min_offload_size="64 KiBB"), "min_offload_size"),
    (dict(min_offload_size="-1"), "min_offload_size"),
    (dict(max_fwd_stash_size=0), "max_fwd_stash_size must be at least 1, got 0"),
    (dict(max_fwd_stash_size="256MiB"), "for a bound in bytes use max_fwd_stash_bytes='256MiB'"),
    (dict(use_streams="yes"), "use_streams takes True or False, got 'yes'"),
    (dict(prefetch=1.5), "prefetch takes a whole number"),
    (dict(min_offload_size=[1]), "min_offload_size takes a bool, a number or text, got list"),
    (dict(backend="tpu"), "unknown backend 'tpu'"),
    (dict(semantics="axolotl"), "unknown semantics 'axolotl'"),
    (dict(link="fast"), "link: bad link 'fast'"),
    (dict(alloc_segments="growing"), "unknown alloc segments 'growing'"),
    (dict(prefetch=2**70), "prefetch"),
])
def test_a_bad_option_is_one_value_error_naming_it(options, message):
    with pytest.raises(ValueError) as e:
        offtune.Offloader(**options)
    assert message in str(e.value)
    assert "\n" not in str(e.value)


def test_a_torch_it_was_not_built_for_is_an_import_error_naming_both():
    code = (
        "import torch; torch.__version__ = '1.0.0'\n"
        "try:\n"
        "    import offtune\n"
        "except ImportError as e:\n"
        "    print('ImportError:', e)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    from offtune import _build_info

    assert "ImportError: offtune was built against torch " + _build_info.TORCH_VERSION in out.stdout
    assert "runs torch 1.0.0" in out.stdout


def test_layer_offloader_needs_an_offtune_offloader():
    with pytest.raises(TypeError, match="offtune.Offloader"):
        offtune.LayerOffloader(object())
    off = offtune.Offloader(**engine_options())
    with pytest.raises(ValueError, match="depth"):
        offtune.LayerOffloader(off, depth=0)
