"""keras.io/examples/vision/barlow_twins as printed (``tf.GradientTape`` -> ``md.GradientTape``, ``tf.*`` ->
``keras.ops``, ``tfa.optimizers.LAMB`` -> ``keras.optimizers.Lamb``): a ``BarlowLoss(keras.losses.Loss)`` built
with the global ``BATCH_SIZE`` whose ``call(z_a, z_b)`` normalises each embedding column over the batch it sees
(mean and std over axis 0), forms the cross-correlation ``transpose(z_a_norm) @ z_b_norm / self.batch_size`` and
returns ``sum((diag - 1)^2) + lambda * sum(off_diag^2)`` (the diagonal zeroed as ``tf.linalg.set_diag`` does); a
ResNet-style encoder (Conv2D/BatchNormalization(axis=3)/Add blocks, ZeroPadding2D, MaxPool2D, AveragePooling2D)
with a Dense-BatchNormalization-ReLU projector; a ``BarlowModel`` (no ``call``) whose ``train_step`` takes the
two views of a zipped dataset, calls ``self.loss(z_a, z_b)``, applies the gradients of ``self.model`` and returns
its ``loss_tracker``'s mean; then the linear evaluation: ``Sequential([bm.model, Dense(10, softmax,
kernel_regularizer=l2(0.02))])`` with ``model.layers[0].trainable = False``.

The augmentations (tf.image/tfa ops mapped over a tf.data pipeline) are made before the dataset with numpy: two
views (flip, brightness, noise); each view's dataset is shuffled with the same seed and batched with
drop_remainder, as printed. Shrunk: 8x8 images (32x32), an encoder of one identity and one convolutional block
(ResNet-34), 16 projector units (5000), 64 images, BATCH_SIZE 16 (512), 2 epochs (160) and 1 linear epoch (35).
"""

import numpy as np

import multidev as md

SOURCE = "https://keras.io/examples/vision/barlow_twins/"
IMAGE_SIZE, BATCH_SIZE, n_dense_neurons = 8, 16, 16


def views(rng, images):
    """Two augmented versions of the images (the example's RandomAugmentor, made before the dataset)."""
    out = []
    for _ in range(2):
        flip = rng.rand(len(images)) < 0.5
        x = np.where(flip[:, None, None, None], images[:, :, ::-1], images)
        x = x * rng.uniform(0.8, 1.2, (len(images), 1, 1, 1)) + rng.normal(0, 0.05, images.shape)
        out.append(np.clip(x, 0, 1).astype("float32"))
    return out


def run(keras, strategy, workdir, scale=1):
    layers, ops = keras.layers, keras.ops

    class BarlowLoss(keras.losses.Loss):
        def __init__(self, batch_size: int):
            super(BarlowLoss, self).__init__()
            self.lambda_amt = 5e-3
            self.batch_size = batch_size

        def get_off_diag(self, c):
            return c * (1 - ops.eye(c.shape[-1]))   # tf.linalg.set_diag(c, zeros)

        def cross_corr_matrix_loss(self, c):
            c_diff = ops.power(ops.diagonal(c) - 1, 2)
            off_diag = ops.power(self.get_off_diag(c), 2) * self.lambda_amt
            loss = ops.sum(c_diff) + ops.sum(off_diag)
            return loss

        def normalize(self, output):
            return (output - ops.mean(output, axis=0)) / ops.std(output, axis=0)

        def cross_corr_matrix(self, z_a_norm, z_b_norm):
            return (ops.transpose(z_a_norm) @ z_b_norm) / self.batch_size

        def call(self, z_a, z_b):
            z_a_norm, z_b_norm = self.normalize(z_a), self.normalize(z_b)
            c = self.cross_corr_matrix(z_a_norm, z_b_norm)
            loss = self.cross_corr_matrix_loss(c)
            return loss

    class ResNet34:
        def identity_block(self, x, filter):
            x_skip = x
            x = layers.Conv2D(filter, (3, 3), padding="same")(x)
            x = layers.BatchNormalization(axis=3)(x)
            x = layers.Activation("relu")(x)
            x = layers.Conv2D(filter, (3, 3), padding="same")(x)
            x = layers.BatchNormalization(axis=3)(x)
            x = layers.Add()([x, x_skip])
            x = layers.Activation("relu")(x)
            return x

        def convolutional_block(self, x, filter):
            x_skip = x
            x = layers.Conv2D(filter, (3, 3), padding="same", strides=(2, 2))(x)
            x = layers.BatchNormalization(axis=3)(x)
            x = layers.Activation("relu")(x)
            x = layers.Conv2D(filter, (3, 3), padding="same")(x)
            x = layers.BatchNormalization(axis=3)(x)
            x_skip = layers.Conv2D(filter, (1, 1), strides=(2, 2))(x_skip)
            x = layers.Add()([x, x_skip])
            x = layers.Activation("relu")(x)
            return x

        def __call__(self, shape=(IMAGE_SIZE, IMAGE_SIZE, 3)):
            x_input = layers.Input(shape)
            x = layers.ZeroPadding2D((3, 3))(x_input)
            x = layers.Conv2D(8, kernel_size=7, strides=2, padding="same")(x)
            x = layers.BatchNormalization()(x)
            x = layers.Activation("relu")(x)
            x = layers.MaxPool2D(pool_size=3, strides=2, padding="same")(x)
            x = self.identity_block(x, 8)
            x = self.convolutional_block(x, 16)
            x = layers.AveragePooling2D((2, 2), padding="same")(x)
            x = layers.Flatten()(x)
            return keras.models.Model(inputs=x_input, outputs=x, name="ResNet34")

    def build_twin():
        resnet = ResNet34()()
        last_layer = resnet.layers[-1].output
        n_layers = 2
        for i in range(n_layers):
            dense = layers.Dense(n_dense_neurons, name=f"projector_dense_{i}")
            if i == 0:
                x = dense(last_layer)
            else:
                x = dense(x)
            x = layers.BatchNormalization(name=f"projector_bn_{i}")(x)
            x = layers.ReLU(name=f"projector_relu_{i}")(x)
        x = layers.Dense(n_dense_neurons, name=f"projector_dense_{n_layers}")(x)
        return keras.Model(resnet.input, x)

    class BarlowModel(keras.Model):
        def __init__(self):
            super(BarlowModel, self).__init__()
            self.model = build_twin()
            self.loss_tracker = keras.metrics.Mean(name="loss")

        @property
        def metrics(self):
            return [self.loss_tracker]

        def train_step(self, batch):
            y_a, y_b = batch
            with md.GradientTape() as tape:
                z_a, z_b = self.model(y_a, training=True), self.model(y_b, training=True)
                loss = self.loss(z_a, z_b)
            grads_model = tape.gradient(loss, self.model.trainable_variables)
            self.optimizer.apply_gradients(zip(grads_model, self.model.trainable_variables))
            self.loss_tracker.update_state(loss)
            return {"loss": self.loss_tracker.result()}

    rng = np.random.RandomState(0)
    n = 64 * scale
    labels = rng.randint(0, 10, n)
    train_features = (rng.uniform(0, 1, (n, IMAGE_SIZE, IMAGE_SIZE, 3)) * 0.5
                      + labels[:, None, None, None] / 20.0).astype("float32")
    a1, a2 = views(rng, train_features)

    def augmented_version(ds):
        return md.data.Dataset.from_tensor_slices(ds).shuffle(1000, seed=1024).batch(BATCH_SIZE, drop_remainder=True)

    augment_versions = md.data.Dataset.zip((augmented_version(a1), augmented_version(a2)))
    keras.utils.set_random_seed(0)
    with strategy.scope():
        bm = BarlowModel()
        optimizer = keras.optimizers.Lamb()
        loss = BarlowLoss(BATCH_SIZE)
        bm.compile(optimizer=optimizer, loss=loss)
    history = bm.fit(augment_versions, epochs=2, verbose=0)

    xy_ds = md.data.Dataset.from_tensor_slices((train_features, labels)).batch(BATCH_SIZE, drop_remainder=True)
    with strategy.scope():
        model = keras.models.Sequential([
            bm.model,
            layers.Dense(10, activation="softmax", kernel_regularizer=keras.regularizers.l2(0.02)),
        ])
        model.layers[0].trainable = False
        model.compile(optimizer=keras.optimizers.Lamb(), loss="sparse_categorical_crossentropy",
                      metrics=["accuracy"])
    before = [np.array(w) for w in bm.model.get_weights()]
    linear = model.fit(xy_ds, epochs=1, verbose=0)
    moved = max(float(np.abs(np.array(w) - b).max()) for w, b in zip(bm.model.get_weights(), before))
    return {"_model": model, "history": history.history, "linear": linear.history, "encoder_moved": moved,
            "predict": model.predict(train_features[:8], verbose=0)}
