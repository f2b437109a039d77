"""``fit(dataset, steps_per_epoch=N, validation_steps=M)`` where N (M) is one pass of a finite dataset
(the nmt_with_attention tutorial's ``validation_steps``): tf.keras 2 starts every epoch on a new pass; md
raised "the training data yielded no batch" in the second epoch. Numbers from TF 2.21 (tf.keras 2)."""

import numpy as np

import multidev as md

TF_2_21 = {"loss": [0.2191, 0.023501, 0.014748], "val_loss": [0.011945, 0.019918, 0.019367], "iterations": 6}


def _fit(train_steps):
    m = md.keras.Sequential([md.keras.layers.Dense(1, kernel_initializer="zeros")])
    m.compile(md.keras.optimizers.SGD(0.1), "mse")
    x = np.arange(16, dtype="float32").reshape(8, 2) / 10
    y = np.arange(8, dtype="float32").reshape(8, 1) / 8
    tr = md.data.Dataset.from_tensor_slices((x, y)).batch(4)
    va = md.data.Dataset.from_tensor_slices((x[:4], y[:4])).batch(4)
    h = m.fit(tr, epochs=3, steps_per_epoch=train_steps, validation_data=va, validation_steps=1, verbose=0)
    return h.history, int(m.optimizer.iterations.numpy())


def test_steps_equal_to_one_pass_start_every_epoch_on_a_new_pass():
    history, iterations = _fit(2)
    assert iterations == TF_2_21["iterations"]
    for key in ("loss", "val_loss"):
        np.testing.assert_allclose(history[key], TF_2_21[key], rtol=2e-4, atol=1e-6)


def test_numpy_integer_steps_and_evaluate_steps_alike():
    history, iterations = _fit(np.int64(2))
    assert iterations == 6 and len(history["val_loss"]) == 3
