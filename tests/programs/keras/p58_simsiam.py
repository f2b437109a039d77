"""keras.io/examples/vision/simsiam: a ``SimSiam`` model whose ``train_step`` (``tf.GradientTape`` ->
``md.GradientTape``) takes two augmented views of each image from a zipped dataset (``tf.data.Dataset.zip`` ->
``md.data.Dataset.zip``), encodes and predicts both, and minimises the symmetric negative cosine similarity with a
``stop_gradient`` on the targets (``tf.stop_gradient``/``tf.math.l2_normalize`` -> ``keras.ops``); its encoder's
projection and the predictor are ``Dense`` layers with ``kernel_regularizer=l2`` (the example's step never adds
``model.losses``) and ``BatchNormalization``; SGD with momentum on a ``CosineDecay`` schedule; a ``metrics``
property with one ``Mean`` tracker.

The loss is a mean over the replica's examples in the model's own step, so TensorFlow's rule (each replica's
gradient summed) gives 2 replicas twice one device's gradient: md.keras on 2 replicas gives TensorFlow 2.21's
two-replica numbers, and every one-device run TF's one-device numbers (``p58_tensorflow.json``, recorded by
``_tensorflow_numbers.py`` from ``train`` with the same weights); Keras 3 on multidev weights each replica's share, so
it equals one device. (The step calls the encoder without ``training``, so Keras 3 runs its BatchNormalization in
inference mode, on TensorFlow too: nothing couples the replicas' halves.) The views are deterministic
(flips and a brightness shift; the example's random crops and jitter are ``tf.image`` ops). One change:
``self.built = True`` in ``__init__`` (Keras 3, on TensorFlow as on torch, cannot build a model without ``call``;
the example was written for tf.keras 2). Shrunk: 8x8 RGB images
(64), a two-conv encoder (ResNet20 in the example), projection 16, latent 8, batch 16, 1 epoch.
"""

import numpy as np

SOURCE = "https://keras.io/examples/vision/simsiam/"
WEIGHT_DECAY, PROJECT_DIM, LATENT_DIM = 0.0005, 16, 8


def train(keras, strategy, gradient_tape, dataset_cls, weights=None):
    """Fit SimSiam on the two views (``gradient_tape``: ``md.GradientTape`` or ``tf.GradientTape``;
    ``dataset_cls``: ``md.data.Dataset`` or ``tf.data.Dataset``): ``(model, {"loss", "encoder", "predict"})``."""
    layers, ops, regularizers = keras.layers, keras.ops, keras.regularizers

    def get_encoder():
        inputs = layers.Input((8, 8, 3))
        x = layers.Rescaling(scale=1.0 / 127.5, offset=-1)(inputs)
        x = layers.Conv2D(8, 3, padding="same", use_bias=False)(x)
        x = layers.BatchNormalization()(x)
        x = layers.Activation("relu")(x)
        x = layers.Conv2D(16, 3, strides=2, padding="same", use_bias=False)(x)
        x = layers.BatchNormalization()(x)
        x = layers.Activation("relu")(x)
        x = layers.GlobalAveragePooling2D(name="backbone_pool")(x)
        x = layers.Dense(PROJECT_DIM, use_bias=False, kernel_regularizer=regularizers.l2(WEIGHT_DECAY))(x)
        x = layers.BatchNormalization()(x)
        x = layers.ReLU()(x)
        x = layers.Dense(PROJECT_DIM, use_bias=False, kernel_regularizer=regularizers.l2(WEIGHT_DECAY))(x)
        outputs = layers.BatchNormalization()(x)
        return keras.Model(inputs, outputs, name="encoder")

    def get_predictor():
        model = keras.Sequential([
            layers.Input((PROJECT_DIM,)),
            layers.Dense(LATENT_DIM, use_bias=False, kernel_regularizer=regularizers.l2(WEIGHT_DECAY)),
            layers.ReLU(),
            layers.BatchNormalization(),
            layers.Dense(PROJECT_DIM),
        ], name="predictor")
        return model

    def l2_normalize(x, axis):   # tf.math.l2_normalize
        return x * ops.rsqrt(ops.maximum(ops.sum(ops.square(x), axis=axis, keepdims=True), 1e-12))

    def compute_loss(p, z):
        z = ops.stop_gradient(z)
        p = l2_normalize(p, axis=1)
        z = l2_normalize(z, axis=1)
        return -ops.mean(ops.sum((p * z), axis=1))

    class SimSiam(keras.Model):
        def __init__(self, encoder, predictor):
            super().__init__()
            self.encoder = encoder
            self.predictor = predictor
            self.loss_tracker = keras.metrics.Mean(name="loss")
            self.built = True   # the one change: Keras 3 cannot build a model without call() (TF's nor torch's)

        @property
        def metrics(self):
            return [self.loss_tracker]

        def train_step(self, data):
            ds_one, ds_two = data
            with gradient_tape() as tape:
                z1, z2 = self.encoder(ds_one), self.encoder(ds_two)
                p1, p2 = self.predictor(z1), self.predictor(z2)
                loss = compute_loss(p1, z2) / 2 + compute_loss(p2, z1) / 2
            learnable_params = self.encoder.trainable_variables + self.predictor.trainable_variables
            gradients = tape.gradient(loss, learnable_params)
            self.optimizer.apply_gradients(zip(gradients, learnable_params))
            self.loss_tracker.update_state(loss)
            return {"loss": self.loss_tracker.result()}

    rng = np.random.RandomState(0)
    images = (rng.rand(64, 8, 8, 3) * 255).astype("float32")
    view_one = images[:, :, ::-1].copy()
    view_two = np.clip(images[:, ::-1] * 0.8 + 20, 0, 255).astype("float32")
    ssl_ds_one = dataset_cls.from_tensor_slices(view_one).batch(16)
    ssl_ds_two = dataset_cls.from_tensor_slices(view_two).batch(16)
    ssl_ds = dataset_cls.zip((ssl_ds_one, ssl_ds_two))
    with strategy.scope():
        simsiam = SimSiam(get_encoder(), get_predictor())
        if weights is None:
            draw = np.random.RandomState(1)
            weights = [w if w.ndim == 1 else draw.normal(scale=0.3, size=w.shape).astype("float32")
                       for w in simsiam.encoder.get_weights() + simsiam.predictor.get_weights()]
        count = len(simsiam.encoder.get_weights())
        simsiam.encoder.set_weights(weights[:count])
        simsiam.predictor.set_weights(weights[count:])
        lr_decayed_fn = keras.optimizers.schedules.CosineDecay(initial_learning_rate=0.03, decay_steps=4)
        simsiam.compile(optimizer=keras.optimizers.SGD(lr_decayed_fn, momentum=0.6))
    history = simsiam.fit(ssl_ds, epochs=1, verbose=0)
    return simsiam, {"loss": history.history["loss"], "encoder": simsiam.encoder.layers[-2].get_weights()[0],
                     "predictor": simsiam.predictor.layers[0].get_weights()[0]}


def run(keras, strategy, workdir, scale=1):
    import multidev as md
    model, out = train(keras, strategy, md.GradientTape, md.data.Dataset)
    return {"_model": model, **out}
