"""Saved tensors that are not plain dense tensors (issue 42, items 1 and 6): sparse tensors, which
have no storage, and wrapper subclasses (DTensor, torchao's NF4, anything made by
_make_wrapper_subclass), whose storage is not their data. The engine keeps them as autograd keeps
them, never reads their storage, and still offloads the plain tensors beside them; gradients are
bitwise those of training without offtune.

Each case runs in a fresh process: a wrong pointer here ends in SIGSEGV, which must fail one test,
not end the suite. (Before the fix: sparse raised "Cannot access storage of SparseTensorImpl";
DTensor and NF4 died of SIGSEGV.)
"""

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest
from conftest import BACKEND

import offtune

pytestmark = pytest.mark.skipif(BACKEND != "host-sim", reason="CPU tensor kinds, on host-sim")

PRELUDE = """
import json, sys, torch, offtune
offtune.host_sim.install()
torch.set_num_threads(1)
OPTIONS = dict(backend="host-sim", min_offload_size="1KiB", poison_freed=True, reuse_freed=True,
               check_streams=True)

def run(step, params, with_offtune):
    off = offtune.Offloader(**OPTIONS) if with_offtune else None
    for p in params:
        p.grad = None
    if off is None:
        loss = step()
    else:
        with off.scope():
            loss = step()
    loss.backward()
    grads = [p.grad.full_tensor() if hasattr(p.grad, "full_tensor") else p.grad for p in params]
    if off is not None:
        off.synchronize()
    return [g.detach().clone() for g in grads], (off.stats() if off is not None else {})

def report(step, params):
    ref, _ = run(step, params, False)
    got, stats = run(step, params, True)
    same = all(torch.equal(a.view(-1).view(torch.uint8), b.view(-1).view(torch.uint8))
               for a, b in zip(ref, got, strict=True))
    print(json.dumps({"same": same, "stats": stats}))
"""

CASES = {
    "sparse": """
        i = torch.tensor([[0, 1, 2, 2], [2, 0, 1, 2]])
        s = torch.sparse_coo_tensor(i, torch.randn(4), (3, 3)).coalesce().requires_grad_()
        d = torch.randn(3, 1024, requires_grad=True)
        report(lambda: torch.sparse.mm(s, d).sin().sum(), [d])
    """,
    "dtensor": """
        import torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import Replicate, distribute_tensor
        dist.init_process_group("gloo", init_method=sys.argv[1], rank=0, world_size=1)
        mesh = init_device_mesh("cpu", (1,))
        w = distribute_tensor(torch.randn(256, 256), mesh, [Replicate()]).requires_grad_()
        x = distribute_tensor(torch.randn(64, 256), mesh, [Replicate()])
        plain = torch.randn(64, 256, requires_grad=True)
        # A DTensor saved for backward beside plain tensors that are offloaded.
        report(lambda: (x @ w).sin().sum().full_tensor() + (plain * 2).sin().sum(), [w, plain])
        dist.destroy_process_group()
    """,
    "nf4": """
        from torchao.quantization.quantize_.workflows.nf4.nf4_tensor import linear_nf4, to_nf4
        torch.manual_seed(0)
        # A QLoRA-style block: a frozen NF4 base and trainable LoRA adapters, two layers deep.
        bases = [to_nf4(torch.randn(256, 256, dtype=torch.bfloat16)) for _ in range(2)]
        a = [torch.nn.Parameter(torch.randn(8, 256, dtype=torch.bfloat16) * 0.01) for _ in range(2)]
        b = [torch.nn.Parameter(torch.randn(256, 8, dtype=torch.bfloat16) * 0.01) for _ in range(2)]
        x = torch.randn(64, 256, dtype=torch.bfloat16)
        def step():
            h = x
            for base, la, lb in zip(bases, a, b):
                h = (linear_nf4(h, base) + (h @ la.t()) @ lb.t()).sin()
            return h.float().pow(2).mean()
        report(step, a + b)
    """,
}


def run_case(name, tmp_path):
    script = PRELUDE + textwrap.dedent(CASES[name])
    env = dict(os.environ)
    package_dir = str(pathlib.Path(offtune.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_dir, env.get("PYTHONPATH")]))
    env["CUDA_VISIBLE_DEVICES"] = ""
    init = (tmp_path / "pg").as_uri()
    done = subprocess.run([sys.executable, "-c", script, init], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (
        f"{name}: exit {done.returncode} (negative: killed by signal {-done.returncode})\n"
        f"{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_sparse_saved_tensor_is_kept_and_the_dense_one_beside_it_offloaded(tmp_path):
    out = run_case("sparse", tmp_path)
    assert out["same"]
    assert out["stats"]["kept"] >= 1  # the sparse matrix
    assert out["stats"]["offloaded"] >= 1  # the 3 x 1024 product, saved by sin


def test_a_dtensor_saved_for_backward_is_kept_and_plain_tensors_still_offloaded(tmp_path):
    pytest.importorskip("torch.distributed.tensor")
    out = run_case("dtensor", tmp_path)
    assert out["same"]
    assert out["stats"]["kept"] >= 2  # x and w, DTensors saved by the matmul
    assert out["stats"]["offloaded"] >= 1  # the plain branch's product


def test_a_qlora_block_on_an_nf4_base_trains_bitwise_as_without_offtune(tmp_path):
    pytest.importorskip("torchao")
    out = run_case("nf4", tmp_path)
    assert out["same"]
    assert out["stats"]["kept"] >= 2  # the NF4 weights linear_nf4 saves
    assert out["stats"]["offloaded"] >= 2  # the activations between the layers
