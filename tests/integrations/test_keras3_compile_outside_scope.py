"""A Keras 3 model created in the strategy's scope and compiled outside it (its optimizer and metric objects
made outside too: keras.io's ``run_experiment(model)`` helpers) trains on multidev's MirroredStrategy as on one
device, as Keras 3 on TensorFlow 2.21's MirroredStrategy does (``keras3_compile_outside_tf.json``): the metrics'
variables made outside are distributed when fit/evaluate first meet the strategy, as the optimizer's are."""

from __future__ import annotations

import importlib.util
import json
import os

import numpy as np
import pytest

from tests.conftest import run_fresh

if importlib.util.find_spec("keras") is None:
    pytest.skip("Keras 3 is not installed (pip install 'multidev[keras3]')", allow_module_level=True)

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAM = os.path.join(HERE, "_keras3_compile_outside_program.py")
CASES = ["fit_evaluate", "weighted_and_string_metrics", "evaluate_only_then_batches", "own_step_compiled_outside"]


@pytest.fixture(scope="module")
def observed():
    proc = run_fresh(f"import runpy, sys; sys.argv = [{PROGRAM!r}]; runpy.run_path({PROGRAM!r}, run_name='__main__')",
                     timeout=300)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _assert_close(got, want, path=""):
    if isinstance(want, dict):
        assert set(got) == set(want), (path, sorted(got), sorted(want))
        for key in want:
            _assert_close(got[key], want[key], f"{path}/{key}")
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=path)


@pytest.mark.parametrize("case", CASES)
def test_two_replicas_give_the_one_device_result(observed, case):
    one, two = observed["1"][case], observed["2"][case]
    assert "raises" not in one, one
    assert "raises" not in two, two
    _assert_close(two, one)


def test_the_numbers_are_tensorflows(observed):
    with open(os.path.join(HERE, "keras3_compile_outside_tf.json")) as f:
        tf = json.load(f)
    two = observed["2"]["fit_evaluate"]
    for key in ("loss", "mae"):
        np.testing.assert_allclose(two["h"][key], tf["outside"][key], rtol=2e-5, atol=1e-6, err_msg=key)
    np.testing.assert_allclose(two["kernel"], tf["outside"]["kernel"], rtol=2e-5, err_msg="kernel")
