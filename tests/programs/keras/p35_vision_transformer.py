"""keras.io/examples/vision/image_classification_with_vision_transformer, small: the augmentation model
(``Normalization`` adapted to the training images, ``Resizing``, ``RandomFlip``, ``RandomRotation``,
``RandomZoom``), ``Patches`` (``keras.ops.image.extract_patches``), ``PatchEncoder`` (Dense projection plus a
position ``Embedding`` over ``ops.arange``), transformer blocks (``LayerNormalization``,
``MultiHeadAttention(dropout=0.1)``, ``Add``, a gelu MLP with Dropout), ``AdamW`` with weight decay,
``SparseCategoricalAccuracy`` and ``SparseTopKCategoricalAccuracy(5)``, ``ModelCheckpoint`` on
``val_accuracy`` (``save_best_only``, ``.weights.h5``), ``validation_split=0.1``, ``load_weights``, ``evaluate``.

Shrunk: 8x8x3 images resized to 12x12, patches of 4 (9 patches), projection 8, 2 heads, 1 transformer
layer, MLP head [16], 80 training and 20 test images, batch 16, 2 epochs.
"""

import os

import numpy as np

SOURCE = "https://keras.io/examples/vision/image_classification_with_vision_transformer/"

num_classes = 10
input_shape = (8, 8, 3)
learning_rate = 0.001
weight_decay = 0.0001
batch_size = 16
num_epochs = 2
image_size = 12  # We'll resize input images to this size
patch_size = 4  # Size of the patches to be extract from the input images
num_patches = (image_size // patch_size) ** 2
projection_dim = 8
num_heads = 2
transformer_units = [projection_dim * 2, projection_dim]  # Size of the transformer layers
transformer_layers = 1
mlp_head_units = [16]  # Size of the dense layers of the final classifier


def run(keras, strategy, workdir, scale=1):
    layers, ops = keras.layers, keras.ops

    def mlp(x, hidden_units, dropout_rate):
        for units in hidden_units:
            x = layers.Dense(units, activation=keras.activations.gelu)(x)
            x = layers.Dropout(dropout_rate)(x)
        return x

    class Patches(layers.Layer):
        def __init__(self, patch_size):
            super().__init__()
            self.patch_size = patch_size

        def call(self, images):
            input_shape = ops.shape(images)
            batch_size = input_shape[0]
            height = input_shape[1]
            width = input_shape[2]
            channels = input_shape[3]
            num_patches_h = height // self.patch_size
            num_patches_w = width // self.patch_size
            patches = keras.ops.image.extract_patches(images, size=self.patch_size)
            patches = ops.reshape(patches, (batch_size, num_patches_h * num_patches_w,
                                            self.patch_size * self.patch_size * channels))
            return patches

        def get_config(self):
            config = super().get_config()
            config.update({"patch_size": self.patch_size})
            return config

    class PatchEncoder(layers.Layer):
        def __init__(self, num_patches, projection_dim):
            super().__init__()
            self.num_patches = num_patches
            self.projection = layers.Dense(units=projection_dim)
            self.position_embedding = layers.Embedding(input_dim=num_patches, output_dim=projection_dim)

        def call(self, patch):
            positions = ops.expand_dims(ops.arange(start=0, stop=self.num_patches, step=1), axis=0)
            projected_patches = self.projection(patch)
            encoded = projected_patches + self.position_embedding(positions)
            return encoded

        def get_config(self):
            config = super().get_config()
            config.update({"num_patches": self.num_patches})
            return config

    def create_vit_classifier():
        inputs = keras.Input(shape=input_shape)
        # Augment data.
        augmented = data_augmentation(inputs)
        # Create patches.
        patches = Patches(patch_size)(augmented)
        # Encode patches.
        encoded_patches = PatchEncoder(num_patches, projection_dim)(patches)
        # Create multiple layers of the Transformer block.
        for _ in range(transformer_layers):
            # Layer normalization 1.
            x1 = layers.LayerNormalization(epsilon=1e-6)(encoded_patches)
            # Create a multi-head attention layer.
            attention_output = layers.MultiHeadAttention(num_heads=num_heads, key_dim=projection_dim,
                                                         dropout=0.1)(x1, x1)
            # Skip connection 1.
            x2 = layers.Add()([attention_output, encoded_patches])
            # Layer normalization 2.
            x3 = layers.LayerNormalization(epsilon=1e-6)(x2)
            # MLP.
            x3 = mlp(x3, hidden_units=transformer_units, dropout_rate=0.1)
            # Skip connection 2.
            encoded_patches = layers.Add()([x3, x2])
        # Create a [batch_size, projection_dim] tensor.
        representation = layers.LayerNormalization(epsilon=1e-6)(encoded_patches)
        representation = layers.Flatten()(representation)
        representation = layers.Dropout(0.5)(representation)
        # Add MLP.
        features = mlp(representation, hidden_units=mlp_head_units, dropout_rate=0.5)
        # Classify outputs.
        logits = layers.Dense(num_classes)(features)
        # Create the Keras model.
        model = keras.Model(inputs=inputs, outputs=logits)
        return model

    def run_experiment(model):
        optimizer = keras.optimizers.AdamW(learning_rate=learning_rate, weight_decay=weight_decay)
        model.compile(
            optimizer=optimizer,
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy"),
                     keras.metrics.SparseTopKCategoricalAccuracy(5, name="top-5-accuracy")],
        )
        checkpoint_filepath = os.path.join(workdir, "checkpoint.weights.h5")
        checkpoint_callback = keras.callbacks.ModelCheckpoint(checkpoint_filepath, monitor="val_accuracy",
                                                              save_best_only=True, save_weights_only=True)
        history = model.fit(x=x_train, y=y_train, batch_size=batch_size, epochs=num_epochs, validation_split=0.1,
                            callbacks=[checkpoint_callback], verbose=0)
        model.load_weights(checkpoint_filepath)
        results = model.evaluate(x_test, y_test, verbose=0)
        return history, results

    rng = np.random.RandomState(0)
    x_train = rng.randint(0, 256, (80 * scale,) + input_shape).astype("float32")
    y_train = rng.randint(0, num_classes, (80 * scale, 1))
    x_test = rng.randint(0, 256, (20,) + input_shape).astype("float32")
    y_test = rng.randint(0, num_classes, (20, 1))
    keras.utils.set_random_seed(0)
    with strategy.scope():
        data_augmentation = keras.Sequential(
            [layers.Normalization(), layers.Resizing(image_size, image_size), layers.RandomFlip("horizontal"),
             layers.RandomRotation(factor=0.02), layers.RandomZoom(height_factor=0.2, width_factor=0.2)],
            name="data_augmentation",
        )
        # Compute the mean and the variance of the training data for normalization.
        data_augmentation.layers[0].adapt(x_train)
        vit_classifier = create_vit_classifier()
        history, results = run_experiment(vit_classifier)
    return {"_model": vit_classifier, "history": history.history, "evaluate": results,
            "predict": vit_classifier.predict(x_test[:4], verbose=0)}
