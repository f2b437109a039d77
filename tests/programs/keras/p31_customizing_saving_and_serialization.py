"""keras.io/guides/customizing_saving_and_serialization, its first part: a registered Dense subclass with an
extra ``keras.Variable`` saved by ``save_own_variables`` and restored by ``load_own_variables``; the model
trained, saved to ``.keras``, reloaded with ``load_model`` in the strategy's scope and trained on.

One change: the guide's ``load_own_variables`` assigns ``store[str(i)]`` to ``enumerate(self.weights)``, but
Keras 3.15 lists ``my_variable`` first in ``self.weights`` (before kernel and bias), so the guide's code fails
on one device too ("A total of 1 objects could not be loaded ... variable.shape=(1,), Received: value.shape=
(10, 1)"); here the loop skips ``my_variable`` (assigned just before). Shrunk: 10 features, 32 examples, batch 8,
2 epochs.
"""

import os

import numpy as np

SOURCE = "https://keras.io/guides/customizing_saving_and_serialization/"


def run(keras, strategy, workdir, scale=1):
    @keras.saving.register_keras_serializable(package="my_custom_package")
    class LayerWithCustomVariable(keras.layers.Dense):
        def __init__(self, units, **kwargs):
            super().__init__(units, **kwargs)
            self.my_variable = keras.Variable(np.random.random((units,)), name="my_variable", dtype="float32")

        def save_own_variables(self, store):
            super().save_own_variables(store)
            # Stores the value of the variable upon saving
            store["variables"] = self.my_variable.numpy()

        def load_own_variables(self, store):
            # Assigns the value of the variable upon loading
            self.my_variable.assign(store["variables"])
            # Load the remaining weights
            for i, v in enumerate(w for w in self.weights if w is not self.my_variable):   # (see above)
                v.assign(store[f"{i}"])
            # Note: You must specify how all variables (including layer weights)
            # are loaded in `load_own_variables.`

        def call(self, inputs):
            dense_out = super().call(inputs)
            return dense_out + self.my_variable

    rng = np.random.RandomState(0)
    ref_input = rng.random((32 * scale, 10)).astype("float32")
    ref_output = rng.random((32 * scale, 10)).astype("float32")
    out = {}

    # save_own_variables / load_own_variables
    keras.utils.set_random_seed(0)
    np.random.seed(0)   # the guide's keras.Variable(np.random.random(...))
    with strategy.scope():
        model = keras.Sequential([LayerWithCustomVariable(1)])
        model.compile(optimizer="adam", loss="mean_squared_error")
    out["custom_vars_fit"] = model.fit(ref_input, ref_output, batch_size=8, epochs=2, verbose=0).history
    path = os.path.join(workdir, "custom_vars_model.keras")
    model.save(path)
    with strategy.scope():
        restored_model = keras.models.load_model(path)
    np.testing.assert_allclose(model.layers[0].my_variable.numpy(), restored_model.layers[0].my_variable.numpy())
    out["custom_vars_restored"] = restored_model.predict(ref_input[:4], verbose=0)
    out["custom_vars_resumed"] = restored_model.fit(ref_input, ref_output, batch_size=8, epochs=1,
                                                    verbose=0).history
    out["my_variable"] = restored_model.layers[0].my_variable.numpy()

    return {"_model": restored_model, **out}
