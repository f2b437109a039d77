"""keras.io/examples/vision/token_learner as printed (Keras 3): a ViT whose augmentation inside the model is
``Rescaling``, ``Resizing(INPUT + 20)``, ``RandomCrop(IMAGE_SIZE)`` (a random window of a LARGER image: one offset
per batch, drawn by the layer's ``SeedGenerator``) and ``RandomFlip``; patches by a strided ``Conv2D`` reshaped to
tokens; ``position_embedding`` adding ``layers.Embedding(...)(ops.arange(...))`` (a constant: called on a tensor, not
a ``KerasTensor``, its weights are not the model's, on Keras 3 and md.keras alike); transformer blocks
(``MultiHeadAttention(dropout=0.1)``, ``Dense(activation=ops.gelu)``); in the middle the ``token_learner`` (a
``Sequential`` of Conv2D attention maps, ``Reshape((-1, n))``, ``Permute((2, 1))``, ``ops.expand_dims(...) *
inputs``, ``ops.mean(axis=2)``) after a ``Reshape`` computed from ``encoded_patches.shape``; ``GlobalAvgPool1D``,
``AdamW``, top-5 accuracy, a best-only weights checkpoint reloaded before ``evaluate``.

On torch, Keras 3 keeps that constant's autograd history in the graph: the second step's backward fails on one
device ("backward through the graph a second time"); p73 holds it with ``ops.stop_gradient`` (the same numbers).
The example's ``tf.data`` pipelines are arrays here; its ``WarmUpCosine`` schedule is built but never given to the
optimizer (as printed: ``AdamW(learning_rate=LEARNING_RATE)``), so it is left out. In inference Keras 3.15's
``RandomCrop`` passes the larger image unchanged: the patch count stays the same only because the larger side
floors to it (52 / 6 and 48 / 6 in the example, 20 / 6 and 18 / 6 here). Shrunk: 16x16 images of 10 classes
(32x32), crop 18 (48), patch 6, projection 16 (128), 2 heads (4), 2 layers (4), 4 tokens (8), 64 training, 16
validation and 16 test images, batch 16, 2 epochs.
"""

import math
import os

import numpy as np

SOURCE = "https://keras.io/examples/vision/token_learner/"


def run(keras, strategy, workdir, scale=1, constant_positions=False):
    layers, ops = keras.layers, keras.ops
    BATCH_SIZE, EPOCHS, LEARNING_RATE, WEIGHT_DECAY = 16, 2, 1e-3, 1e-4
    INPUT_SHAPE, NUM_CLASSES, IMAGE_SIZE, PATCH_SIZE = (16, 16, 3), 10, 18, 6
    NUM_PATCHES = (IMAGE_SIZE // PATCH_SIZE) ** 2
    LAYER_NORM_EPS, PROJECTION_DIM, NUM_HEADS, NUM_LAYERS = 1e-6, 16, 2, 2
    MLP_UNITS = [PROJECTION_DIM * 2, PROJECTION_DIM]
    NUM_TOKENS = 4

    def position_embedding(projected_patches, num_patches=NUM_PATCHES, projection_dim=PROJECTION_DIM):
        positions = ops.arange(start=0, stop=num_patches, step=1)
        encoded_positions = layers.Embedding(input_dim=num_patches, output_dim=projection_dim)(positions)
        if constant_positions:   # p73: what the graph holds anyway, without the autograd history Keras 3 keeps
            encoded_positions = ops.stop_gradient(encoded_positions)
        return projected_patches + encoded_positions

    def mlp(x, dropout_rate, hidden_units):
        for units in hidden_units:
            x = layers.Dense(units, activation=ops.gelu)(x)
            x = layers.Dropout(dropout_rate)(x)
        return x

    def token_learner(inputs, number_of_tokens=NUM_TOKENS):
        x = layers.LayerNormalization(epsilon=LAYER_NORM_EPS)(inputs)
        attention_maps = keras.Sequential([
            layers.Conv2D(filters=number_of_tokens, kernel_size=(3, 3), activation=ops.gelu, padding="same",
                          use_bias=False),
            layers.Conv2D(filters=number_of_tokens, kernel_size=(3, 3), activation=ops.gelu, padding="same",
                          use_bias=False),
            layers.Conv2D(filters=number_of_tokens, kernel_size=(3, 3), activation=ops.gelu, padding="same",
                          use_bias=False),
            layers.Conv2D(filters=number_of_tokens, kernel_size=(3, 3), activation="sigmoid", padding="same",
                          use_bias=False),
            layers.Reshape((-1, number_of_tokens)),
            layers.Permute((2, 1)),
        ])(x)
        num_filters = inputs.shape[-1]
        inputs = layers.Reshape((1, -1, num_filters))(inputs)
        attended_inputs = ops.expand_dims(attention_maps, axis=-1) * inputs
        outputs = ops.mean(attended_inputs, axis=2)
        return outputs

    def transformer(encoded_patches):
        x1 = layers.LayerNormalization(epsilon=LAYER_NORM_EPS)(encoded_patches)
        attention_output = layers.MultiHeadAttention(num_heads=NUM_HEADS, key_dim=PROJECTION_DIM, dropout=0.1)(x1, x1)
        x2 = layers.Add()([attention_output, encoded_patches])
        x3 = layers.LayerNormalization(epsilon=LAYER_NORM_EPS)(x2)
        x4 = mlp(x3, hidden_units=MLP_UNITS, dropout_rate=0.1)
        encoded_patches = layers.Add()([x4, x2])
        return encoded_patches

    def create_vit_classifier(use_token_learner=True, token_learner_units=NUM_TOKENS):
        inputs = layers.Input(shape=INPUT_SHAPE)
        augmented = data_augmentation(inputs)
        projected_patches = layers.Conv2D(filters=PROJECTION_DIM, kernel_size=(PATCH_SIZE, PATCH_SIZE),
                                          strides=(PATCH_SIZE, PATCH_SIZE), padding="VALID")(augmented)
        _, h, w, c = projected_patches.shape
        projected_patches = layers.Reshape((h * w, c))(projected_patches)
        encoded_patches = position_embedding(projected_patches)
        encoded_patches = layers.Dropout(0.1)(encoded_patches)
        for i in range(NUM_LAYERS):
            encoded_patches = transformer(encoded_patches)
            if use_token_learner and i == NUM_LAYERS // 2:
                _, hh, c = encoded_patches.shape
                h = int(math.sqrt(hh))
                encoded_patches = layers.Reshape((h, h, c))(encoded_patches)
                encoded_patches = token_learner(encoded_patches, token_learner_units)
        representation = layers.LayerNormalization(epsilon=LAYER_NORM_EPS)(encoded_patches)
        representation = layers.GlobalAvgPool1D()(representation)
        outputs = layers.Dense(NUM_CLASSES, activation="softmax")(representation)
        return keras.Model(inputs=inputs, outputs=outputs)

    def run_experiment(model):
        optimizer = keras.optimizers.AdamW(learning_rate=LEARNING_RATE, weight_decay=WEIGHT_DECAY)
        model.compile(optimizer=optimizer, loss="sparse_categorical_crossentropy",
                      metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy"),
                               keras.metrics.SparseTopKCategoricalAccuracy(5, name="top-5-accuracy")])
        checkpoint_filepath = os.path.join(workdir, "checkpoint.weights.h5")
        checkpoint_callback = keras.callbacks.ModelCheckpoint(checkpoint_filepath, monitor="val_accuracy",
                                                              save_best_only=True, save_weights_only=True)
        history = model.fit(x_train, y_train, batch_size=BATCH_SIZE, epochs=EPOCHS, validation_data=(x_val, y_val),
                            callbacks=[checkpoint_callback], verbose=0)
        model.load_weights(checkpoint_filepath)
        _, accuracy, top_5_accuracy = model.evaluate(x_test, y_test, batch_size=BATCH_SIZE, verbose=0)
        return history, accuracy, top_5_accuracy

    rng = np.random.RandomState(0)
    labels = rng.randint(0, NUM_CLASSES, (96 * scale, 1))
    x = (rng.rand(96 * scale, *INPUT_SHAPE) * 128 + labels[:, :, None, None] * 12).astype("float32")
    x_train, y_train = x[:64 * scale], labels[:64 * scale]
    x_val, y_val, x_test, y_test = x[-32:-16], labels[-32:-16], x[-16:], labels[-16:]
    keras.utils.set_random_seed(0)
    with strategy.scope():
        data_augmentation = keras.Sequential([layers.Rescaling(1 / 255.0),
                                              layers.Resizing(INPUT_SHAPE[0] + 4, INPUT_SHAPE[0] + 4),
                                              layers.RandomCrop(IMAGE_SIZE, IMAGE_SIZE),
                                              layers.RandomFlip("horizontal")], name="data_augmentation")
        vit_token_learner = create_vit_classifier()
        history, accuracy, top_5_accuracy = run_experiment(vit_token_learner)
    return {"_model": vit_token_learner, "history": history.history, "accuracy": accuracy, "top5": top_5_accuracy,
            "predict": vit_token_learner.predict(x_test, verbose=0)}
