"""keras.io/guides/understanding_masking_and_padding: ``pad_sequences(padding="post")``, ``Embedding(mask_zero=True)``
and ``Masking`` (``_keras_mask``), the mask consumed by ``LSTM`` in a Sequential, a functional and a subclassed
layer (``compute_mask`` passed as ``mask=``), ``compute_mask`` returning a list (``TemporalSplit``), a custom
embedding's ``compute_mask``, ``supports_masking = True`` (``MyActivation`` passes the mask on) and a layer
whose ``call`` takes ``mask`` (``TemporalSoftmax``).

The guide only calls the models; here the masked models are also trained with ``fit`` (a Dense head over the
LSTM's last output, mean squared error: no masked loss), so the replicas' masks must be their rows' masks.
Shrunk: vocabulary 50, embeddings of 4, LSTM(8), sequences of 10, 64 examples, batch 16, 2 epochs.
"""

import numpy as np

SOURCE = "https://keras.io/guides/understanding_masking_and_padding/"


def run(keras, strategy, workdir, scale=1):
    layers, ops = keras.layers, keras.ops
    out = {}

    raw_inputs = [[11, 32, 7], [7, 8, 15, 5, 27], [8, 9, 1, 45, 12, 27]]
    padded_inputs = keras.utils.pad_sequences(raw_inputs, padding="post")
    out["padded_inputs"] = padded_inputs

    class TemporalSplit(keras.layers.Layer):
        """Split the input tensor into 2 tensors along the time dimension."""

        def call(self, inputs):
            # Expect the input to be 3D and mask to be 2D, split the input tensor into 2
            # subtensors along the time axis (axis 1).
            return ops.split(inputs, 2, axis=1)

        def compute_mask(self, inputs, mask=None):
            # Also split the mask into 2 if it presents.
            if mask is None:
                return None
            return ops.split(mask, 2, axis=1)

    class CustomEmbedding(keras.layers.Layer):
        def __init__(self, input_dim, output_dim, mask_zero=False, **kwargs):
            super().__init__(**kwargs)
            self.input_dim = input_dim
            self.output_dim = output_dim
            self.mask_zero = mask_zero

        def build(self, input_shape):
            self.embeddings = self.add_weight(shape=(self.input_dim, self.output_dim), initializer="random_normal",
                                              dtype="float32")

        def call(self, inputs):
            inputs = ops.cast(inputs, "int32")
            return ops.take(self.embeddings, inputs)

        def compute_mask(self, inputs, mask=None):
            if not self.mask_zero:
                return None
            return ops.not_equal(inputs, 0)

    class MyActivation(keras.layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            # Signal that the layer is safe for mask propagation
            self.supports_masking = True

        def call(self, inputs):
            return ops.relu(inputs)

    class TemporalSoftmax(keras.layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.supports_masking = True

        def call(self, inputs, mask=None):
            assert mask is not None
            broadcast_float_mask = ops.expand_dims(ops.cast(mask, "float32"), -1)
            inputs_exp = ops.exp(inputs) * broadcast_float_mask
            inputs_sum = ops.sum(inputs_exp * broadcast_float_mask, axis=-1, keepdims=True)
            return inputs_exp / inputs_sum

    class MyLayer(layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.embedding = layers.Embedding(input_dim=50, output_dim=4, mask_zero=True)
            self.lstm = layers.LSTM(8)

        def call(self, inputs):
            x = self.embedding(inputs)
            # Note that you could also prepare a `mask` tensor manually.
            # It only needs to be a boolean tensor
            # with the right shape, i.e. (batch_size, timesteps).
            mask = self.embedding.compute_mask(inputs)
            output = self.lstm(x, mask=mask)  # The layer will ignore the masked values
            return output

    keras.utils.set_random_seed(0)
    with strategy.scope():
        embedding = layers.Embedding(input_dim=50, output_dim=4, mask_zero=True)
        masked_output = embedding(padded_inputs)
        out["embedding_mask"] = ops.cast(masked_output._keras_mask, "float32")
        masking_layer = layers.Masking()
        # Simulate the embedding lookup by expanding the 2D input to 3D, with embedding dimension of 10.
        unmasked_embedding = ops.cast(ops.tile(ops.expand_dims(padded_inputs, axis=-1), [1, 1, 10]), "float32")
        masked_embedding = masking_layer(unmasked_embedding)
        out["masking_mask"] = ops.cast(masked_embedding._keras_mask, "float32")
        first_half, second_half = TemporalSplit()(masked_embedding)
        out["split_masks"] = [ops.cast(first_half._keras_mask, "float32"), ops.cast(second_half._keras_mask, "float32")]
        layer = CustomEmbedding(10, 4, mask_zero=True)
        x = (np.random.RandomState(1).random((3, 10)) * 9).astype("int32")
        out["custom_embedding"] = layer(x)
        out["custom_embedding_mask"] = ops.cast(layer.compute_mask(x), "float32")

    rng = np.random.RandomState(0)
    lengths = rng.randint(2, 11, 64 * scale)
    sequences = [list(rng.randint(1, 50, n)) for n in lengths]
    x_train = keras.utils.pad_sequences(sequences, maxlen=10, padding="post")
    y_train = rng.random((64 * scale, 1)).astype("float32")

    with strategy.scope():   # the guide's Sequential, with a head to train it
        sequential = keras.Sequential([layers.Embedding(input_dim=50, output_dim=4, mask_zero=True), layers.LSTM(8),
                                       layers.Dense(1)])
        sequential.compile(optimizer="adam", loss="mse")
    out["sequential"] = sequential.fit(x_train, y_train, batch_size=16, epochs=2, verbose=0).history

    with strategy.scope():   # the mask passed by hand inside a subclassed layer
        inputs = keras.Input(shape=(10,), dtype="int32")
        subclassed = keras.Model(inputs, layers.Dense(1)(MyLayer()(inputs)))
        subclassed.compile(optimizer="adam", loss="mse")
    out["subclassed"] = subclassed.fit(x_train, y_train, batch_size=16, epochs=2, verbose=0).history

    with strategy.scope():   # supports_masking passes the mask to the LSTM
        inputs = keras.Input(shape=(None,), dtype="int32")
        x = layers.Embedding(input_dim=50, output_dim=4, mask_zero=True)(inputs)
        x = MyActivation()(x)  # Will pass the mask along
        outputs = layers.LSTM(8)(x)  # Will receive the mask
        model = keras.Model(inputs, layers.Dense(1)(outputs))
        model.compile(optimizer="adam", loss="mse")
    out["supports_masking"] = model.fit(x_train, y_train, batch_size=16, epochs=2, verbose=0).history
    out["supports_masking_predict"] = model.predict(x_train[:8], verbose=0)

    with strategy.scope():   # a layer whose call takes the mask
        inputs = keras.Input(shape=(None,), dtype="int32")
        x = layers.Embedding(input_dim=10, output_dim=4, mask_zero=True)(inputs)
        x = layers.Dense(1)(x)
        outputs = TemporalSoftmax()(x)
        softmax_model = keras.Model(inputs, outputs)
    out["temporal_softmax"] = softmax_model.predict(np.random.RandomState(2).randint(0, 10, size=(8, 10)), verbose=0)
    return {"_model": model, **out}
