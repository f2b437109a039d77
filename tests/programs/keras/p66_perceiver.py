"""keras.io/examples/vision/perceiver_image_classification as printed (Keras 3): a subclassed ``Perceiver``
model whose ``build`` makes its latent array (``add_weight(initializer="random_normal")``) and its sublayers
(``Patches``, ``PatchEncoder`` with ``ops.arange`` positions, a cross-attention functional model taking a dict
of two ``Input``s, a transformer functional model, ``create_ffn`` Sequentials); ``call`` runs the augmentation
model, then ``num_iterations`` times the cross-attention of ``ops.expand_dims(self.latent_array, 0)`` (a batch
of one, broadcast against the images' batch by ``layers.Attention(use_scale=True, dropout=0.1)`` and ``Add``) and
the transformer (``MultiHeadAttention(dropout=0.1)``), feeding the latent back through the dict.
``keras.optimizers.Lamb``, ``ReduceLROnPlateau``, ``EarlyStopping(restore_best_weights=True)``, top-5 accuracy.

The example's ``extract_patches(image=images, ...)`` keyword is ``images`` in Keras 3.15 (a TypeError there):
passed by position here. Shrunk: 8x8 RGB images of 10 classes (32x32 resized to 64), patch 4, latent 8 x 16 (256 x 256), 2 heads, 1
transformer block (4), 2 iterations, 64 training and 16 test images, batch 16, 2 epochs.
"""

import numpy as np

SOURCE = "https://keras.io/examples/vision/perceiver_image_classification/"


def run(keras, strategy, workdir, scale=1):
    layers, ops, activations = keras.layers, keras.ops, keras.activations
    num_classes, input_shape = 10, (8, 8, 3)
    learning_rate, weight_decay, batch_size, num_epochs, dropout_rate = 0.001, 0.0001, 16, 2, 0.2
    image_size, patch_size = 8, 4
    num_patches = (image_size // patch_size) ** 2
    latent_dim, projection_dim, num_heads = 8, 16, 2
    ffn_units, num_transformer_blocks, num_iterations = [projection_dim, projection_dim], 1, 2
    classifier_units = [projection_dim, num_classes]

    rng = np.random.RandomState(0)
    labels = rng.randint(0, num_classes, (80 * scale, 1))
    x = (rng.rand(80 * scale, *input_shape) * 128 + labels[:, :, None, None] * 12).astype("float32")
    x_train, y_train, x_test, y_test = x[:64 * scale], labels[:64 * scale], x[64 * scale:], labels[64 * scale:]

    def create_ffn(hidden_units, dropout_rate):
        ffn_layers = []
        for units in hidden_units[:-1]:
            ffn_layers.append(layers.Dense(units, activation=activations.gelu))
        ffn_layers.append(layers.Dense(units=hidden_units[-1]))
        ffn_layers.append(layers.Dropout(dropout_rate))
        ffn = keras.Sequential(ffn_layers)
        return ffn

    class Patches(layers.Layer):
        def __init__(self, patch_size):
            super().__init__()
            self.patch_size = patch_size

        def call(self, images):
            batch_size = ops.shape(images)[0]
            patches = ops.image.extract_patches(images, size=(self.patch_size, self.patch_size),
                                                strides=(self.patch_size, self.patch_size), dilation_rate=1,
                                                padding="valid")
            patch_dims = patches.shape[-1]
            patches = ops.reshape(patches, [batch_size, -1, patch_dims])
            return patches

    class PatchEncoder(layers.Layer):
        def __init__(self, num_patches, projection_dim):
            super().__init__()
            self.num_patches = num_patches
            self.projection = layers.Dense(units=projection_dim)
            self.position_embedding = layers.Embedding(input_dim=num_patches, output_dim=projection_dim)

        def call(self, patches):
            positions = ops.arange(start=0, stop=self.num_patches, step=1)
            encoded = self.projection(patches) + self.position_embedding(positions)
            return encoded

    def create_cross_attention_module(latent_dim, data_dim, projection_dim, ffn_units, dropout_rate):
        inputs = {
            "latent_array": layers.Input(shape=(latent_dim, projection_dim), name="latent_array"),
            "data_array": layers.Input(shape=(data_dim, projection_dim), name="data_array"),
        }
        latent_array = layers.LayerNormalization(epsilon=1e-6)(inputs["latent_array"])
        data_array = layers.LayerNormalization(epsilon=1e-6)(inputs["data_array"])
        query = layers.Dense(units=projection_dim)(latent_array)
        key = layers.Dense(units=projection_dim)(data_array)
        value = layers.Dense(units=projection_dim)(data_array)
        attention_output = layers.Attention(use_scale=True, dropout=0.1)([query, key, value],
                                                                         return_attention_scores=False)
        attention_output = layers.Add()([attention_output, latent_array])
        attention_output = layers.LayerNormalization(epsilon=1e-6)(attention_output)
        ffn = create_ffn(hidden_units=ffn_units, dropout_rate=dropout_rate)
        outputs = ffn(attention_output)
        outputs = layers.Add()([outputs, attention_output])
        model = keras.Model(inputs=inputs, outputs=outputs)
        return model

    def create_transformer_module(latent_dim, projection_dim, num_heads, num_transformer_blocks, ffn_units,
                                  dropout_rate):
        inputs = layers.Input(shape=(latent_dim, projection_dim))
        x0 = inputs
        for _ in range(num_transformer_blocks):
            x1 = layers.LayerNormalization(epsilon=1e-6)(x0)
            attention_output = layers.MultiHeadAttention(num_heads=num_heads, key_dim=projection_dim,
                                                         dropout=0.1)(x1, x1)
            x2 = layers.Add()([attention_output, x0])
            x3 = layers.LayerNormalization(epsilon=1e-6)(x2)
            ffn = create_ffn(hidden_units=ffn_units, dropout_rate=dropout_rate)
            x3 = ffn(x3)
            x0 = layers.Add()([x3, x2])
        model = keras.Model(inputs=inputs, outputs=x0)
        return model

    class Perceiver(keras.Model):
        def __init__(self, patch_size, data_dim, latent_dim, projection_dim, num_heads, num_transformer_blocks,
                     ffn_units, dropout_rate, num_iterations, classifier_units):
            super().__init__()
            self.latent_dim = latent_dim
            self.data_dim = data_dim
            self.patch_size = patch_size
            self.projection_dim = projection_dim
            self.num_heads = num_heads
            self.num_transformer_blocks = num_transformer_blocks
            self.ffn_units = ffn_units
            self.dropout_rate = dropout_rate
            self.num_iterations = num_iterations
            self.classifier_units = classifier_units

        def build(self, input_shape):
            self.latent_array = self.add_weight(shape=(self.latent_dim, self.projection_dim),
                                                initializer="random_normal", trainable=True)
            self.patcher = Patches(self.patch_size)
            self.patch_encoder = PatchEncoder(self.data_dim, self.projection_dim)
            self.cross_attention = create_cross_attention_module(self.latent_dim, self.data_dim,
                                                                 self.projection_dim, self.ffn_units,
                                                                 self.dropout_rate)
            self.transformer = create_transformer_module(self.latent_dim, self.projection_dim, self.num_heads,
                                                         self.num_transformer_blocks, self.ffn_units,
                                                         self.dropout_rate)
            self.global_average_pooling = layers.GlobalAveragePooling1D()
            self.classification_head = create_ffn(hidden_units=self.classifier_units,
                                                  dropout_rate=self.dropout_rate)
            super().build(input_shape)

        def call(self, inputs):
            augmented = data_augmentation(inputs)
            patches = self.patcher(augmented)
            encoded_patches = self.patch_encoder(patches)
            cross_attention_inputs = {
                "latent_array": ops.expand_dims(self.latent_array, 0),
                "data_array": encoded_patches,
            }
            for _ in range(self.num_iterations):
                latent_array = self.cross_attention(cross_attention_inputs)
                latent_array = self.transformer(latent_array)
                cross_attention_inputs["latent_array"] = latent_array
            representation = self.global_average_pooling(latent_array)
            logits = self.classification_head(representation)
            return logits

    def run_experiment(model):
        optimizer = keras.optimizers.Lamb(learning_rate=learning_rate, weight_decay=weight_decay)
        model.compile(optimizer=optimizer, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=[keras.metrics.SparseCategoricalAccuracy(name="acc"),
                               keras.metrics.SparseTopKCategoricalAccuracy(5, name="top5-acc")])
        reduce_lr = keras.callbacks.ReduceLROnPlateau(monitor="val_loss", factor=0.2, patience=3)
        early_stopping = keras.callbacks.EarlyStopping(monitor="val_loss", patience=15, restore_best_weights=True)
        history = model.fit(x=x_train, y=y_train, batch_size=batch_size, epochs=num_epochs, validation_split=0.25,
                            callbacks=[early_stopping, reduce_lr], verbose=0)
        _, accuracy, top_5_accuracy = model.evaluate(x_test, y_test, verbose=0)
        return history, accuracy, top_5_accuracy

    keras.utils.set_random_seed(0)
    with strategy.scope():
        data_augmentation = keras.Sequential([layers.Normalization(), layers.Resizing(image_size, image_size),
                                              layers.RandomFlip("horizontal"), layers.RandomRotation(factor=0.02),
                                              layers.RandomZoom(height_factor=0.2, width_factor=0.2)],
                                             name="data_augmentation")
    data_augmentation.layers[0].adapt(x_train)
    with strategy.scope():
        perceiver_classifier = Perceiver(patch_size, num_patches, latent_dim, projection_dim, num_heads,
                                         num_transformer_blocks, ffn_units, dropout_rate, num_iterations,
                                         classifier_units)
        history, accuracy, top_5_accuracy = run_experiment(perceiver_classifier)
    return {"_model": perceiver_classifier, "history": history.history, "accuracy": accuracy, "top5": top_5_accuracy,
            "predict": perceiver_classifier.predict(x_test, verbose=0)}
