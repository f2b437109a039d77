"""keras.io/examples/vision/metric_learning (image similarity search) with its ``train_step`` in the torch form
of keras.io's torch guide: ``AnchorPositivePairs``, a ``keras.utils.Sequence`` whose every item is ONE array
``(2, num_classes, h, w, 3)`` (anchors and positives, one per class, picked with Python's ``random.choice``); an
``EmbeddingModel(keras.Model)`` built functionally (``Conv2D`` x3, ``GlobalAveragePooling2D``, ``Dense``,
``UnitNormalization``) whose ``train_step`` unpacks ``data[0], data[1]``, computes the similarity matrix with
``keras.ops.einsum("ae,pe->ap", ...)`` divided in place (``/=``) by a temperature, ``compute_loss`` against
``ops.arange(num_classes)``, ``loss.backward()`` and ``optimizer.apply``, then updates ``self.metrics`` by name;
then the example's search: ``predict``, ``np.einsum`` gram matrix, ``np.argsort`` near neighbours, a confusion
matrix.

The leading axis of the Sequence's array is not a batch (it is the pair: anchors, positives): on 2 replicas
``fit`` would hand one replica the anchors and the other the positives, each a batch of one. TensorFlow's
MirroredStrategy does that split too, then fails at ``data[1]``. ``run_batch_of_pairs`` (a variant) keeps the
example's model and step but yields the pairs as ``(anchors, positives)``: a tuple of two batches of
``num_classes`` rows (labels ``ops.arange`` of the rows seen), which replicas split by class, each comparing its
classes' anchors with its positives only (p68).

Shrunk: 8x8 RGB images of 4 classes (32x32, 10), 16 train and 16 test images per class, embeddings of 8,
conv filters 8/16/16 (32/64/128, kernel 3, strides 2 with "same" padding so 8x8 stays valid), 4 batches, 2 epochs.
"""

import random

import numpy as np
import torch

SOURCE = "https://keras.io/examples/vision/metric_learning/"


def _data(scale):
    rng = np.random.RandomState(0)
    num_classes, height_width = 4, 8
    y_train = np.repeat(np.arange(num_classes), 16 * scale)
    y_test = np.repeat(np.arange(num_classes), 16)
    base = rng.rand(num_classes, height_width, height_width, 3).astype("float32")
    x_train = (base[y_train] + 0.3 * rng.rand(len(y_train), height_width, height_width, 3)).astype("float32")
    x_test = (base[y_test] + 0.3 * rng.rand(len(y_test), height_width, height_width, 3)).astype("float32")
    return num_classes, height_width, x_train, y_train, x_test, y_test


def run(keras, strategy, workdir, scale=1, pairs_as_tuple=False):
    layers = keras.layers
    num_classes, height_width, x_train, y_train, x_test, y_test = _data(scale)
    class_idx_to_train_idxs = {i: list(np.where(y_train == i)[0]) for i in range(num_classes)}
    class_idx_to_test_idxs = {i: list(np.where(y_test == i)[0]) for i in range(num_classes)}

    class AnchorPositivePairs(keras.utils.Sequence):
        def __init__(self, num_batches):
            super().__init__()
            self.n_batches = num_batches

        def __len__(self):
            return self.n_batches

        def __getitem__(self, _idx):
            x = np.empty((2, num_classes, height_width, height_width, 3), dtype=np.float32)
            for class_idx in range(num_classes):
                examples_for_class = class_idx_to_train_idxs[class_idx]
                anchor_idx = random.choice(examples_for_class)
                positive_idx = random.choice(examples_for_class)
                while positive_idx == anchor_idx:
                    positive_idx = random.choice(examples_for_class)
                x[0, class_idx] = x_train[anchor_idx]
                x[1, class_idx] = x_train[positive_idx]
            return (x[0], x[1]) if pairs_as_tuple else x

    class EmbeddingModel(keras.Model):
        def train_step(self, data):
            # Note: Workaround for open issue, to be removed.
            if isinstance(data, tuple) and not pairs_as_tuple:
                data = data[0]
            anchors, positives = data[0], data[1]

            self.zero_grad()
            anchor_embeddings = self(anchors, training=True)
            positive_embeddings = self(positives, training=True)
            similarities = keras.ops.einsum("ae,pe->ap", anchor_embeddings, positive_embeddings)
            temperature = 0.2
            similarities /= temperature
            sparse_labels = keras.ops.arange(num_classes)
            if pairs_as_tuple:   # the variant: the classes this replica sees (all of them on one device)
                sparse_labels = keras.ops.arange(keras.ops.shape(similarities)[0])
            loss = self.compute_loss(y=sparse_labels, y_pred=similarities)
            loss.backward()
            trainable_weights = [v for v in self.trainable_weights]
            gradients = [v.value.grad for v in trainable_weights]
            with torch.no_grad():
                self.optimizer.apply(gradients, trainable_weights)

            for metric in self.metrics:
                if metric.name == "loss":
                    metric.update_state(loss)
                else:
                    metric.update_state(sparse_labels, similarities)
            return {m.name: m.result() for m in self.metrics}

    keras.utils.set_random_seed(0)
    random.seed(0)
    with strategy.scope():
        inputs = layers.Input(shape=(height_width, height_width, 3))
        x = layers.Conv2D(filters=8, kernel_size=3, strides=2, padding="same", activation="relu")(inputs)
        x = layers.Conv2D(filters=16, kernel_size=3, strides=2, padding="same", activation="relu")(x)
        x = layers.Conv2D(filters=16, kernel_size=3, strides=2, padding="same", activation="relu")(x)
        x = layers.GlobalAveragePooling2D()(x)
        embeddings = layers.Dense(units=8, activation=None)(x)
        embeddings = layers.UnitNormalization()(embeddings)
        model = EmbeddingModel(inputs, embeddings)
        model.compile(optimizer=keras.optimizers.Adam(learning_rate=1e-3),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    if pairs_as_tuple:   # the variant: Keras 3's symbolic build before fit would call the compiled loss with the
        # positives as targets: building it first on the similarity matrix's shapes skips that
        model.compute_loss(y=keras.ops.arange(num_classes), y_pred=keras.ops.zeros((num_classes, num_classes)))
    history = model.fit(AnchorPositivePairs(num_batches=4), epochs=2, verbose=0)

    near_neighbours_per_example = 4
    embeddings = model.predict(x_test, verbose=0)
    gram_matrix = np.einsum("ae,be->ab", embeddings, embeddings)
    near_neighbours = np.argsort(gram_matrix.T)[:, -(near_neighbours_per_example + 1):]
    confusion_matrix = np.zeros((num_classes, num_classes))
    for class_idx in range(num_classes):
        example_idxs = class_idx_to_test_idxs[class_idx][:10]
        for y_test_idx in example_idxs:
            for nn_idx in near_neighbours[y_test_idx][:-1]:
                nn_class_idx = y_test[nn_idx]
                confusion_matrix[class_idx, nn_class_idx] += 1
    return {"_model": model, "history": history.history, "embeddings": embeddings,
            "confusion_matrix": confusion_matrix}
