"""keras.io/examples/vision/cct as printed (Keras 3): a ``CCTTokenizer`` (a ``Sequential`` of Conv2D,
``ZeroPadding2D``, ``MaxPooling2D`` built in ``__init__``, reshaped to tokens with ``ops.shape``), a
``PositionEmbedding`` layer (``add_weight`` in ``build``, ``ops.slice`` + ``ops.broadcast_to`` in ``call``) added
with ``+=`` to a ``KerasTensor``, ``StochasticDepth`` drawing ``keras.random.uniform`` of shape ``(batch, 1, 1)``
from its own ``SeedGenerator(1337)`` in ``call(training=...)``, ``SequencePooling`` (softmax attention weights,
``ops.transpose(axes=...)``, ``ops.matmul``, ``ops.squeeze(-2)``), ``MultiHeadAttention(dropout=0.1)``,
``Dense(activation=keras.ops.gelu)``, augmentation in the model (``Rescaling``, ``RandomCrop``, ``RandomFlip``),
``AdamW``, ``CategoricalCrossentropy(label_smoothing=0.1)``, top-5 accuracy and a best-only weights checkpoint.

Shrunk: 12x12 RGB images of 10 classes (32x32), conv channels 8/16 (64/128), 2 transformer layers of
projection 16 and 2 heads (128, 2), 64 training and 16 test images, batch 16, 2 epochs.
"""

import os

import numpy as np

SOURCE = "https://keras.io/examples/vision/cct/"


def run(keras, strategy, workdir, scale=1):
    layers = keras.layers
    positional_emb, conv_layers, projection_dim = True, 2, 16
    num_heads, transformer_units, transformer_layers = 2, [projection_dim, projection_dim], 2
    stochastic_depth_rate, num_classes, input_shape, image_size = 0.1, 10, (12, 12, 3), 12

    class CCTTokenizer(layers.Layer):
        def __init__(self, kernel_size=3, stride=1, padding=1, pooling_kernel_size=3, pooling_stride=2,
                     num_conv_layers=conv_layers, num_output_channels=[8, 16], positional_emb=positional_emb,
                     **kwargs):
            super().__init__(**kwargs)
            self.conv_model = keras.Sequential()
            for i in range(num_conv_layers):
                self.conv_model.add(layers.Conv2D(num_output_channels[i], kernel_size, stride, padding="valid",
                                                  use_bias=False, activation="relu", kernel_initializer="he_normal"))
                self.conv_model.add(layers.ZeroPadding2D(padding))
                self.conv_model.add(layers.MaxPooling2D(pooling_kernel_size, pooling_stride, "same"))
            self.positional_emb = positional_emb

        def call(self, images):
            outputs = self.conv_model(images)
            reshaped = keras.ops.reshape(outputs, (-1, keras.ops.shape(outputs)[1] * keras.ops.shape(outputs)[2],
                                                   keras.ops.shape(outputs)[-1]))
            return reshaped

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

    class SequencePooling(layers.Layer):
        def __init__(self):
            super().__init__()
            self.attention = layers.Dense(1)

        def call(self, x):
            attention_weights = keras.ops.softmax(self.attention(x), axis=1)
            attention_weights = keras.ops.transpose(attention_weights, axes=(0, 2, 1))
            weighted_representation = keras.ops.matmul(attention_weights, x)
            return keras.ops.squeeze(weighted_representation, -2)

    class StochasticDepth(layers.Layer):
        def __init__(self, drop_prop, **kwargs):
            super().__init__(**kwargs)
            self.drop_prob = drop_prop
            self.seed_generator = keras.random.SeedGenerator(1337)

        def call(self, x, training=None):
            if training:
                keep_prob = 1 - self.drop_prob
                shape = (keras.ops.shape(x)[0],) + (1,) * (len(x.shape) - 1)
                random_tensor = keep_prob + keras.random.uniform(shape, 0, 1, seed=self.seed_generator)
                random_tensor = keras.ops.floor(random_tensor)
                return (x / keep_prob) * random_tensor
            return x

    def mlp(x, hidden_units, dropout_rate):
        for units in hidden_units:
            x = layers.Dense(units, activation=keras.ops.gelu)(x)
            x = layers.Dropout(dropout_rate)(x)
        return x

    def create_cct_model(image_size=image_size, input_shape=input_shape, num_heads=num_heads,
                         projection_dim=projection_dim, transformer_units=transformer_units):
        inputs = layers.Input(input_shape)
        augmented = data_augmentation(inputs)
        cct_tokenizer = CCTTokenizer()
        encoded_patches = cct_tokenizer(augmented)
        if positional_emb:
            sequence_length = encoded_patches.shape[1]
            encoded_patches += PositionEmbedding(sequence_length=sequence_length)(encoded_patches)
        dpr = [x for x in np.linspace(0, stochastic_depth_rate, transformer_layers)]
        for i in range(transformer_layers):
            x1 = layers.LayerNormalization(epsilon=1e-5)(encoded_patches)
            attention_output = layers.MultiHeadAttention(num_heads=num_heads, key_dim=projection_dim,
                                                         dropout=0.1)(x1, x1)
            attention_output = StochasticDepth(dpr[i])(attention_output)
            x2 = layers.Add()([attention_output, encoded_patches])
            x3 = layers.LayerNormalization(epsilon=1e-5)(x2)
            x3 = mlp(x3, hidden_units=transformer_units, dropout_rate=0.1)
            x3 = StochasticDepth(dpr[i])(x3)
            encoded_patches = layers.Add()([x3, x2])
        representation = layers.LayerNormalization(epsilon=1e-5)(encoded_patches)
        weighted_representation = SequencePooling()(representation)
        logits = layers.Dense(num_classes)(weighted_representation)
        return keras.Model(inputs=inputs, outputs=logits)

    rng = np.random.RandomState(0)
    labels = rng.randint(0, num_classes, 80 * scale)
    x = (rng.rand(80 * scale, *input_shape) * 128 + labels[:, None, None, None] * 12).astype("float32")
    y = keras.utils.to_categorical(labels, num_classes)
    x_train, y_train, x_test, y_test = x[:64 * scale], y[:64 * scale], x[64 * scale:], y[64 * scale:]
    keras.utils.set_random_seed(0)
    with strategy.scope():
        data_augmentation = keras.Sequential([layers.Rescaling(scale=1.0 / 255),
                                              layers.RandomCrop(image_size, image_size),
                                              layers.RandomFlip("horizontal")], name="data_augmentation")
        model = create_cct_model()
        optimizer = keras.optimizers.AdamW(learning_rate=0.001, weight_decay=0.0001)
        model.compile(optimizer=optimizer,
                      loss=keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=0.1),
                      metrics=[keras.metrics.CategoricalAccuracy(name="accuracy"),
                               keras.metrics.TopKCategoricalAccuracy(5, name="top-5-accuracy")])
    checkpoint_filepath = os.path.join(workdir, "checkpoint.weights.h5")
    checkpoint_callback = keras.callbacks.ModelCheckpoint(checkpoint_filepath, monitor="val_accuracy",
                                                          save_best_only=True, save_weights_only=True)
    history = model.fit(x=x_train, y=y_train, batch_size=16, epochs=2, validation_split=0.25,
                        callbacks=[checkpoint_callback], verbose=0)
    model.load_weights(checkpoint_filepath)
    _, accuracy, top_5_accuracy = model.evaluate(x_test, y_test, verbose=0)
    return {"_model": model, "history": history.history, "accuracy": accuracy, "top5": top_5_accuracy,
            "predict": model.predict(x_test, verbose=0)}
