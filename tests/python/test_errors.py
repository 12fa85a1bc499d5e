"""Errors by kind (docs/python.md, "Errors"): a value the user gave, refused anywhere in offtune, is
an offtune.InputError (a ValueError); a fault inside the work on valid input, a C++
std::invalid_argument thrown deep in a model or the predictor included, is an offtune.EngineFault
(a RuntimeError), never a ValueError."""

import pytest

import offtune
from offtune._native import _offtune


@pytest.mark.parametrize("kind", ["usage", "parse", "options", "not-a-store"])
def test_a_value_from_the_user_refused_is_an_input_error(kind):
    with pytest.raises(offtune.InputError, match=kind) as e:
        _offtune._throw_for_test(kind)
    assert isinstance(e.value, ValueError)
    assert not isinstance(e.value, RuntimeError)


@pytest.mark.parametrize("kind", ["fault", "engine", "logic"])
def test_a_fault_inside_the_work_is_an_engine_fault_not_a_value_error(kind):
    with pytest.raises(offtune.EngineFault, match=kind) as e:
        _offtune._throw_for_test(kind)
    assert isinstance(e.value, RuntimeError)
    assert not isinstance(e.value, ValueError)


def test_bad_options_and_record_arguments_are_input_errors(tmp_path):
    with pytest.raises(offtune.InputError, match="min_offload_size"):
        offtune.Offloader(min_offload_size="64 parsecs")
    db = tmp_path / "runs.db"
    for kwargs, match in [({"device_model": "h100-typo"}, "h100-typo"),
                          ({"collector": "everything"}, "collector")]:
        with pytest.raises(offtune.InputError, match=match):
            with offtune.record(db, offloader=(), **kwargs):
                pass
    with pytest.raises(offtune.InputError, match="warmup"):
        offtune.record(db, warmup=-1)
    assert not db.exists()


def test_an_engine_fault_inside_the_hooks_is_an_engine_fault(tmp_path):
    # A disk arena of 1 MiB filled by one step: raised from the pack or unpack hook, which torch
    # calls, not pybind11. Before: a bare RuntimeError.
    import torch
    from support import engine_options

    off = offtune.Offloader(**engine_options(min_offload_size="1KiB", tier="disk",
                                             disk_dir=str(tmp_path), disk_arena_bytes="1MiB",
                                             disk_min_gbps=0))
    x = torch.randn(512, 1024, requires_grad=True)
    with pytest.raises(offtune.EngineFault, match="arena file .* is full"):
        with off.scope():
            y = x
            for _ in range(8):
                y = (y * 1.01).sin()
        y.sum().backward()


def test_a_malformed_point_is_an_input_error_from_the_drop_in(monkeypatch):
    import torch

    monkeypatch.setenv("OFFTUNE_POINT", "{not json")
    with pytest.raises(offtune.InputError, match="OFFTUNE_POINT is not JSON"):
        offtune.get_act_offloading_ctx_manager(torch.nn.Linear(4, 4))
    monkeypatch.setenv("OFFTUNE_POINT", "[1, 2]")
    with pytest.raises(offtune.InputError, match="OFFTUNE_POINT must hold a JSON object"):
        offtune.get_act_offloading_ctx_manager(torch.nn.Linear(4, 4))


MALFORMED_RECORD = """
import sys, torch, offtune        # the import itself must not raise
off = offtune.Offloader(backend="host-sim")
try:
    with off.scope():
        pass
except offtune.InputError as e:
    print("InputError:", e)
    sys.exit(3)
"""


@pytest.mark.parametrize("value, message", [
    ('{"db": null, "run": 1}', "'db' must be the store's path"),
    ('{"db": "runs.db", "run": "one"}', "'run' must be a run id"),
    ('{"db": "runs.db"', "OFFTUNE_RECORD is not JSON"),
    ('{"run": 1}', "has no 'db'"),
])
def test_a_malformed_record_target_is_an_input_error_at_first_use_not_at_import(
        tmp_path, value, message):
    # Before: `import offtune` raised a ValueError for a malformed value, and "db": null recorded
    # into a file named None.
    import os
    import pathlib
    import subprocess
    import sys

    env = dict(os.environ, OFFTUNE_RECORD=value, CUDA_VISIBLE_DEVICES="")
    env.pop("OFFTUNE_POINT", None)
    package_dir = str(pathlib.Path(offtune.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_dir, env.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, "-c", MALFORMED_RECORD], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stderr[-2000:]
    assert message in done.stdout, done.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no store named None, or any other
