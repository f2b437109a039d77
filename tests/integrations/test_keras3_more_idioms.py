"""Keras 3 (torch backend) on multidev's MirroredStrategy gives Keras 3's one-device result for more idioms
around ``fit``: the noise and dropout layers (``GaussianNoise``, ``GaussianDropout``, ``AlphaDropout``,
``SpatialDropout1D/2D``, ``Attention(dropout=...)``, a GRU's dropouts), loss reductions (``"sum"``, a plain
function, a dict of losses), losses added in ``call`` and by
regularizers, an overridden ``compute_loss``, torch-style ``train_step``/``test_step``/``predict_step`` with
sample weights and trackers, stateful metrics, ``fit`` twice, saving in one scope and loading in another,
more optimizers (Adafactor, Ftrl, Lamb, Muon, AdamW excluding biases, schedules, accumulation + EMA), fit's
default shuffle, torch tensors as inputs, an adapted ``Normalization``, a threaded ``PyDataset`` reshuffled
in ``on_epoch_end``, a ``Metric`` subclass, a frozen model, ``LossScaleOptimizer`` with EMA in a torch-style
step, a summed state weight, a custom loop keeping its gradients after ``optimizer.apply``, torch modules in the model
(``TorchModuleWrapper``, a module as a layer's attribute; one made outside the scope is refused).

``_keras3_more_idioms_program.py`` runs every idiom as plain Keras 3 and on 2 logical CPUs in one fresh
interpreter (as ``test_keras3_idioms.py``).
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

from tests.integrations.test_keras3_idioms import _differences  # noqa: E402

PROGRAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_keras3_more_idioms_program.py")

IDIOMS = ["gaussian_noise", "gaussian_dropout", "alpha_dropout", "spatial_dropout", "loss_reduction_sum",
          "loss_function", "mean_with_sample_weight", "activity_regularization", "kernel_regularizer",
          "add_loss_mean_in_layer", "compute_loss_override", "custom_train_test_predict_steps",
          "tracker_updated_per_example", "custom_train_step_sum_loss", "stateful_metrics",
          "layer_norm_fit_twice_predict", "save_then_load_in_another_scope", "optimizers", "shuffled",
          "torch_tensors_and_apply_gradients", "normalization_adapted", "dict_outputs_and_losses",
          "recurrent_dropout_and_masking", "attention_dropout", "summed_state_weight", "pydataset_on_epoch_end_threads",
          "custom_metric_class", "frozen_whole_model", "loss_scale_and_ema_in_train_step", "custom_loop_gradients_kept",
          "torch_module_wrapper",
          "torch_module_made_outside_the_scope"]

#: (rtol, atol): float64 programs whose losses Keras takes in float32 (test_keras3_idioms.TOLERANCE).
TOLERANCE = (1e-5, 1e-7)
TOLERANCES = {"optimizers": (1e-4, 1e-6)}   # Adafactor's and Lamb's norms over 9 steps amplify the rounding

#: Raised on 2 replicas (the reference runs): (exception type, words of the message).
REFUSED_ON_TWO = {"torch_module_made_outside_the_scope": ("ValueError", "was built outside MirroredStrategy.scope()")}

#: Idioms whose 2-replica result is not the one-device result, by design (docs/keras3_parity.md).
KNOWN_DIFFERENCES = {
    "mean_with_sample_weight": "each replica divides its weighted sum by its own weights' sum, as Keras 3 on "
                               "TensorFlow's MirroredStrategy does (and as a masked mean divides by the "
                               "replica's own unmasked count)",
}


@pytest.fixture(scope="module")
def observed():
    proc = run_fresh(f"import runpy, sys; sys.argv = [{PROGRAM!r}]; runpy.run_path({PROGRAM!r}, run_name='__main__')",
                     timeout=300)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_program_runs_every_idiom(observed):
    assert list(observed["1"]) == IDIOMS and list(observed["2"]) == IDIOMS


@pytest.mark.parametrize("idiom", [i for i in IDIOMS if i not in {**KNOWN_DIFFERENCES, **REFUSED_ON_TWO}])
def test_two_replicas_give_keras_3s_one_device_result(observed, idiom):
    reference, distributed = observed["1"][idiom], observed["2"][idiom]
    assert "raises" not in json.dumps(reference), reference
    problems = _differences(reference, distributed, TOLERANCES.get(idiom, TOLERANCE))
    assert not problems, "\n".join(problems[:10])


@pytest.mark.parametrize("idiom", sorted(REFUSED_ON_TWO))
def test_refused_on_two_replicas_with_the_reason(observed, idiom):
    kind, words = REFUSED_ON_TWO[idiom]
    assert "raises" not in observed["1"][idiom]
    assert observed["2"][idiom]["raises"] == kind and words in observed["2"][idiom]["message"]


@pytest.mark.parametrize("idiom", sorted(KNOWN_DIFFERENCES))
def test_known_differences_run_and_differ_as_documented(observed, idiom):
    reference, distributed = observed["1"][idiom], observed["2"][idiom]
    assert "raises" not in distributed and all(math.isfinite(v) for v in distributed["h"]["loss"])
    assert _differences(reference, distributed, TOLERANCE), f"{idiom} now equals one device: drop it from the list"
