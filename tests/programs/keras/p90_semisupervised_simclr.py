"""keras.io/examples/vision/semisupervised_simclr as printed (``tf.GradientTape`` -> ``md.GradientTape``, ``tf.*``
-> ``keras.ops``/``keras.random``): augmenters (Rescaling, RandomFlip, RandomTranslation, RandomZoom and a custom
``RandomColorAffine`` layer drawing per-image brightness and jitter with the batch size of ``ops.shape(images)[0]``);
a supervised baseline; a ``ContrastiveModel`` (no ``call``) whose own ``compile(contrastive_optimizer,
probe_optimizer, **kwargs)`` calls ``super().compile(**kwargs)`` and makes a Keras loss and four metrics, whose
``metrics`` property lists them, and whose ``train_step`` takes a zipped ``((unlabeled, _), (labeled, labels))``
batch of two sizes, applies a per-example NT-Xent loss VECTOR (the tape differentiates its sum: the similarities of
every pair of images in the batch) with one optimizer and the probe's ``SparseCategoricalCrossentropy`` with the
other, returning ``{m.name: m.result() for m in self.metrics}``; a ``test_step`` logging ``self.metrics[2:]``; then
fine-tuning ``Sequential([augmenter, pretraining_model.encoder, Dense(10)])``; ``self.encoder.summary()`` in
``__init__`` (printed to a buffer here).

STL-10 is made up: 32x32 RGB images (96x96) of 10 classes, 64 unlabeled and 16 labeled (100000, 5000), 16 test.
Shrunk: width 8 (128), batch 20 (525: 16 unlabeled + 4 labeled per step), 1 epoch (20).
"""

import contextlib
import io
import math

import numpy as np

import multidev as md

SOURCE = "https://keras.io/examples/vision/semisupervised_simclr/"
unlabeled_dataset_size, labeled_dataset_size, image_size, image_channels = 64, 16, 32, 3
num_epochs, batch_size, width, temperature = 1, 20, 8, 0.1
contrastive_augmentation = {"min_area": 0.25, "brightness": 0.6, "jitter": 0.2}
classification_augmentation = {"min_area": 0.75, "brightness": 0.3, "jitter": 0.1}


def images(rng, n, labels):
    base = rng.uniform(0, 255, (n, image_size, image_size, image_channels)) * 0.6 + labels[:, None, None, None] * 10
    return base.astype("float32")


def run(keras, strategy, workdir, scale=1, per_replica_datasets=False):
    layers, ops = keras.layers, keras.ops
    rng = np.random.RandomState(0)
    steps_per_epoch = (unlabeled_dataset_size * scale + labeled_dataset_size) // batch_size
    unlabeled_batch_size = unlabeled_dataset_size * scale // steps_per_epoch
    labeled_batch_size = labeled_dataset_size // steps_per_epoch
    unlabeled_labels = np.full(unlabeled_dataset_size * scale, -1, "int64")
    train_labels, test_labels = rng.randint(0, 10, labeled_dataset_size), rng.randint(0, 10, 16)
    unlabeled_train_dataset = md.data.Dataset.from_tensor_slices(
        (images(rng, len(unlabeled_labels), np.zeros_like(unlabeled_labels)), unlabeled_labels)
    ).shuffle(buffer_size=10 * unlabeled_batch_size, seed=0).batch(unlabeled_batch_size)
    labeled_train_dataset = md.data.Dataset.from_tensor_slices(
        (images(rng, labeled_dataset_size, train_labels), train_labels)
    ).shuffle(buffer_size=10 * labeled_batch_size, seed=1).batch(labeled_batch_size)
    test_dataset = md.data.Dataset.from_tensor_slices((images(rng, 16, test_labels), test_labels)).batch(batch_size)
    train_dataset = md.data.Dataset.zip((unlabeled_train_dataset, labeled_train_dataset))
    if per_replica_datasets:   # p91: each replica zips its own shares of the two batches (multidev's way)
        train_dataset = strategy.distribute_datasets_from_function(lambda ctx: md.data.Dataset.zip((
            unlabeled_train_dataset.unbatch().batch(ctx.get_per_replica_batch_size(unlabeled_batch_size)),
            labeled_train_dataset.unbatch().batch(ctx.get_per_replica_batch_size(labeled_batch_size)))))

    class RandomColorAffine(layers.Layer):
        def __init__(self, brightness=0, jitter=0, **kwargs):
            super().__init__(**kwargs)
            self.brightness = brightness
            self.jitter = jitter

        def get_config(self):
            config = super().get_config()
            config.update({"brightness": self.brightness, "jitter": self.jitter})
            return config

        def call(self, images, training=True):
            if training:
                batch_size = ops.shape(images)[0]
                brightness_scales = 1 + keras.random.uniform((batch_size, 1, 1, 1), minval=-self.brightness,
                                                             maxval=self.brightness)
                jitter_matrices = keras.random.uniform((batch_size, 1, 3, 3), minval=-self.jitter, maxval=self.jitter)
                color_transforms = ops.eye(3) * brightness_scales + jitter_matrices
                images = ops.clip(ops.matmul(images, color_transforms), 0, 1)
            return images

    def get_augmenter(min_area, brightness, jitter):
        zoom_factor = 1.0 - math.sqrt(min_area)
        return keras.Sequential([
            layers.Rescaling(1 / 255),
            layers.RandomFlip("horizontal"),
            layers.RandomTranslation(zoom_factor / 2, zoom_factor / 2),
            layers.RandomZoom((-zoom_factor, 0.0), (-zoom_factor, 0.0)),
            RandomColorAffine(brightness, jitter),
        ])

    def get_encoder():
        return keras.Sequential([
            layers.Conv2D(width, kernel_size=3, strides=2, activation="relu"),
            layers.Conv2D(width, kernel_size=3, strides=2, activation="relu"),
            layers.Conv2D(width, kernel_size=3, strides=2, activation="relu"),
            layers.Conv2D(width, kernel_size=3, strides=2, activation="relu"),
            layers.Flatten(),
            layers.Dense(width, activation="relu"),
        ], name="encoder")

    class ContrastiveModel(keras.Model):
        def __init__(self):
            super().__init__()
            self.temperature = temperature
            self.contrastive_augmenter = get_augmenter(**contrastive_augmentation)
            self.classification_augmenter = get_augmenter(**classification_augmentation)
            self.encoder = get_encoder()
            self.projection_head = keras.Sequential([
                keras.Input(shape=(width,)), layers.Dense(width, activation="relu"), layers.Dense(width),
            ], name="projection_head")
            self.linear_probe = keras.Sequential([layers.Input(shape=(width,)), layers.Dense(10)],
                                                 name="linear_probe")
            self.encoder.summary()
            self.projection_head.summary()
            self.linear_probe.summary()

        def compile(self, contrastive_optimizer, probe_optimizer, **kwargs):
            super().compile(**kwargs)
            self.contrastive_optimizer = contrastive_optimizer
            self.probe_optimizer = probe_optimizer
            self.probe_loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
            self.contrastive_loss_tracker = keras.metrics.Mean(name="c_loss")
            self.contrastive_accuracy = keras.metrics.SparseCategoricalAccuracy(name="c_acc")
            self.probe_loss_tracker = keras.metrics.Mean(name="p_loss")
            self.probe_accuracy = keras.metrics.SparseCategoricalAccuracy(name="p_acc")

        @property
        def metrics(self):
            return [self.contrastive_loss_tracker, self.contrastive_accuracy, self.probe_loss_tracker,
                    self.probe_accuracy]

        def contrastive_loss(self, projections_1, projections_2):
            projections_1 = ops.normalize(projections_1, axis=1)
            projections_2 = ops.normalize(projections_2, axis=1)
            similarities = ops.matmul(projections_1, ops.transpose(projections_2)) / self.temperature
            batch_size = ops.shape(projections_1)[0]
            contrastive_labels = ops.arange(batch_size)
            self.contrastive_accuracy.update_state(contrastive_labels, similarities)
            self.contrastive_accuracy.update_state(contrastive_labels, ops.transpose(similarities))
            loss_1_2 = keras.losses.sparse_categorical_crossentropy(contrastive_labels, similarities,
                                                                    from_logits=True)
            loss_2_1 = keras.losses.sparse_categorical_crossentropy(contrastive_labels, ops.transpose(similarities),
                                                                    from_logits=True)
            return (loss_1_2 + loss_2_1) / 2

        def train_step(self, data):
            (unlabeled_images, _), (labeled_images, labels) = data
            images = ops.concatenate((unlabeled_images, labeled_images), axis=0)
            augmented_images_1 = self.contrastive_augmenter(images, training=True)
            augmented_images_2 = self.contrastive_augmenter(images, training=True)
            with md.GradientTape() as tape:
                features_1 = self.encoder(augmented_images_1, training=True)
                features_2 = self.encoder(augmented_images_2, training=True)
                projections_1 = self.projection_head(features_1, training=True)
                projections_2 = self.projection_head(features_2, training=True)
                contrastive_loss = self.contrastive_loss(projections_1, projections_2)
            gradients = tape.gradient(contrastive_loss,
                                      self.encoder.trainable_weights + self.projection_head.trainable_weights)
            self.contrastive_optimizer.apply_gradients(
                zip(gradients, self.encoder.trainable_weights + self.projection_head.trainable_weights))
            self.contrastive_loss_tracker.update_state(contrastive_loss)
            preprocessed_images = self.classification_augmenter(labeled_images, training=True)
            with md.GradientTape() as tape:
                features = self.encoder(preprocessed_images, training=False)
                class_logits = self.linear_probe(features, training=True)
                probe_loss = self.probe_loss(labels, class_logits)
            gradients = tape.gradient(probe_loss, self.linear_probe.trainable_weights)
            self.probe_optimizer.apply_gradients(zip(gradients, self.linear_probe.trainable_weights))
            self.probe_loss_tracker.update_state(probe_loss)
            self.probe_accuracy.update_state(labels, class_logits)
            return {m.name: m.result() for m in self.metrics}

        def test_step(self, data):
            labeled_images, labels = data
            preprocessed_images = self.classification_augmenter(labeled_images, training=False)
            features = self.encoder(preprocessed_images, training=False)
            class_logits = self.linear_probe(features, training=False)
            probe_loss = self.probe_loss(labels, class_logits)
            self.probe_loss_tracker.update_state(probe_loss)
            self.probe_accuracy.update_state(labels, class_logits)
            return {m.name: m.result() for m in self.metrics[2:]}

    keras.utils.set_random_seed(0)
    with strategy.scope():
        baseline_model = keras.Sequential([get_augmenter(**classification_augmentation), get_encoder(),
                                           layers.Dense(10)], name="baseline_model")
        baseline_model.compile(optimizer=keras.optimizers.Adam(),
                               loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                               metrics=[keras.metrics.SparseCategoricalAccuracy(name="acc")])
    baseline_history = baseline_model.fit(labeled_train_dataset, epochs=num_epochs, validation_data=test_dataset,
                                          verbose=0)
    with strategy.scope(), contextlib.redirect_stdout(io.StringIO()):
        pretraining_model = ContrastiveModel()
        pretraining_model.compile(contrastive_optimizer=keras.optimizers.Adam(),
                                  probe_optimizer=keras.optimizers.Adam())
    pretraining_history = pretraining_model.fit(train_dataset, epochs=num_epochs, validation_data=test_dataset,
                                                verbose=0)
    with strategy.scope():
        finetuning_model = keras.Sequential([get_augmenter(**classification_augmentation),
                                             pretraining_model.encoder, layers.Dense(10)], name="finetuning_model")
        finetuning_model.compile(optimizer=keras.optimizers.Adam(),
                                 loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                                 metrics=[keras.metrics.SparseCategoricalAccuracy(name="acc")])
    finetuning_history = finetuning_model.fit(labeled_train_dataset, epochs=num_epochs, validation_data=test_dataset,
                                              verbose=0)
    return {"_model": finetuning_model, "baseline": baseline_history.history,
            "pretraining": pretraining_history.history, "finetuning": finetuning_history.history}
