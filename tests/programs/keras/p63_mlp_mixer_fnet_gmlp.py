"""keras.io/examples/vision/mlp_image_classification as printed (Keras 3): three all-MLP classifiers on one
``Patches`` layer (``ops.image.extract_patches`` reshaped to tokens) and one augmentation model (``Normalization``
adapted to the data, ``Resizing``, ``RandomFlip``, ``RandomZoom``): the MLP-Mixer (``MLPMixerLayer``: token mixing
through ``ops.transpose(axes=(0, 2, 1))``, one ``LayerNormalization`` called twice), FNet (``FNetLayer``:
``keras.ops.fft2((real_part, im_part))[0]`` with ``ops.zeros_like``, plus a ``PositionEmbedding`` added as
``x + PositionEmbedding(...)(x)``) and gMLP (``gMLPLayer``: ``ops.split`` into a spatial gating unit, a Dense with
``bias_initializer="Ones"``); each block stack is a ``Sequential`` of the custom layers, trained with ``AdamW``,
``SparseTopKCategoricalAccuracy``, ``ReduceLROnPlateau`` and ``EarlyStopping(restore_best_weights=True)``.

Shrunk: 8x8 RGB images of 10 classes (32x32, resized to 64), patch 4 (8), embedding 16 (256), 2 blocks (4),
64 training and 16 test images, batch 16, 2 epochs per classifier.
"""

import numpy as np

SOURCE = "https://keras.io/examples/vision/mlp_image_classification/"


def run(keras, strategy, workdir, scale=1):
    layers = keras.layers
    num_classes, input_shape = 10, (8, 8, 3)
    weight_decay, batch_size, num_epochs, dropout_rate = 0.0001, 16, 2, 0.2
    image_size, patch_size = 8, 4
    num_patches = (image_size // patch_size) ** 2
    embedding_dim, num_blocks = 16, 2

    rng = np.random.RandomState(0)
    labels = rng.randint(0, num_classes, (80 * scale, 1))
    x = (rng.rand(80 * scale, *input_shape) * 128 + labels[:, :, None, None] * 12).astype("float32")
    x_train, y_train, x_test, y_test = x[:64 * scale], labels[:64 * scale], x[64 * scale:], labels[64 * scale:]

    def build_classifier(blocks, positional_encoding=False):
        inputs = layers.Input(shape=input_shape)
        augmented = data_augmentation(inputs)
        patches = Patches(patch_size)(augmented)
        x = layers.Dense(units=embedding_dim)(patches)
        if positional_encoding:
            x = x + PositionEmbedding(sequence_length=num_patches)(x)
        x = blocks(x)
        representation = layers.GlobalAveragePooling1D()(x)
        representation = layers.Dropout(rate=dropout_rate)(representation)
        logits = layers.Dense(num_classes)(representation)
        return keras.Model(inputs=inputs, outputs=logits)

    def run_experiment(model):
        optimizer = keras.optimizers.AdamW(learning_rate=learning_rate, weight_decay=weight_decay)
        model.compile(optimizer=optimizer, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=[keras.metrics.SparseCategoricalAccuracy(name="acc"),
                               keras.metrics.SparseTopKCategoricalAccuracy(5, name="top5-acc")])
        reduce_lr = keras.callbacks.ReduceLROnPlateau(monitor="val_loss", factor=0.5, patience=5)
        early_stopping = keras.callbacks.EarlyStopping(monitor="val_loss", patience=10, restore_best_weights=True)
        history = model.fit(x=x_train, y=y_train, batch_size=batch_size, epochs=num_epochs, validation_split=0.25,
                            callbacks=[early_stopping, reduce_lr], verbose=0)
        _, accuracy, top_5_accuracy = model.evaluate(x_test, y_test, verbose=0)
        return history

    class Patches(layers.Layer):
        def __init__(self, patch_size, **kwargs):
            super().__init__(**kwargs)
            self.patch_size = patch_size

        def call(self, x):
            patches = keras.ops.image.extract_patches(x, self.patch_size)
            batch_size = keras.ops.shape(patches)[0]
            num_patches = keras.ops.shape(patches)[1] * keras.ops.shape(patches)[2]
            patch_dim = keras.ops.shape(patches)[3]
            out = keras.ops.reshape(patches, (batch_size, num_patches, patch_dim))
            return out

    class PositionEmbedding(keras.layers.Layer):
        def __init__(self, sequence_length, initializer="glorot_uniform", **kwargs):
            super().__init__(**kwargs)
            if sequence_length is None:
                raise ValueError("`sequence_length` must be an Integer, received `None`.")
            self.sequence_length = int(sequence_length)
            self.initializer = keras.initializers.get(initializer)

        def build(self, input_shape):
            feature_size = input_shape[-1]
            self.position_embeddings = self.add_weight(name="embeddings", shape=[self.sequence_length, feature_size],
                                                       initializer=self.initializer, trainable=True)
            super().build(input_shape)

        def call(self, inputs, start_index=0):
            shape = keras.ops.shape(inputs)
            feature_length = shape[-1]
            sequence_length = shape[-2]
            position_embeddings = keras.ops.convert_to_tensor(self.position_embeddings)
            position_embeddings = keras.ops.slice(position_embeddings, (start_index, 0),
                                                  (sequence_length, feature_length))
            return keras.ops.broadcast_to(position_embeddings, shape)

        def compute_output_shape(self, input_shape):
            return input_shape

    class MLPMixerLayer(layers.Layer):
        def __init__(self, num_patches, hidden_units, dropout_rate, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.mlp1 = keras.Sequential([layers.Dense(units=num_patches, activation="gelu"),
                                          layers.Dense(units=num_patches), layers.Dropout(rate=dropout_rate)])
            self.mlp2 = keras.Sequential([layers.Dense(units=num_patches, activation="gelu"),
                                          layers.Dense(units=hidden_units), layers.Dropout(rate=dropout_rate)])
            self.normalize = layers.LayerNormalization(epsilon=1e-6)

        def build(self, input_shape):
            return super().build(input_shape)

        def call(self, inputs):
            x = self.normalize(inputs)
            x_channels = keras.ops.transpose(x, axes=(0, 2, 1))
            mlp1_outputs = self.mlp1(x_channels)
            mlp1_outputs = keras.ops.transpose(mlp1_outputs, axes=(0, 2, 1))
            x = mlp1_outputs + inputs
            x_patches = self.normalize(x)
            mlp2_outputs = self.mlp2(x_patches)
            x = x + mlp2_outputs
            return x

    class FNetLayer(layers.Layer):
        def __init__(self, embedding_dim, dropout_rate, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.ffn = keras.Sequential([layers.Dense(units=embedding_dim, activation="gelu"),
                                         layers.Dropout(rate=dropout_rate), layers.Dense(units=embedding_dim)])
            self.normalize1 = layers.LayerNormalization(epsilon=1e-6)
            self.normalize2 = layers.LayerNormalization(epsilon=1e-6)

        def call(self, inputs):
            real_part = inputs
            im_part = keras.ops.zeros_like(inputs)
            x = keras.ops.fft2((real_part, im_part))[0]
            x = x + inputs
            x = self.normalize1(x)
            x_ffn = self.ffn(x)
            x = x + x_ffn
            return self.normalize2(x)

    class gMLPLayer(layers.Layer):
        def __init__(self, num_patches, embedding_dim, dropout_rate, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.channel_projection1 = keras.Sequential([layers.Dense(units=embedding_dim * 2, activation="gelu"),
                                                         layers.Dropout(rate=dropout_rate)])
            self.channel_projection2 = layers.Dense(units=embedding_dim)
            self.spatial_projection = layers.Dense(units=num_patches, bias_initializer="Ones")
            self.normalize1 = layers.LayerNormalization(epsilon=1e-6)
            self.normalize2 = layers.LayerNormalization(epsilon=1e-6)

        def spatial_gating_unit(self, x):
            u, v = keras.ops.split(x, indices_or_sections=2, axis=2)
            v = self.normalize2(v)
            v_channels = keras.ops.transpose(v, axes=(0, 2, 1))
            v_projected = self.spatial_projection(v_channels)
            v_projected = keras.ops.transpose(v_projected, axes=(0, 2, 1))
            return u * v_projected

        def call(self, inputs):
            x = self.normalize1(inputs)
            x_projected = self.channel_projection1(x)
            x_spatial = self.spatial_gating_unit(x_projected)
            x_projected = self.channel_projection2(x_spatial)
            return x + x_projected

    keras.utils.set_random_seed(0)
    results = {}
    with strategy.scope():
        data_augmentation = keras.Sequential([layers.Normalization(), layers.Resizing(image_size, image_size),
                                              layers.RandomFlip("horizontal"),
                                              layers.RandomZoom(height_factor=0.2, width_factor=0.2)],
                                             name="data_augmentation")
    data_augmentation.layers[0].adapt(x_train)
    blocks = {"mlpmixer": (lambda: MLPMixerLayer(num_patches, embedding_dim, dropout_rate), 0.005, False),
              "fnet": (lambda: FNetLayer(embedding_dim, dropout_rate), 0.001, True),
              "gmlp": (lambda: gMLPLayer(num_patches, embedding_dim, dropout_rate), 0.003, False)}
    for name, (block, learning_rate, positional_encoding) in blocks.items():
        with strategy.scope():
            stack = keras.Sequential([block() for _ in range(num_blocks)])
            classifier = build_classifier(stack, positional_encoding=positional_encoding)
            history = run_experiment(classifier)
        results[name] = {"history": history.history, "predict": classifier.predict(x_test, verbose=0)}
    # (copies of the last block stack: md.keras's Normalization statistics are buffers that ``adapt`` makes outside
    # the scope, one copy read by every replica, as p57)
    return {"_model": stack, **results}
