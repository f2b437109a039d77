"""keras.io/examples/vision/nnclr as printed (``tf.GradientTape`` -> ``md.GradientTape``): an ``NNCLR`` model (no
``call``) whose ``__init__`` makes a support-set QUEUE ``keras.Variable(keras.utils.normalize(keras.random.normal(
(queue_size, feature_dimensions)), axis=1, order=2), trainable=False)`` sized from ``self.encoder.output_shape``;
the nearest neighbour of each projection in the queue (``ops.take`` of the ``argmax`` similarity, straight through
``projections + ops.stop_gradient(nn - projections)``); the contrastive loss VECTOR of four similarity matrices, and
``self.feature_queue.assign(ops.concatenate([projections_1, self.feature_queue[:-batch_size]], axis=0))`` inside
``train_step``; contrastive and correlation accuracies; a linear probe with its own optimizer; ``train_step``
returning the raw losses; then fine-tuning ``Sequential([augmenter, encoder, Dense(10)])``.

STL-10 is made up as p90's; the augmenters are p90's (RandomFlip, RandomTranslation, RandomZoom, a colour affine);
the encoder's BatchNormalization-free conv stack is the example's with 8 filters (128). Shrunk: queue 40 (10000),
1 epoch (25), batch 20 (16 unlabeled + 4 labeled per step).
"""

import numpy as np

import multidev as md

from tests.programs.keras import p90_semisupervised_simclr as p90
from tests.programs.keras import p92_reptile as p92

SOURCE = "https://keras.io/examples/vision/nnclr/"
temperature, queue_size, width, num_epochs = 0.1, 40, 8, 1
contrastive_augmenter = {"min_area": 0.2, "brightness": 0.5, "jitter": 0.5}
classification_augmenter = {"min_area": 0.75, "brightness": 0.3, "jitter": 0.1}


def run(keras, strategy, workdir, scale=1):
    layers, ops = keras.layers, keras.ops
    rng = np.random.RandomState(0)
    n_unlabeled, n_labeled, steps = 64 * scale, 16, 4
    labels_train, labels_test = rng.randint(0, 10, n_labeled), rng.randint(0, 10, 16)
    unlabeled = md.data.Dataset.from_tensor_slices(
        (p90.images(rng, n_unlabeled, np.zeros(n_unlabeled)), np.full(n_unlabeled, -1, "int64"))
    ).shuffle(10 * n_unlabeled // steps, seed=0).batch(n_unlabeled // steps)
    labeled = md.data.Dataset.from_tensor_slices((p90.images(rng, n_labeled, labels_train), labels_train)
                                                 ).shuffle(40, seed=1).batch(n_labeled // steps)
    test_dataset = md.data.Dataset.from_tensor_slices((p90.images(rng, 16, labels_test), labels_test)).batch(20)
    train_dataset = md.data.Dataset.zip((unlabeled, labeled))

    class RandomColorAffine(layers.Layer):
        def __init__(self, brightness=0, jitter=0, **kwargs):
            super().__init__(**kwargs)
            self.brightness, self.jitter = brightness, jitter

        def call(self, images, training=True):
            if training:
                batch_size = ops.shape(images)[0]
                brightness_scales = 1 + keras.random.uniform((batch_size, 1, 1, 1), minval=-self.brightness,
                                                             maxval=self.brightness)
                jitter_matrices = keras.random.uniform((batch_size, 1, 3, 3), minval=-self.jitter, maxval=self.jitter)
                color_transforms = ops.eye(3) * brightness_scales + jitter_matrices
                images = ops.clip(ops.matmul(images, color_transforms), 0, 1)
            return images

    def augmenter(brightness, name, min_area, jitter):
        zoom_factor = 1.0 - np.sqrt(min_area)
        return keras.Sequential([
            layers.Input(shape=(p90.image_size, p90.image_size, 3)),
            layers.Rescaling(1 / 255),
            layers.RandomFlip("horizontal"),
            layers.RandomTranslation(zoom_factor / 2, zoom_factor / 2),
            layers.RandomZoom((-zoom_factor, 0.0), (-zoom_factor, 0.0)),
            RandomColorAffine(brightness, jitter),
        ], name=name)

    def encoder():
        return keras.Sequential([
            layers.Input(shape=(p90.image_size, p90.image_size, 3)),
            layers.Conv2D(width, kernel_size=3, strides=2, activation="relu"),
            layers.Conv2D(width, kernel_size=3, strides=2, activation="relu"),
            layers.Conv2D(width, kernel_size=3, strides=2, activation="relu"),
            layers.Conv2D(width, kernel_size=3, strides=2, activation="relu"),
            layers.Flatten(),
            layers.Dense(width, activation="relu"),
        ], name="encoder")

    class NNCLR(keras.Model):
        def __init__(self, temperature, queue_size):
            super().__init__()
            self.probe_accuracy = keras.metrics.SparseCategoricalAccuracy()
            self.correlation_accuracy = keras.metrics.SparseCategoricalAccuracy()
            self.contrastive_accuracy = keras.metrics.SparseCategoricalAccuracy()
            self.probe_loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
            self.contrastive_augmenter = augmenter(name="contrastive", **contrastive_augmenter)
            self.classification_augmenter = augmenter(name="classification", **classification_augmenter)
            self.encoder = encoder()
            self.projection_head = keras.Sequential([
                layers.Input(shape=(width,)), layers.Dense(width, activation="relu"), layers.Dense(width),
            ], name="projection_head")
            self.linear_probe = keras.Sequential([layers.Input(shape=(width,)), layers.Dense(10)],
                                                 name="linear_probe")
            self.temperature = temperature
            feature_dimensions = self.encoder.output_shape[1]
            self.feature_queue = keras.Variable(
                keras.utils.normalize(keras.random.normal(shape=(queue_size, feature_dimensions)), axis=1, order=2),
                trainable=False)

        def compile(self, contrastive_optimizer, probe_optimizer, **kwargs):
            super().compile(**kwargs)
            self.contrastive_optimizer = contrastive_optimizer
            self.probe_optimizer = probe_optimizer

        def nearest_neighbour(self, projections):
            support_similarities = ops.matmul(projections, ops.transpose(self.feature_queue))
            nn_projections = ops.take(self.feature_queue, ops.argmax(support_similarities, axis=1), axis=0)
            return projections + ops.stop_gradient(nn_projections - projections)

        def update_contrastive_accuracy(self, features_1, features_2):
            features_1 = keras.utils.normalize(features_1, axis=1, order=2)
            features_2 = keras.utils.normalize(features_2, axis=1, order=2)
            similarities = ops.matmul(features_1, ops.transpose(features_2))
            batch_size = ops.shape(features_1)[0]
            contrastive_labels = ops.arange(batch_size)
            self.contrastive_accuracy.update_state(
                ops.concatenate([contrastive_labels, contrastive_labels], axis=0),
                ops.concatenate([similarities, ops.transpose(similarities)], axis=0))

        def update_correlation_accuracy(self, features_1, features_2):
            features_1 = (features_1 - ops.mean(features_1, axis=0)) / ops.std(features_1, axis=0)
            features_2 = (features_2 - ops.mean(features_2, axis=0)) / ops.std(features_2, axis=0)
            batch_size = ops.shape(features_1)[0]
            cross_correlation = ops.matmul(ops.transpose(features_1), features_2) / batch_size
            feature_dim = ops.shape(features_1)[1]
            correlation_labels = ops.arange(feature_dim)
            self.correlation_accuracy.update_state(
                ops.concatenate([correlation_labels, correlation_labels], axis=0),
                ops.concatenate([cross_correlation, ops.transpose(cross_correlation)], axis=0))

        def contrastive_loss(self, projections_1, projections_2):
            projections_1 = keras.utils.normalize(projections_1, axis=1, order=2)
            projections_2 = keras.utils.normalize(projections_2, axis=1, order=2)
            similarities_1_2_1 = ops.matmul(self.nearest_neighbour(projections_1),
                                            ops.transpose(projections_2)) / self.temperature
            similarities_1_2_2 = ops.matmul(projections_2, ops.transpose(
                self.nearest_neighbour(projections_1))) / self.temperature
            similarities_2_1_1 = ops.matmul(self.nearest_neighbour(projections_2),
                                            ops.transpose(projections_1)) / self.temperature
            similarities_2_1_2 = ops.matmul(projections_1, ops.transpose(
                self.nearest_neighbour(projections_2))) / self.temperature
            batch_size = ops.shape(projections_1)[0]
            contrastive_labels = ops.arange(batch_size)
            loss = keras.losses.sparse_categorical_crossentropy(
                ops.concatenate([contrastive_labels] * 4, axis=0),
                ops.concatenate([similarities_1_2_1, similarities_1_2_2, similarities_2_1_1, similarities_2_1_2],
                                axis=0),
                from_logits=True)
            self.feature_queue.assign(ops.concatenate([projections_1, self.feature_queue[:-batch_size]], axis=0))
            return loss

        def train_step(self, data):
            (unlabeled_images, _), (labeled_images, labels) = data
            images = ops.concatenate((unlabeled_images, labeled_images), axis=0)
            augmented_images_1 = self.contrastive_augmenter(images)
            augmented_images_2 = self.contrastive_augmenter(images)
            with md.GradientTape() as tape:
                features_1 = self.encoder(augmented_images_1)
                features_2 = self.encoder(augmented_images_2)
                projections_1 = self.projection_head(features_1)
                projections_2 = self.projection_head(features_2)
                contrastive_loss = self.contrastive_loss(projections_1, projections_2)
            gradients = tape.gradient(contrastive_loss,
                                      self.encoder.trainable_weights + self.projection_head.trainable_weights)
            self.contrastive_optimizer.apply_gradients(
                zip(gradients, self.encoder.trainable_weights + self.projection_head.trainable_weights))
            self.update_contrastive_accuracy(features_1, features_2)
            self.update_correlation_accuracy(features_1, features_2)
            preprocessed_images = self.classification_augmenter(labeled_images)
            with md.GradientTape() as tape:
                features = self.encoder(preprocessed_images)
                class_logits = self.linear_probe(features)
                probe_loss = self.probe_loss(labels, class_logits)
            gradients = tape.gradient(probe_loss, self.linear_probe.trainable_weights)
            self.probe_optimizer.apply_gradients(zip(gradients, self.linear_probe.trainable_weights))
            self.probe_accuracy.update_state(labels, class_logits)
            return {"c_loss": contrastive_loss, "c_acc": self.contrastive_accuracy.result(),
                    "r_acc": self.correlation_accuracy.result(), "p_loss": probe_loss,
                    "p_acc": self.probe_accuracy.result()}

        def test_step(self, data):
            labeled_images, labels = data
            preprocessed_images = self.classification_augmenter(labeled_images, training=False)
            features = self.encoder(preprocessed_images, training=False)
            class_logits = self.linear_probe(features, training=False)
            probe_loss = self.probe_loss(labels, class_logits)
            self.probe_accuracy.update_state(labels, class_logits)
            return {"p_loss": probe_loss, "p_acc": self.probe_accuracy.result()}

    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = NNCLR(temperature=temperature, queue_size=queue_size)
        model.compile(contrastive_optimizer=keras.optimizers.Adam(), probe_optimizer=keras.optimizers.Adam(),
                      jit_compile=False)
    pretrain_history = model.fit(train_dataset, epochs=num_epochs, validation_data=test_dataset, verbose=0)
    with strategy.scope():
        finetuning_model = keras.Sequential([
            layers.Input(shape=(p90.image_size, p90.image_size, 3)),
            augmenter(name="classification", **classification_augmenter), model.encoder, layers.Dense(10),
        ], name="finetuning_model")
        finetuning_model.compile(optimizer=keras.optimizers.Adam(),
                                 loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                                 metrics=[keras.metrics.SparseCategoricalAccuracy(name="acc")], jit_compile=False)
    finetuning_history = finetuning_model.fit(labeled, epochs=num_epochs, validation_data=test_dataset, verbose=0)
    return {"_model": finetuning_model, "pretrain": pretrain_history.history, "finetune": finetuning_history.history,
            "queue": keras.ops.convert_to_numpy(model.feature_queue), "queue_spread": p92.copies_spread_of(
                [model.feature_queue]), "spread": p92.copies_spread(finetuning_model)}
