"""A TF program ported by changing ``tf.`` to ``md.`` gives TensorFlow 2.21's result (tf.keras = Keras 3).

The idioms around ``fit`` (sample and class weights, validation, repeated datasets, callbacks,
single-batch methods, two outputs, frozen models, clipping, weight decay, schedules) run in
``_tf_idioms_program.py``, one program for both frameworks; its TensorFlow observations are recorded
below. Under 2 replicas multidev gives TF's MirroredStrategy result, except where TF's differs from its
own one-device result or fails (``TF_2_21_TWO_REPLICAS``): there multidev gives the one-device result.
"""

import json
import math
import os

import numpy as np
import pytest
import torch

import multidev as md
from multidev.keras import initializers, layers
from tests.conftest import run_fresh

PROGRAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_tf_idioms_program.py")

# ---- md.keras.initializers.Constant: TF 2.21's answers --------------------------------------------------


@pytest.mark.parametrize("value, shape, expected", [
    (np.array([1.0, 2.0, 3.0]), (3,), [1.0, 2.0, 3.0]),
    (np.array([1.0, 2.0, 3.0]), (2, 3), [[1.0, 2.0, 3.0]] * 2),    # broadcast, as value * ones(shape)
    ([1.0, 2.0, 3.0], (3,), [1.0, 2.0, 3.0]),
    (2.5, (2, 2), [[2.5, 2.5]] * 2),
    (np.float32(1.5), (3,), [1.5] * 3),
    (np.array(3.0), (), 3.0),
    (np.array([[1, 2], [3, 4]]), (2, 2), [[1.0, 2.0], [3.0, 4.0]]),
    (torch.tensor([1.0, 2.0]), (2,), [1.0, 2.0]),
])
def test_constant_takes_arrays_lists_and_numpy_scalars(value, shape, expected):
    out = initializers.Constant(value=value)(shape)
    assert out.dtype == torch.float32 and out.tolist() == expected


def test_constant_array_initializes_a_layer_and_round_trips_its_config():
    kernel = np.arange(6.0).reshape(2, 3)
    init = initializers.Constant(kernel)
    dense = layers.Dense(3, kernel_initializer=init, bias_initializer=initializers.Constant(np.float32(0.5)))
    assert dense(torch.ones(1, 2)).tolist() == [[3.5, 5.5, 7.5]]   # TF 2.21: [[3, 5, 7]] + 0.5
    config = json.loads(json.dumps(init.get_config()))
    assert initializers.Constant.from_config(config)((2, 3)).tolist() == kernel.tolist()
    assert initializers.Constant(np.array([1, 2, 3]))((3,), dtype=torch.int32).tolist() == [1, 2, 3]


def test_constant_that_does_not_broadcast_raises_invalid_argument():
    with pytest.raises(md.errors.InvalidArgumentError, match=r"shape \(3,\) does not broadcast to .*\(2, 2\)"):
        initializers.Constant(np.array([1.0, 2.0, 3.0]))((2, 2))


# ---- weights order: Keras 3 lists layer by layer, whatever is frozen ----------------------------------------


def _nested():
    k = md.keras
    base = k.Sequential([k.Input((4,)), layers.Dense(3), layers.BatchNormalization()])
    return base, k.Sequential([k.Input((4,)), base, layers.Dense(1)])


def test_weights_are_listed_layer_by_layer_before_and_after_freezing():
    base, model = _nested()
    tf_2_21 = [(4, 3), (3,), (3,), (3,), (3,), (3,), (3, 1), (1,)]   # TF 2.21, both before and after
    assert [tuple(w.shape) for w in model.weights] == tf_2_21
    base.trainable = False
    assert [tuple(w.shape) for w in model.weights] == tf_2_21
    assert [tuple(w.shape) for w in model.trainable_weights] == [(3, 1), (1,)]


def test_set_weights_after_freezing_restores_each_layer_in_place():
    """Layers of equal shapes: a trainable-first order swapped them silently (EarlyStopping's restore)."""
    model = md.keras.Sequential([md.keras.Input((3,)), layers.Dense(3), layers.Dense(3)])
    saved = model.get_weights()
    model.layers[0].trainable = False
    model.set_weights([w + 1 for w in saved])
    assert np.allclose(model.layers[0].kernel.detach().numpy(), saved[0] + 1)
    assert np.allclose(model.layers[1].kernel.detach().numpy(), saved[2] + 1)


# ---- callbacks' mode="auto": Keras 3 asks the compiled metric which way is better --------------------------


class NegativeMSE(md.keras.metrics.MeanMetricWrapper):
    """A metric that grows as the model improves, declaring it as Keras 3's metrics do."""

    _direction = "up"

    def __init__(self, name="neg_mse", dtype=None):
        super().__init__(lambda y, p: -md.keras.ops.mean(md.keras.ops.square(y - p), axis=-1), name=name, dtype=dtype)


def _early_stopped_fit(metric, monitor, **options):
    x = np.random.RandomState(0).randn(32, 4).astype("float32")
    y = x.sum(1, keepdims=True)
    model = md.keras.Sequential([md.keras.Input((4,)), layers.Dense(1, kernel_initializer="zeros")])
    model.compile(md.keras.optimizers.SGD(0.05), "mse", metrics=[metric])
    stop = md.keras.callbacks.EarlyStopping(monitor=monitor, patience=0, **options)
    return model.fit(x, y, batch_size=8, epochs=4, verbose=0, validation_data=(x, y), callbacks=[stop])


def test_auto_mode_follows_the_metrics_direction():
    """TF 2.21 trains all 4 epochs (max mode); a name-based 'min' stopped after 2 epochs."""
    assert len(_early_stopped_fit(NegativeMSE(), "val_neg_mse").epoch) == 4
    assert len(_early_stopped_fit("mae", "val_mae").epoch) == 4    # TF 2.21: 4 (mae goes down)


def test_auto_mode_for_a_metric_of_unknown_direction_raises_as_keras_3():
    def neg_mse_fn(y, p):
        return -md.keras.ops.mean(md.keras.ops.square(y - p), axis=-1)

    with pytest.raises(ValueError, match="monitor='val_neg_mse_fn'.*Pass mode='max'"):   # TF 2.21: ValueError
        _early_stopped_fit(neg_mse_fn, "val_neg_mse_fn")
    assert len(_early_stopped_fit(neg_mse_fn, "val_neg_mse_fn", mode="max").epoch) == 4


# ---- the idioms on one device and 2 replicas, against TensorFlow 2.21 -------------------------------------

#: Observations of ``_tf_idioms_program.py`` under TensorFlow 2.21 on one device (tensorflow-cpu 2.21.0,
#: Keras 3.15.1: ``python tests/keras/_tf_idioms_program.py tf``), rounded to 5 decimals by the program.
#: TF's MirroredStrategy over 2 logical CPUs gave the same for every idiom but those in TF_2_21_TWO_REPLICAS.
TF_2_21 = {'fit_plain': {'w': [2.31666, 3.32929], 'h': {'loss': [8.10634, 6.16225]}},
           'fit_batch3': {'w': [2.51652, 5.00708], 'h': {'loss': [7.82296, 5.67795]}},
           'sample_weight': {'w': [2.73499, 5.08854], 'h': {'loss': [11.12649, 8.67264]}},
           'class_weight_accuracy': {'w': [1.17352, 2.88768],
                                     'h': {'accuracy': [0.3, 0.6],
                                           'loss': [1.35665, 1.21473],
                                           'val_accuracy': [0.16667, 0.16667],
                                           'val_loss': [1.16829, 1.18954]}},
           'weighted_metrics_and_steps': {'w': [1.17352, 2.88768],
                                          'h': {'accuracy': [0.3, 0.6],
                                                'loss': [1.35665, 1.21473],
                                                'val_accuracy': [0.16667, 0.16667],
                                                'val_loss': [1.16829, 1.18954],
                                                'val_weighted_accuracy': [0.16667, 0.16667],
                                                'weighted_accuracy': [0.16, 0.72]},
                                          'evaluate': {'accuracy': 0.58333,
                                                       'loss': 1.0022,
                                                       'weighted_accuracy': 0.58333},
                                          'predict': [[12, 3], 12.0]},
           'validation_split': {'w': [-0.93975, 3.69505],
                                'h': {'loss': [7.98033, 5.29885], 'val_loss': [8.61035, 10.68078]}},
           'validation_dataset': {'w': [2.31666, 3.32929],
                                  'h': {'loss': [8.10634, 6.16225], 'val_loss': [1.71003, 1.50872]}},
           'repeated_dataset_steps_per_epoch': {'w': [0.48753, 3.60716], 'h': {'loss': [7.87485, 4.70205]}},
           'python_generator': {'w': [-0.93975, 3.69505], 'h': {'loss': [7.98033, 5.29885]}},
           'dataset_with_batch_size': {'w': [2.31666, 3.32929], 'h': {'loss': [8.10634, 6.16225]}},
           'initial_epoch': {'w': [2.31666, 3.32929], 'h': {'loss': [8.10634, 6.16225]}, 'epochs': [1, 2]},
           'early_stopping_restores_best': {'w': [13.05819, 36.05127],
                                            'h': {'loss': [8.03408, 1.19819, 3.41022],
                                                  'val_loss': [2.23118, 0.96835, 2.346]},
                                            'stopped': 2},
           'checkpoint_best_relative_path': {'w': [13.05819, 36.05127]},
           'lr_callbacks': {'w': [2.17002, 4.89905],
                            'h': {'learning_rate': [0.1, 0.05, 0.02, 0.01],
                                  'loss': [8.10634, 6.16225, 3.15823, 2.07234]},
                            'seen': [[0, ['learning_rate', 'loss'], 0.1, 3], [1, ['learning_rate', 'loss'], 0.05, 6],
                                     [2, ['learning_rate', 'loss'], 0.02, 9],
                                     [3, ['learning_rate', 'loss'], 0.01, 12]]},
           'csv_logger': {'header': 'epoch,loss,val_loss',
                          'rows': [[0.0, 8.10634, 1.71003], [1.0, 6.16225, 1.50872]]},
           'terminate_on_nan': {'epochs': [0], 'loss_is_nan': [True]},
           'single_batch_methods': {'w': [0.52528, 1.96144],
                                    'train': [5.94881, 1.90698],
                                    'train_dict': {'loss': 8.69999, 'mae': 2.71},
                                    'test': [1.99303, 1.31321],
                                    'evaluate': {'loss': 6.42854, 'mae': 2.18683},
                                    'predict': [[10, 1], 5.57736]},
           'two_outputs_loss_weights': {'w': [3.10318, 4.41814], 'loss': [9.46301, 7.37356]},
           'run_eagerly': {'w': [2.31666, 3.32929], 'h': {'loss': [8.10634, 6.16225]}},
           'steps_per_execution': {'w': [2.31666, 3.32929], 'h': {'loss': [8.10634, 6.16225]}},
           'frozen_nested_model_recompiled': {'w': [1.35599, 3.45155],
                                              'h': {'loss': [6.32839, 5.06491]},
                                              'first': [1.34543],
                                              'trainable': 2},
           'unfreeze_recompiled': {'w': [0.46949, 1.70407],
                                   'h': {'loss': [7.51112, 7.28346], 'val_loss': [1.7963]},
                                   'first': [8.02129]},
           'uneven_splits_weighted': {'w': [1.21602, 2.98966],
                                      'h': {'accuracy': [0.3, 0.6], 'loss': [1.39682, 1.29757]},
                                      'evaluate': {'accuracy': 0.3, 'loss': 1.10189}},
           'predict_on_batch': [[6, 1], -0.32208],
           'seed_text_classifier': {'w': [-0.94821, 7.10325],
                                    'h': {'loss': [1.92826, 1.64327],
                                          'sparse_categorical_accuracy': [0.0, 0.1],
                                          'sparse_top_k_categorical_accuracy': [0.0, 0.3],
                                          'val_loss': [1.70254, 1.48343],
                                          'val_sparse_categorical_accuracy': [0.0, 0.4],
                                          'val_sparse_top_k_categorical_accuracy': [0.0, 0.8]}},
           'dropout_training_argument': {'off_is_identity': True,
                                         'predict_is_identity': True,
                                         'on_scales_kept': True},
           'optimizers': {'clipnorm': {'w': [0.6572, 1.5652], 'h': {'loss': [8.02621, 7.96511]}},
                          'clipvalue': {'w': [0.66136, 1.56262], 'h': {'loss': [8.03169, 8.00113]}},
                          'global_clipnorm': {'w': [0.65437, 1.56296], 'h': {'loss': [8.03371, 8.00973]}},
                          'adamw_weight_decay': {'w': [0.46512, 2.11679], 'h': {'loss': [7.89484, 6.84412]}},
                          'sgd_weight_decay_nesterov': {'w': [5.52764, 18.46591], 'h': {'loss': [8.40822, 3.29762]}},
                          'adam_exponential_decay': {'w': [0.55145, 2.35782], 'h': {'loss': [7.7036, 6.28309]}},
                          'sgd_piecewise_constant': {'w': [1.55906, 2.18546], 'h': {'loss': [8.10634, 6.36013]}}}}

#: TF 2.21's observations on 2 replicas where they are not its one-device ones, and why multidev gives the
#: one-device result there instead (the suite's invariant: N replicas train as one device).
TF_2_21_TWO_REPLICAS = {
    "fit_batch3": ({"raises": "InvalidArgumentError"}, "TF fails a batch split unevenly across the replicas "
                   "(3 split [2, 1]: 'Inputs to operation AddN ... must have the same size and shape')"),
    "uneven_splits_weighted": ({"raises": "InvalidArgumentError"}, "as fit_batch3, with sample weights and evaluate"),
    "steps_per_execution": ({"raises": "InvalidArgumentError"}, "TF fails steps_per_execution=2 on "
                            "MirroredStrategy (while/cond/Placeholder)"),
    "predict_on_batch": ([[12, 1], -0.64416], "TF returns every row twice (12 rows for 6 examples)"),
    "python_generator": ({"w": [-0.10636, 2.85498], "h": {"loss": [7.98033, 5.94554]}},
                         "TF's second epoch trains on other batches than its one device's second epoch"),
    "optimizers.clipnorm": ({"w": [0.62758, 1.56977], "h": {"loss": [8.01981, 7.95185]}},
                            "Keras 3 clips each replica's partial gradient, then sums; multidev sums, then clips, "
                            "as tf.keras 2 on MirroredStrategy did (docs/keras_optimizers.md)"),
    "optimizers.clipvalue": ({"w": [0.64726, 1.56934], "h": {"loss": [8.02732, 7.98651]}}, "as clipnorm"),
    "optimizers.global_clipnorm": ({"w": [0.64567, 1.56509], "h": {"loss": [8.02928, 7.98793]}}, "as clipnorm"),
}


def _differences(want, got, path=""):
    """Paths where ``got`` differs from ``want`` (numbers to 2e-4 relative: float32, other kernels)."""
    if isinstance(want, dict) and isinstance(got, dict):
        if set(want) != set(got):   # (what raised, where one side raised: an intermittent failure needs it)
            raised = {k: side["message"] for k, side in (("TF", want), ("md", got)) if "message" in side}
            return [f"{path}: keys {sorted(want)} != {sorted(got)}" + (f" {raised}" if raised else "")]
        return [d for k in want for d in _differences(want[k], got[k], f"{path}/{k}")]
    if isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
        return [d for i, (a, b) in enumerate(zip(want, got)) for d in _differences(a, b, f"{path}[{i}]")]
    if isinstance(want, float) and isinstance(got, (int, float)) and not isinstance(got, bool):
        return [] if math.isclose(want, got, rel_tol=2e-4, abs_tol=2e-5) else [f"{path}: TF {want} != {got}"]
    return [] if want == got else [f"{path}: TF {want!r} != {got!r}"]


def test_idioms_give_tensorflows_results_on_one_device_and_two_replicas():
    proc = run_fresh(f"import runpy, sys; sys.argv = [{PROGRAM!r}, 'md']; runpy.run_path({PROGRAM!r}, "
                     "run_name='__main__')", timeout=300)
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    problems = _differences(TF_2_21, got["1"]) + _differences(TF_2_21, got["2"])
    assert not problems, "\n".join(problems)
