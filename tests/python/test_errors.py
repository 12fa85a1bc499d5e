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
