"""Idioms of tensorflow.org's keras/overfit_and_underfit and structured_data/imbalanced_data tutorials
that multidev refused, each as TF 2.21 runs it (observed with /work/tfvenv, tf.keras 2 and Keras 3).
"""

import numpy as np
import pytest
import torch

import multidev as md

schedules = md.keras.optimizers.schedules

# TF 2.21's rates at steps [0, 3, 7, 12, 25] (tf.keras 2 and Keras 3 alike, float32)
TF_RATES = {
    "ExponentialDecay": (lambda: schedules.ExponentialDecay(0.1, 10, 0.5), [0.1, 0.081225, 0.061557, 0.043528, 0.017678]),
    "PolynomialDecay": (lambda: schedules.PolynomialDecay(0.1, 10, 0.01), [0.1, 0.073, 0.037, 0.01, 0.01]),
    "CosineDecay": (lambda: schedules.CosineDecay(0.1, 10), [0.1, 0.079389, 0.020611, 0.0, 0.0]),
    "CosineDecayRestarts": (lambda: schedules.CosineDecayRestarts(0.1, 10), [0.1, 0.079389, 0.020611, 0.097553, 0.014645]),
    "InverseTimeDecay": (lambda: schedules.InverseTimeDecay(0.1, 10, 0.5, staircase=True), [0.1, 0.1, 0.1, 0.066667, 0.05]),
    "PiecewiseConstantDecay": (lambda: schedules.PiecewiseConstantDecay([5, 10], [1.0, 0.5, 0.1]), [1.0, 1.0, 0.5, 0.1, 0.1]),
}


@pytest.mark.parametrize("name", sorted(TF_RATES))
@pytest.mark.parametrize("steps", [np.array([0, 3, 7, 12, 25]), [0, 3, 7, 12, 25], torch.tensor([0, 3, 7, 12, 25])])
def test_a_schedule_called_with_many_steps_gives_a_rate_per_step(name, steps):
    make, want = TF_RATES[name]
    rates = make()(steps)
    assert isinstance(rates, torch.Tensor) and rates.dtype == torch.float32 and tuple(rates.shape) == (5,)
    np.testing.assert_allclose(rates.numpy(), want, atol=1e-6)
    assert make()(np.int64(3)) == pytest.approx(want[1], abs=1e-6)   # one step: one rate, as before


def test_overfit_tutorials_inverse_time_decay_plot():
    STEPS_PER_EPOCH = 20
    lr_schedule = schedules.InverseTimeDecay(0.001, decay_steps=STEPS_PER_EPOCH * 1000, decay_rate=1,
                                             staircase=False)
    step = np.linspace(0, 100000, 5)
    lr = lr_schedule(step)
    np.testing.assert_allclose(np.asarray(lr), [0.001, 0.00044444, 0.00028571, 0.00021053, 0.00016667], rtol=1e-4)
    assert (step / STEPS_PER_EPOCH).shape == lr.shape


def test_dense_bias_initializer_none_is_kerass_default_not_an_error():
    """imbalanced_data's ``make_model(output_bias=None)`` passes ``bias_initializer=None``: Keras gives the
    weight add_weight's default (glorot_uniform; TF: std 1.04 over 200 (1,) biases, within +-sqrt(3))."""
    md.keras.utils.set_random_seed(0)
    biases = []
    for _ in range(50):
        layer = md.keras.layers.Dense(1, bias_initializer=None)
        layer.build((None, 3))
        biases.append(float(layer.bias.detach()[0]))
    assert max(map(abs, biases)) <= 3 ** 0.5 and np.std(biases) > 0.5
    assert md.keras.initializers.get(None) is None


def _model():
    model = md.keras.Sequential([md.keras.layers.Dense(1, input_shape=(2,))])
    model.compile(optimizer="sgd", loss="mse")
    return model


def _ds():
    return md.data.Dataset.from_tensor_slices((np.ones((8, 2), "float32"), np.ones((8, 1), "float32"))).repeat().batch(2)


@pytest.mark.parametrize("steps", [np.ceil(2.0 * 3 / 2), 3.0, np.float32(3)])
def test_steps_per_epoch_a_whole_float_as_imbalanced_data_passes_np_ceil(steps):
    model = _model()
    model.fit(_ds(), epochs=2, steps_per_epoch=steps, verbose=0)
    assert int(model.optimizer.iterations) == 6


def test_steps_per_epoch_a_fraction_is_refused_naming_the_fix():
    model = _model()
    with pytest.raises(TypeError, match=r"steps_per_epoch=np.float64\(2.5\).*int\(np.ceil\(steps_per_epoch\)\)"):
        model.fit(_ds(), epochs=2, steps_per_epoch=np.float64(2.5), verbose=0)
    assert int(model.optimizer.iterations) == 0


def _trained(epochs, callbacks=()):
    x = np.linspace(-1, 1, 16, dtype="float32").reshape(8, 2)
    y = x @ np.array([[2.0], [-1.0]], "float32")
    model = md.keras.Sequential([md.keras.layers.Dense(1, input_shape=(2,), kernel_initializer="zeros")])
    model.compile(optimizer=md.keras.optimizers.SGD(0.1), loss="mse")
    history = model.fit(x, y, epochs=epochs, batch_size=8, shuffle=False, verbose=0, callbacks=list(callbacks))
    return model, history


@pytest.mark.parametrize("monitor, mode, best_epoch", [("loss", "max", 1), ("loss", "min", 4)])
def test_early_stopping_restores_the_best_weights_when_training_ends_without_stopping(monitor, mode, best_epoch):
    """imbalanced_data's ``EarlyStopping(monitor='val_prc', mode='max', patience=10, restore_best_weights=True)``
    over fewer epochs than the patience: tf.keras 2.21 (and Keras 3) restore the best epoch's weights when
    training ends; md kept the last epoch's."""
    stop = md.keras.callbacks.EarlyStopping(monitor=monitor, mode=mode, patience=10, restore_best_weights=True)
    model, history = _trained(4, [stop])
    assert len(history.epoch) == 4 and stop.stopped_epoch == 0
    best, _ = _trained(best_epoch)
    for got, want in zip(model.get_weights(), best.get_weights()):
        np.testing.assert_array_equal(got, want)
