"""Keras 3 (torch backend) on multidev's MirroredStrategy gives Keras 3's one-device result for the idioms
around ``fit``: sample and class weights, validation data of every kind, ``steps_per_epoch``, uneven and
odd global batches, callbacks, two outputs, frozen models, optimizer options, mixed precision and a
torch-style ``train_step``.

``_keras3_idioms_program.py`` runs every idiom as plain Keras 3 (the reference) and on 2 logical CPUs,
in one fresh interpreter; each idiom is equal to the reference, refused with a message that says why,
or in ``KNOWN_DIFFERENCES`` with the reason.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os

import pytest

from tests.conftest import run_fresh

if importlib.util.find_spec("keras") is None:
    pytest.skip("Keras 3 is not installed (pip install 'multidev[keras3]')", allow_module_level=True)

PROGRAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_keras3_idioms_program.py")

#: Every idiom of the program, in its order.
IDIOMS = ["fit_plain", "fit_batch3", "sample_weight", "class_weight_weighted_metrics", "validation_split",
          "validation_dataloader", "validation_generator", "pydataset_train_and_validation",
          "dataloader_steps_per_epoch", "generator_steps_per_epoch", "initial_epoch", "early_stopping_restores_best",
          "checkpoint_weights_best_relative", "checkpoint_keras_file", "lr_callbacks", "csv_logger",
          "terminate_on_nan", "backup_and_restore", "single_batch_methods", "evaluate_predict_uneven",
          "two_outputs_loss_weights", "run_eagerly", "steps_per_execution", "frozen_nested_model_recompiled",
          "unfreeze_recompiled", "dict_inputs", "batch_norm", "batch_norm_synchronized",
          "batch_norm_synchronized_odd", "batch_norm_synchronized_uneven", "dropout_seeded", "dropout_unseeded",
          "dropout_noise_shape", "custom_train_step_dropout", "random_in_a_layer",
          "custom_train_step", "custom_train_step_synchronized_bn", "custom_train_step_synchronized_bn_odd",
          "optimizers", "optimizer_outside_scope", "mixed_bfloat16_loss_scale"]

#: (rtol, atol). The program runs in float64, but Keras's losses take ``ops.mean`` in float32 whatever floatx
#: is (``keras/src/backend/torch/numpy.py`` ``mean``: ``result_type(x.dtype, "float32")``), so two replicas'
#: partial gradients round differently from one batch's at float32's level.
TOLERANCE = (1e-5, 1e-7)
TOLERANCES = {
    "optimizers": (1e-4, 1e-6),   # SGD momentum 0.9 + Nesterov + weight decay over 9 steps amplifies the rounding
    # bfloat16 gradients: two replicas' halves of a batch summed in float32 against one bfloat16 sum (2**-8)
    "mixed_bfloat16_loss_scale": (2e-2, 2e-3),
    "batch_norm_synchronized": (1e-5, 1e-6),   # dividing by the batch's standard deviation amplifies the rounding
    "batch_norm_synchronized_odd": (1e-5, 1e-6),
    "custom_train_step_synchronized_bn": (1e-5, 1e-6),
}

#: Raised on 2 replicas (the reference runs): (exception type, words of the message).
REFUSED_ON_TWO = {
    "batch_norm_synchronized_uneven": ("ValueError", "every replica needs at least one example"),
    "custom_train_step_synchronized_bn_odd": ("ValueError", "unequal slices [2, 1]"),
}

#: Raised alike on one device and 2 replicas: exception type.
RAISED_ALIKE = {"steps_per_execution": "ValueError"}

#: Idioms whose 2-replica result is not the one-device result, by design (docs/keras3_parity.md).
KNOWN_DIFFERENCES = {
    "batch_norm": "a BatchNormalization without synchronized=True normalizes each replica's slice with its own "
                  "moments, as TensorFlow's MirroredStrategy does (synchronized=True: batch_norm_synchronized)",
}


@pytest.fixture(scope="module")
def observed():
    proc = run_fresh(f"import runpy, sys; sys.argv = [{PROGRAM!r}]; runpy.run_path({PROGRAM!r}, run_name='__main__')",
                     timeout=300)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _differences(want, got, tolerance, path=""):
    """Paths where ``got`` differs from ``want`` beyond ``tolerance`` (rtol, atol)."""
    if isinstance(want, dict) and isinstance(got, dict):
        if set(want) != set(got):
            return [f"{path}: keys {sorted(want)} != {sorted(got)}"]
        return [d for k in want for d in _differences(want[k], got[k], tolerance, f"{path}/{k}")]
    if isinstance(want, list) and isinstance(got, list):
        if len(want) != len(got):
            return [f"{path}: {len(want)} items != {len(got)}"]
        return [d for i, (a, b) in enumerate(zip(want, got)) for d in _differences(a, b, tolerance, f"{path}[{i}]")]
    if isinstance(want, float) and isinstance(got, (int, float)) and not isinstance(got, bool):
        if math.isnan(want) and math.isnan(got):
            return []
        rtol, atol = tolerance
        return [] if math.isclose(want, got, rel_tol=rtol, abs_tol=atol) else [f"{path}: one device {want} != {got}"]
    return [] if want == got else [f"{path}: one device {want!r} != {got!r}"]


def test_the_program_runs_every_idiom(observed):
    assert list(observed["1"]) == IDIOMS and list(observed["2"]) == IDIOMS


@pytest.mark.parametrize("idiom", [i for i in IDIOMS if i not in {**REFUSED_ON_TWO, **RAISED_ALIKE,
                                                                   **KNOWN_DIFFERENCES}])
def test_two_replicas_give_keras_3s_one_device_result(observed, idiom):
    reference, distributed = observed["1"][idiom], observed["2"][idiom]
    assert "raises" not in reference, reference
    problems = _differences(reference, distributed, TOLERANCES.get(idiom, TOLERANCE))
    assert not problems, "\n".join(problems[:10])


@pytest.mark.parametrize("idiom", sorted(REFUSED_ON_TWO))
def test_refused_on_two_replicas_with_the_reason(observed, idiom):
    kind, words = REFUSED_ON_TWO[idiom]
    assert "raises" not in observed["1"][idiom]
    assert observed["2"][idiom]["raises"] == kind and words in observed["2"][idiom]["message"]


def test_steps_per_execution_is_refused_as_keras_refuses_it_on_one_device(observed):
    """multidev's step function replaced Keras's (which refuses it) and took the first batch of each call."""
    for idiom, kind in RAISED_ALIKE.items():
        reference, distributed = observed["1"][idiom], observed["2"][idiom]
        assert reference["raises"] == distributed["raises"] == kind
        assert distributed["message"].startswith(reference["message"])


@pytest.mark.parametrize("idiom", sorted(KNOWN_DIFFERENCES))
def test_known_differences_run_and_differ_as_documented(observed, idiom):
    reference, distributed = observed["1"][idiom], observed["2"][idiom]
    assert "raises" not in distributed and all(math.isfinite(v) for v in distributed["h"]["loss"])
    assert _differences(reference, distributed, TOLERANCE), f"{idiom} now equals one device: drop it from the list"
