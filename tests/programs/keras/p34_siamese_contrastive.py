"""keras.io/examples/vision/siamese_contrastive: one embedding network shared by two towers, a ``Lambda``
layer computing the Euclidean distance (``ops.sqrt(ops.maximum(sum_square, epsilon))``), the contrastive loss
as a closure (``loss(margin=1)``), ``RMSprop``, ``accuracy`` on a sigmoid output, ``fit`` on a list of two
inputs with ``validation_data``, ``evaluate``.

One change for two replicas: ``BatchNormalization(synchronized=sync)`` (the example's three
BatchNormalization layers normalise each replica's half otherwise, as on TensorFlow's MirroredStrategy;
with ``synchronized=True`` each normalises the global batch, as one device). Shrunk: 12x12 images, 64
training and 32 validation pairs (labels from the pair's synthetic classes), Conv2D(4, 3)/Conv2D(8, 3),
batch 16, 2 epochs.
"""

import numpy as np

SOURCE = "https://keras.io/examples/vision/siamese_contrastive/"
MARGIN = 1   # Margin for contrastive loss.


def make_pairs(x, y, rng):
    """Creates a tuple containing image pairs with corresponding label (1: different classes, 0: same)."""
    num_classes = max(y) + 1
    digit_indices = [np.where(y == i)[0] for i in range(num_classes)]
    pairs, labels = [], []
    for idx1 in range(len(x)):
        # add a matching example
        x1 = x[idx1]
        label1 = y[idx1]
        idx2 = rng.choice(digit_indices[label1])
        x2 = x[idx2]
        pairs += [[x1, x2]]
        labels += [0]
        # add a non-matching example
        label2 = rng.randint(0, num_classes - 1)
        while label2 == label1:
            label2 = rng.randint(0, num_classes - 1)
        idx2 = rng.choice(digit_indices[label2])
        x2 = x[idx2]
        pairs += [[x1, x2]]
        labels += [1]
    return np.array(pairs), np.array(labels).astype("float32")


def run(keras, strategy, workdir, scale=1):
    ops = keras.ops

    def euclidean_distance(vects):
        """Find the Euclidean distance between two vectors."""
        x, y = vects
        sum_square = ops.sum(ops.square(x - y), axis=1, keepdims=True)
        return ops.sqrt(ops.maximum(sum_square, keras.backend.epsilon()))

    def loss(margin=1):
        """Provides 'contrastive_loss' an enclosing scope with variable 'margin'."""

        def contrastive_loss(y_true, y_pred):
            square_pred = ops.square(y_pred)
            margin_square = ops.square(ops.maximum(margin - (y_pred), 0))
            return ops.mean((1 - y_true) * square_pred + (y_true) * margin_square)

        return contrastive_loss

    rng = np.random.RandomState(0)
    x = rng.random((48 * scale, 12, 12, 1)).astype("float32")
    y = rng.randint(0, 4, 48 * scale)
    pairs_train, labels_train = make_pairs(x[:32 * scale], y[:32 * scale], rng)
    pairs_val, labels_val = make_pairs(x[32 * scale:], y[32 * scale:], rng)
    x_train_1, x_train_2 = pairs_train[:, 0], pairs_train[:, 1]
    x_val_1, x_val_2 = pairs_val[:, 0], pairs_val[:, 1]

    keras.utils.set_random_seed(0)
    sync = strategy.num_replicas_in_sync > 1   # Keras 3 on torch refuses synchronized=True without a strategy
    with strategy.scope():
        input = keras.layers.Input((12, 12, 1))
        x = keras.layers.BatchNormalization(synchronized=sync)(input)
        x = keras.layers.Conv2D(4, (3, 3), activation="tanh")(x)
        x = keras.layers.AveragePooling2D(pool_size=(2, 2))(x)
        x = keras.layers.Conv2D(8, (3, 3), activation="tanh")(x)
        x = keras.layers.AveragePooling2D(pool_size=(2, 2))(x)
        x = keras.layers.Flatten()(x)
        x = keras.layers.BatchNormalization(synchronized=sync)(x)
        x = keras.layers.Dense(10, activation="tanh")(x)
        embedding_network = keras.Model(input, x)

        input_1 = keras.layers.Input((12, 12, 1))
        input_2 = keras.layers.Input((12, 12, 1))
        # As mentioned above, Siamese Network share weights between tower networks (sister networks).
        tower_1 = embedding_network(input_1)
        tower_2 = embedding_network(input_2)
        merge_layer = keras.layers.Lambda(euclidean_distance, output_shape=(1,))([tower_1, tower_2])
        normal_layer = keras.layers.BatchNormalization(synchronized=sync)(merge_layer)
        output_layer = keras.layers.Dense(1, activation="sigmoid")(normal_layer)
        siamese = keras.Model(inputs=[input_1, input_2], outputs=output_layer)
        siamese.compile(loss=loss(margin=MARGIN), optimizer="RMSprop", metrics=["accuracy"])
    history = siamese.fit([x_train_1, x_train_2], labels_train, validation_data=([x_val_1, x_val_2], labels_val),
                          batch_size=16, epochs=2, verbose=0)
    results = siamese.evaluate([x_val_1, x_val_2], labels_val, verbose=0)
    return {"_model": siamese, "history": history.history, "evaluate": results,
            "predict": siamese.predict([x_val_1[:8], x_val_2[:8]], verbose=0)}
