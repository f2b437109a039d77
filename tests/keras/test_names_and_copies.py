"""Weight names under a strategy, ``copy.deepcopy`` and ``clone_model`` of a model, as TF 2.21 (Keras 3) has them
(tests/keras/tf_2.21_names_and_copies.json, recorded by record_names_and_copies.py): ``w.name`` is 'kernel' with
and without a strategy; a deepcopy is a new model with the same weights and compile state, its variables made in
the current scope (distributed in a strategy's, plain outside); clone_model gives fresh weights. Checkpoint keys
do not depend on names: the same under the strategy as on one device."""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import run_fresh

HERE = os.path.dirname(os.path.abspath(__file__))
TF = json.load(open(os.path.join(HERE, "tf_2.21_names_and_copies.json")))["keras3"]
MODES = ("one", "two")


@pytest.fixture(scope="module")
def ours():
    out = run_fresh(open(os.path.join(HERE, "_names_and_copies_program.py")).read(), timeout=240).stdout
    return json.loads(out.split("NAMES_AND_COPIES ", 1)[1])


def _without_bn(names):
    """Keras 3's names of the reference model (no BatchNormalization there)."""
    return [n for n in names if n not in ("gamma", "beta", "moving_mean", "moving_variance")]


@pytest.mark.parametrize("mode", MODES)
def test_weight_names_are_keras_3s_with_and_without_a_strategy(ours, mode):
    r = ours[mode]
    assert _without_bn(r["names"]) == TF[mode]["names"] == ["kernel", "bias", "kernel", "bias"]
    assert r["names"] == ours["one"]["names"]
    assert r["layer_weight_names"] == TF[mode]["layer_weight_names"]
    assert r["scale_names"] == ["variable", "variable_1"]
    assert r["copies"] == [2 if mode == "two" else 1] * 8


@pytest.mark.parametrize("mode", MODES)
def test_exclude_from_weight_decay_and_checkpoint_keys_under_a_strategy(ours, mode):
    kernel, bias = ours[mode]["weight_decay"]
    assert kernel == pytest.approx(1 - 0.1 * 0.5) and bias == pytest.approx(1 - 0.1, abs=1e-5)   # bias not decayed
    assert ours[mode]["checkpoint_keys"] == ours["one"]["checkpoint_keys"]
    assert "model:layers.0.kernel" in ours[mode]["checkpoint_keys"]


@pytest.mark.parametrize("mode", MODES)
def test_deepcopy_and_clone_model_as_keras_3(ours, mode):
    r, tf = ours[mode], TF[mode]
    for key in ("same_weights", "shared"):
        assert r["deepcopy_in_scope"][key] == tf["deepcopy_in_scope"][key]
    assert _without_bn(r["deepcopy_in_scope"]["names"])[:2] == tf["deepcopy_in_scope"]["names"]
    assert r["deepcopy_in_scope"]["copies"] == r["copies"] and r["deepcopy_in_scope"]["compiled"]
    assert r["copy_trains_alone"]
    assert r["deepcopy_outside"]["same_weights"] == tf["deepcopy_outside"]["same_weights"] is True
    assert r["deepcopy_outside"]["copies"] == [1] * 8   # made outside any scope: plain, as tf-keras 2's
    assert r["clone_in_scope"]["same_weights"] == tf["clone_in_scope"]["same_weights"] is False
    assert r["clone_in_scope"]["copies"] == r["copies"] and r["clone_in_scope"]["layer_names"]
    assert _without_bn(r["clone_in_scope"]["names"])[:2] == tf["clone_in_scope"]["names"]
    assert r["layer_deepcopy"] == {"names": ["gamma", "beta", "moving_mean", "moving_variance"],
                                   "copies": r["copies"][:4], "independent": True}


def test_deepcopy_of_a_model_that_cannot_be_recreated_says_why(ours):
    assert TF["one"]["deepcopy_subclassed"].startswith("TypeError: Could not locate class")
    message = ours["deepcopy_local_subclass"]
    assert message.startswith("TypeError: Cannot copy.deepcopy model") and "set_weights" in message, message
