"""``compile(loss=SomeLoss(reduction="none"))`` (``Reduction.NONE``): Keras trains on the gradient of the
per-example losses' sum and logs their mean, tf.keras 2 alike on one device and on a MirroredStrategy. md
trained on their mean (a gradient one batch size smaller, silently). Numbers from TF 2.21 (tf.keras 2)."""

import numpy as np
import pytest

import multidev as md

TF_2_21 = {  # SGD(0.1), 2 epochs of one 6-example batch; 'sum' trains alike and logs the sum
    "none": {"loss": [1.09861, 1.08884], "evaluate": [1.08162, 0.5]},
    "sum": {"loss": [6.59167, 6.53304], "evaluate": [6.4897, 0.5]},
    "kernel": [0.92619, 1.00014, 1.07367, 0.92706, 1.00016, 1.07278],
}


def _fit(reduction, strategy):
    x = np.arange(12, dtype="float32").reshape(6, 2) / 10
    y = np.array([0, 1, 2, 0, 1, 2])
    with strategy.scope():
        m = md.keras.Sequential([md.keras.Input(shape=(2,)), md.keras.layers.Dense(3, kernel_initializer="ones")])
        m.compile(md.keras.optimizers.SGD(0.1), metrics=["accuracy"],
                  loss=md.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=reduction))
    h = m.fit(x, y, batch_size=6, epochs=2, shuffle=False, verbose=0)
    return h.history["loss"], m.evaluate(x, y, batch_size=6, verbose=0), m.layers[0].kernel.numpy().ravel()


@pytest.mark.parametrize("replicas", [1, 2])
@pytest.mark.parametrize("reduction", ["none", md.keras.losses.Reduction.NONE, None, "sum"])
def test_a_per_example_loss_trains_on_its_sum_and_logs_its_mean(reduction, replicas):
    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]) if replicas == 2 else md.distribute.get_strategy()
    loss, evaluated, kernel = _fit(reduction, strategy)
    want = TF_2_21["sum" if reduction == "sum" else "none"]
    np.testing.assert_allclose(loss, want["loss"], rtol=2e-4)
    np.testing.assert_allclose(evaluated, want["evaluate"], rtol=2e-4)
    np.testing.assert_allclose(kernel, TF_2_21["kernel"], rtol=2e-4)
