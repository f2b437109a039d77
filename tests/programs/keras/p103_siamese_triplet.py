"""keras.io/examples/vision/siamese_network as printed (Keras 3 version): an embedding ``Model`` over a base CNN
whose layers are frozen up to the one named "conv5_block1_out" (``layer.trainable = trainable`` in a loop), then
``Flatten``, ``Dense``+``BatchNormalization`` twice and ``Dense``; a ``DistanceLayer`` whose ``call(anchor,
positive, negative)`` takes three positional tensors and returns the pair ``(ap_distance, an_distance)``; the
``siamese_network = Model(inputs=[anchor_input, positive_input, negative_input], outputs=distances)``; a
``SiameseModel(Model)`` with ``call``, its own ``train_step``/``test_step`` over a ``_compute_loss`` returning the
PER-TRIPLET loss vector ``maximum(ap - an + margin, 0)`` (handed to ``tape.gradient`` as is), a ``loss_tracker``
in a ``metrics`` property; ``compile(optimizer=optimizers.Adam(0.0001))`` and ``fit`` on a dataset of UNLABELED
3-tuples (``Dataset.zip((anchor, positive, negative))``, ``shuffle``, ``map``, ``take``/``skip``, ``batch(32,
drop_remainder=False)``); then a ``CosineSimilarity`` metric object called twice (it accumulates) on the
embeddings of one batch taken with ``next(iter(train_dataset))``.

Totally Looks Like is made up: 16x16 pairs of noisy views of one random pattern and a negative from another.
``resnet.ResNet50(weights="imagenet")`` becomes a small conv stack (no weights to download) whose layer names end
with "conv5_block1_out", ``resnet.preprocess_input`` a ``Rescaling(1 / 255)``; the shuffles get seeds so runs repeat.
Shrunk: Dense 16/8/8 (512/256/256), batch 8 (32), 2 epochs (10), 40 triplets.
"""

import numpy as np

import multidev as md

SOURCE = "https://keras.io/examples/vision/siamese_network/"
target_shape, image_count = (16, 16), 40
NORMALIZATION = "BatchNormalization"   # "Identity": the check that the rest equals one device


def triplets(rng, n):
    protos = rng.uniform(0, 255, (n, *target_shape, 3))
    view = lambda p: np.clip(p + rng.normal(0, 25, p.shape), 0, 255).astype("float32")   # noqa: E731
    anchors, positives = view(protos), view(protos)
    negatives = view(protos[rng.permutation(n)])
    return anchors, positives, negatives


def run(keras, strategy, workdir, scale=1):
    layers, ops, metrics, optimizers, Model = keras.layers, keras.ops, keras.metrics, keras.optimizers, keras.Model
    norm = getattr(layers, NORMALIZATION)
    anchor_images, positive_images, negative_images = triplets(np.random.RandomState(0), image_count * scale)

    def preprocess_triplets(anchor, positive, negative):
        return (anchor, positive, negative)

    anchor_dataset = md.data.Dataset.from_tensor_slices(anchor_images)
    positive_dataset = md.data.Dataset.from_tensor_slices(positive_images)
    rng = np.random.RandomState(seed=42)
    rng.shuffle(negative_images)
    negative_dataset = md.data.Dataset.from_tensor_slices(negative_images)
    negative_dataset = negative_dataset.shuffle(buffer_size=4096, seed=1)
    dataset = md.data.Dataset.zip((anchor_dataset, positive_dataset, negative_dataset))
    dataset = dataset.shuffle(buffer_size=1024, seed=2)
    dataset = dataset.map(preprocess_triplets)
    train_dataset = dataset.take(round(image_count * scale * 0.8))
    val_dataset = dataset.skip(round(image_count * scale * 0.8))
    train_dataset = train_dataset.batch(8, drop_remainder=False)
    train_dataset = train_dataset.prefetch(2)
    val_dataset = val_dataset.batch(8, drop_remainder=False)
    val_dataset = val_dataset.prefetch(2)

    def base_model():
        inputs = keras.Input(shape=target_shape + (3,))
        x = layers.Conv2D(4, 3, strides=2, activation="relu", name="conv1_conv")(inputs)
        x = layers.Conv2D(4, 3, activation="relu", name="conv4_block6_out")(x)
        x = layers.Conv2D(8, 3, activation="relu", name="conv5_block1_out")(x)
        x = layers.Conv2D(8, 1, activation="relu", name="conv5_block3_out")(x)
        return Model(inputs, x)

    class DistanceLayer(layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)

        def call(self, anchor, positive, negative):
            ap_distance = ops.sum(ops.square(anchor - positive), -1)
            an_distance = ops.sum(ops.square(anchor - negative), -1)
            return (ap_distance, an_distance)

    class SiameseModel(Model):
        def __init__(self, siamese_network, margin=0.5):
            super().__init__()
            self.siamese_network = siamese_network
            self.margin = margin
            self.loss_tracker = metrics.Mean(name="loss")

        def call(self, inputs):
            return self.siamese_network(inputs)

        def train_step(self, data):
            with md.GradientTape() as tape:
                loss = self._compute_loss(data)
            gradients = tape.gradient(loss, self.siamese_network.trainable_weights)
            self.optimizer.apply_gradients(zip(gradients, self.siamese_network.trainable_weights))
            self.loss_tracker.update_state(loss)
            return {"loss": self.loss_tracker.result()}

        def test_step(self, data):
            loss = self._compute_loss(data)
            self.loss_tracker.update_state(loss)
            return {"loss": self.loss_tracker.result()}

        def _compute_loss(self, data):
            ap_distance, an_distance = self.siamese_network(data)
            loss = ap_distance - an_distance
            loss = ops.maximum(loss + self.margin, 0.0)
            return loss

        @property
        def metrics(self):
            return [self.loss_tracker]

    keras.utils.set_random_seed(0)
    with strategy.scope():
        base_cnn = base_model()
        preprocess_input = layers.Rescaling(1 / 255)
        flatten = layers.Flatten()(base_cnn.output)
        dense1 = layers.Dense(16, activation="relu")(flatten)
        dense1 = norm()(dense1)
        dense2 = layers.Dense(8, activation="relu")(dense1)
        dense2 = norm()(dense2)
        output = layers.Dense(8)(dense2)
        embedding = Model(base_cnn.input, output, name="Embedding")
        trainable = False
        for layer in base_cnn.layers:
            if layer.name == "conv5_block1_out":
                trainable = True
            layer.trainable = trainable
        anchor_input = layers.Input(name="anchor", shape=target_shape + (3,))
        positive_input = layers.Input(name="positive", shape=target_shape + (3,))
        negative_input = layers.Input(name="negative", shape=target_shape + (3,))
        distances = DistanceLayer()(
            embedding(preprocess_input(anchor_input)),
            embedding(preprocess_input(positive_input)),
            embedding(preprocess_input(negative_input)),
        )
        siamese_network = Model(inputs=[anchor_input, positive_input, negative_input], outputs=distances)
        siamese_model = SiameseModel(siamese_network)
        siamese_model.compile(optimizer=optimizers.Adam(0.0001))
    frozen = [keras.ops.convert_to_numpy(w).copy() for w in base_cnn.get_layer("conv1_conv").weights]
    history = siamese_model.fit(train_dataset, epochs=2, validation_data=val_dataset, verbose=0)

    sample = next(iter(train_dataset))
    anchor, positive, negative = sample
    anchor_embedding, positive_embedding, negative_embedding = (
        embedding(preprocess_input(anchor)), embedding(preprocess_input(positive)),
        embedding(preprocess_input(negative)))
    cosine_similarity = metrics.CosineSimilarity()
    positive_similarity = cosine_similarity(anchor_embedding, positive_embedding)
    negative_similarity = cosine_similarity(anchor_embedding, negative_embedding)
    moved = max(float(np.abs(keras.ops.convert_to_numpy(w) - f).max())
                for w, f in zip(base_cnn.get_layer("conv1_conv").weights, frozen))
    return {"_model": siamese_network, "history": history.history,
            "positive_similarity": keras.ops.convert_to_numpy(positive_similarity),
            "negative_similarity": keras.ops.convert_to_numpy(negative_similarity),
            "frozen_moved": moved, "trainable": len(siamese_network.trainable_weights)}
