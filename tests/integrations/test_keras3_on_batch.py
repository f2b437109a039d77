"""Keras 3's ``train_on_batch``/``test_on_batch``/``predict_on_batch`` on a model built in MirroredStrategy's
scope give Keras 3's one-device result: the batch is the global batch, split across the 2 replicas as ``fit``
splits it (uneven [2, 1] and [3, 2] slices, an empty one), one distributed step, the metrics reset by each
call as Keras resets them, ``predict_on_batch``'s rows in order.

``_keras3_on_batch_program.py`` runs every case as plain Keras 3 (the reference) and on 2 logical CPUs in one
fresh interpreter (float32, Keras's default: its means are float32, hence rtol 1e-5).
"""

from __future__ import annotations

import importlib.util
import json
import os

import pytest

from tests.conftest import run_fresh
from tests.integrations.test_keras3_idioms import _differences

if importlib.util.find_spec("keras") is None:
    pytest.skip("Keras 3 is not installed (pip install 'multidev[keras3]')", allow_module_level=True)

PROGRAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_keras3_on_batch_program.py")
CASES = ["train_test_predict", "sample_weight_and_return_dict", "class_weight", "one_example", "custom_train_step",
         "custom_train_step_one_example", "custom_train_step_unpacking_two"]
TOLERANCE = (1e-5, 1e-6)


@pytest.fixture(scope="module")
def observed():
    proc = run_fresh(f"import runpy, sys; sys.argv = [{PROGRAM!r}]; runpy.run_path({PROGRAM!r}, run_name='__main__')",
                     timeout=120)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_program_runs_every_case(observed):
    assert list(observed["1"]) == CASES and list(observed["2"]) == CASES


@pytest.mark.parametrize("case", ["train_test_predict", "sample_weight_and_return_dict", "class_weight", "one_example",
                                  "custom_train_step"])
def test_two_replicas_give_keras_3s_one_device_result(observed, case):
    reference, distributed = observed["1"][case], observed["2"][case]
    assert "raises" not in reference, reference
    problems = _differences(reference, distributed, TOLERANCE)
    assert not problems, "\n".join(problems[:10])


def test_return_dict_gives_the_metric_names_and_the_list_their_values(observed):
    got = observed["2"]["sample_weight_and_return_dict"]
    assert sorted(got["train_dict"]) == sorted(got["test_dict"]) == ["loss", "mae"]
    assert len(got["train_list"]) == len(got["test_list"]) == 2
    assert len(observed["2"]["train_test_predict"]["predict"]) == 5   # every row once, in order (compared above)


def test_a_custom_step_given_one_example_on_two_replicas_is_refused(observed):
    assert "raises" not in observed["1"]["custom_train_step_one_example"]
    got = observed["2"]["custom_train_step_one_example"]
    assert got["raises"] == "ValueError" and "every replica needs at least one" in got["message"]
    assert "train_on_batch: pass at least 2 examples" in got["message"]


def test_a_step_that_cannot_unpack_train_on_batchs_data_raises_as_on_one_device(observed):
    reference, distributed = (observed[r]["custom_train_step_unpacking_two"] for r in ("1", "2"))
    assert reference["raises"] == distributed["raises"] == "ValueError"
    assert distributed["message"] == reference["message"]
