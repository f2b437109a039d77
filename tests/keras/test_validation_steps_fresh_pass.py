"""``fit(..., validation_data=dataset, validation_steps=M)``: tf.keras 2 evaluates on a new iterator of the
validation data every epoch, so every validation reads the same first M batches. md continued one iterator
across epochs: a repeated validation set gave other batches each epoch, and a finite one ran out ("the
evaluation data yielded no batch" in the third epoch). Numbers from TF 2.21 (tf.keras 2)."""

import numpy as np

import multidev as md

TF_2_21 = {"repeated": [13.0, 13.0, 13.0], "finite": [69.0, 69.0, 69.0], "loss": [13.0, 125.0, 365.0]}


def _model_and_data():
    m = md.keras.Sequential([md.keras.Input(shape=(2,)), md.keras.layers.Dense(1, kernel_initializer="ones")])
    m.compile(md.keras.optimizers.SGD(0.0), "mse")   # no update: a validation loss names its batches
    x = np.arange(12, dtype="float32").reshape(6, 2)
    return m, md.data.Dataset.from_tensor_slices((x, np.zeros((6, 1), "float32"))).batch(2)


def test_a_repeated_validation_set_gives_its_first_batches_every_epoch():
    m, ds = _model_and_data()
    h = m.fit(ds, epochs=3, validation_data=ds.repeat(), validation_steps=1, verbose=0)
    np.testing.assert_allclose(h.history["val_loss"], TF_2_21["repeated"], rtol=1e-6)


def test_a_finite_validation_set_longer_than_the_steps_does_not_run_out():
    m, ds = _model_and_data()
    h = m.fit(ds.repeat(), epochs=3, steps_per_epoch=1, validation_data=ds, validation_steps=2, verbose=0)
    np.testing.assert_allclose(h.history["loss"], TF_2_21["loss"], rtol=1e-6)   # training continues its iterator
    np.testing.assert_allclose(h.history["val_loss"], TF_2_21["finite"], rtol=1e-6)
