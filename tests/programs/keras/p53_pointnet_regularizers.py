"""keras.io/examples/vision/pointnet: T-Nets whose last ``Dense`` has an ``activity_regularizer`` of the
example's ``OrthogonalRegularizer`` class (a ``keras.regularizers.Regularizer`` with ``__call__``, ``get_config``
and ``ops.tensordot`` over the batch), ``Conv1D``/``Dense`` + ``BatchNormalization(momentum=0.0)`` blocks,
``GlobalMaxPooling1D``, ``Dot(axes=(2, 1))`` applying each transform, ``Dropout(0.3)``, trained with ``fit`` and
validated (``get_config`` is not called: Keras 3's base ``Regularizer.get_config`` raises NotImplementedError,
which the example's ``super().get_config()`` would meet). Shrunk: clouds of 16 points, filters 8/16/32 and dense 16/8 (were 32/64/512 and 256/128), 4 classes,
64 clouds, batch 16, 2 epochs; the dataset's jitter and shuffle left out (data-side, not the model's).

The T-Net's penalty sums ``ops.tensordot(x, x, axes=(2, 2))`` over every pair of examples of the batch the
layer sees, and BatchNormalization normalises each replica's half: on 2 replicas the program differs from one
device as on TensorFlow's MirroredStrategy. ``regularized_fit`` (the same network from set weights, without the
Dropout, plus a ``kernel_regularizer=L2`` Dense) checks the numbers: TensorFlow 2.21's on one device and on 2
replicas (``p53_tensorflow.json``, recorded by ``_tensorflow_numbers.py``), where Keras scales ``model.losses`` by
1/replicas in ``fit``.
"""

import numpy as np

SOURCE = "https://keras.io/examples/vision/pointnet/"
NUM_POINTS, NUM_CLASSES = 16, 4


def build(keras, dropout=0.3, kernel_regularizer=None):
    """The PointNet classifier as printed (shrunk); ``kernel_regularizer`` on the head's second Dense."""
    layers, ops = keras.layers, keras.ops

    def conv_bn(x, filters):
        x = layers.Conv1D(filters, kernel_size=1, padding="valid")(x)
        x = layers.BatchNormalization(momentum=0.0)(x)
        return layers.Activation("relu")(x)

    def dense_bn(x, filters, **kwargs):
        x = layers.Dense(filters, **kwargs)(x)
        x = layers.BatchNormalization(momentum=0.0)(x)
        return layers.Activation("relu")(x)

    class OrthogonalRegularizer(keras.regularizers.Regularizer):
        def __init__(self, num_features, l2reg=0.001):
            self.num_features = num_features
            self.l2reg = l2reg
            self.eye = ops.eye(num_features)

        def __call__(self, x):
            x = ops.reshape(x, (-1, self.num_features, self.num_features))
            xxt = ops.tensordot(x, x, axes=(2, 2))
            xxt = ops.reshape(xxt, (-1, self.num_features, self.num_features))
            return ops.sum(self.l2reg * ops.square(xxt - self.eye))

        def get_config(self):
            config = super().get_config()
            config.update({"num_features": self.num_features, "l2reg_strength": self.l2reg})
            return config

    def tnet(inputs, num_features):
        bias = keras.initializers.Constant(np.eye(num_features).flatten())
        reg = OrthogonalRegularizer(num_features)
        x = conv_bn(inputs, 8)
        x = conv_bn(x, 16)
        x = conv_bn(x, 32)
        x = layers.GlobalMaxPooling1D()(x)
        x = dense_bn(x, 16)
        x = dense_bn(x, 8)
        x = layers.Dense(num_features * num_features, kernel_initializer="zeros", bias_initializer=bias,
                         activity_regularizer=reg)(x)
        feat_T = layers.Reshape((num_features, num_features))(x)
        return layers.Dot(axes=(2, 1))([inputs, feat_T])

    inputs = keras.Input(shape=(NUM_POINTS, 3))
    x = tnet(inputs, 3)
    x = conv_bn(x, 8)
    x = conv_bn(x, 8)
    x = tnet(x, 8)
    x = conv_bn(x, 8)
    x = conv_bn(x, 16)
    x = conv_bn(x, 32)
    x = layers.GlobalMaxPooling1D()(x)
    x = dense_bn(x, 16)
    x = layers.Dropout(dropout)(x)
    x = dense_bn(x, 8, kernel_regularizer=kernel_regularizer)
    x = layers.Dropout(dropout)(x)
    outputs = layers.Dense(NUM_CLASSES, activation="softmax")(x)
    return keras.Model(inputs=inputs, outputs=outputs, name="pointnet")


def data(scale=1):
    """Point clouds whose class sets their spread, the labels, and the initial weights of ``regularized_fit``."""
    rng = np.random.RandomState(0)
    labels = rng.randint(0, NUM_CLASSES, 64 * scale)
    points = (rng.normal(size=(64 * scale, NUM_POINTS, 3)) * (1 + labels[:, None, None])).astype("float32")
    return points, labels


def regularized_fit(keras, strategy, epochs=2):
    """The network without Dropout, a Dense with ``kernel_regularizer=L2(0.01)``, from weights drawn here (the
    T-Nets' last Dense as initialized: zeros and the identity), SGD: ``{"loss", "kernel"}``, the epochs' losses
    and the last Dense's kernel (TensorFlow's run calls this too). Inference is left out: with
    ``momentum=0.0`` the moving statistics are one batch's, and which batch differs (see the test)."""
    points, labels = data()
    with strategy.scope():
        model = build(keras, dropout=0.0, kernel_regularizer=keras.regularizers.L2(0.01))
        rng = np.random.RandomState(1)
        model.set_weights([w if (w.ndim == 1 and np.all(w == w.flat[0])) or w.shape[-1] in (3 * 3, 8 * 8) else
                           rng.normal(scale=0.3, size=w.shape).astype("float32") for w in model.get_weights()])
        model.compile(loss="sparse_categorical_crossentropy", optimizer=keras.optimizers.SGD(learning_rate=0.01))
    history = model.fit(points, labels, batch_size=16, epochs=epochs, shuffle=False, verbose=0).history
    return {"loss": history["loss"], "kernel": model.get_weights()[-2]}


def run(keras, strategy, workdir, scale=1):
    points, labels = data(scale)
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = build(keras)
        model.compile(loss="sparse_categorical_crossentropy", optimizer=keras.optimizers.Adam(learning_rate=0.001),
                      metrics=["sparse_categorical_accuracy"])
    history = model.fit(points, labels, batch_size=16, epochs=2, validation_data=(points[:16], labels[:16]),
                        verbose=0)
    return {"_model": model, "history": history.history,
            "predict": model.predict(points[:4], verbose=0), "regularized": regularized_fit(keras, strategy)}
