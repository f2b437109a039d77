"""tensorflow.org's tutorials/generative/autoencoder ("Intro to Autoencoders"), typed as printed with ``tf.`` ->
``md.``, shrunk: the basic autoencoder (a subclassed ``Model`` with an encoder and a decoder ``Sequential``),
the denoising one (``tf.clip_by_value`` of noisy images, the printed ``tf.reshape(x, shape=x.shape+(1,))``,
Conv2D/Conv2DTranspose) and the anomaly detector (``tf.reduce_min``/``reduce_max`` normalization, boolean
masks, ``loss='mae'``, the threshold from ``tf.keras.losses.mae`` with numpy's mean and std,
``tf.math.less``); the anomaly detector also on a MirroredStrategy of two (compiled in its scope).

Substitutions: Fashion MNIST and ECG5000 are synthetic (32/8 images of 28 x 28, 40 rhythms of 140 points);
``latent_dim`` is 8 (64); ``tf.random.normal`` is a fixed table (``normal_table``); sklearn's
``train_test_split`` is a fixed split and its scores are computed with numpy; the models are built by one
call and their weights set before ``fit``; every epoch is one batch, so ``shuffle=True`` only reorders a sum.
Where a numpy array is the left operand of a Python operator and a tensor the right (``x_train + noise``,
``train_data - min_val``), multidev raises TypeError (torch's operators refuse numpy arrays: KNOWN); the
other cases convert the array first (``tf.constant(x_train)``), as a program on multidev must.
"""

import numpy as np

from conformance_support import approx, fixed_weights, normal_table, raises, scope_of, two_cpus

_I = np.arange(40 * 28 * 28).reshape(40, 28, 28)
IMAGES = ((np.sin(_I * 0.05) + 1.0) * 127.0).astype("uint8")          # fashion_mnist.load_data() stand-in
_T = np.arange(140)
ECG = np.array([np.concatenate([np.sin(_T * (0.05 + 0.002 * k)) * (1.0 if k % 5 else 2.5) + 0.1 * (k % 3),
                                [0.0 if k % 4 == 0 else 1.0]]) for k in range(40)])   # 140 points, then the label
ECG_25 = np.concatenate([ECG[:, :-1], (np.arange(40) % 5 != 0).astype("float64")[:, None]], axis=1)  # 25 normal


def _hist(history):
    return {k: approx(v, 2e-4) for k, v in history.history.items()}


def _autoencoder_class(tf):
    layers, Model = tf.keras.layers, tf.keras.models.Model

    class Autoencoder(Model):
        def __init__(self, latent_dim):
            super(Autoencoder, self).__init__()
            self.latent_dim = latent_dim
            self.encoder = tf.keras.Sequential([
                layers.Flatten(),
                layers.Dense(latent_dim, activation='relu'),
            ])
            self.decoder = tf.keras.Sequential([
                layers.Dense(784, activation='sigmoid'),
                layers.Reshape((28, 28))
            ])

        def call(self, x):
            encoded = self.encoder(x)
            decoded = self.decoder(encoded)
            return decoded
    return Autoencoder


def case_basic_autoencoder(tf):
    losses = tf.keras.losses
    x_train, x_test = IMAGES[:32], IMAGES[32:]
    x_train = x_train.astype('float32') / 255.
    x_test = x_test.astype('float32') / 255.
    latent_dim = 8
    autoencoder = _autoencoder_class(tf)(latent_dim)
    autoencoder(x_train[:1])
    fixed_weights(autoencoder, 0.2)
    autoencoder.compile(optimizer='adam', loss=losses.MeanSquaredError())
    history = autoencoder.fit(x_train, x_train, epochs=3, shuffle=True, validation_data=(x_test, x_test), verbose=0)
    encoded_imgs = autoencoder.encoder(x_test).numpy()
    decoded_imgs = autoencoder.decoder(encoded_imgs).numpy()
    return {"history": _hist(history), "shapes": [list(encoded_imgs.shape), list(decoded_imgs.shape)],
            "decoded": approx(decoded_imgs[0, 3, :6], 1e-5)}


def _noisy(tf, x, offset):
    """The tutorial's noisy images, the numpy array converted first (see the module's docstring)."""
    noise_factor = 0.2
    x_noisy = tf.constant(x) + noise_factor * normal_table(tf, x.shape, offset)
    x_noisy = tf.clip_by_value(x_noisy, clip_value_min=0., clip_value_max=1.)
    return x_noisy


def case_noise_added_to_numpy_images(tf):
    """The printed line: numpy images + a tensor of noise (TF converts the array; torch refuses it)."""
    x_train = IMAGES[:2].astype('float32') / 255.
    x_train = x_train[..., tf.newaxis]
    noise_factor = 0.2
    x_train_noisy = x_train + noise_factor * normal_table(tf, x_train.shape)
    return approx(float(tf.reduce_sum(x_train_noisy).numpy()), 1e-3)


def case_denoising_autoencoder(tf):
    layers, losses, Model = tf.keras.layers, tf.keras.losses, tf.keras.models.Model
    x_train, x_test = IMAGES[:32], IMAGES[32:]
    x_train = x_train.astype('float32') / 255.
    x_test = x_test.astype('float32') / 255.
    x_train = x_train[..., tf.newaxis]
    x_test = x_test[..., tf.newaxis]
    x_train_noisy, x_test_noisy = _noisy(tf, x_train, 0), _noisy(tf, x_test, 7)
    clipped = [float(tf.reduce_min(x_train_noisy).numpy()), float(tf.reduce_max(x_train_noisy).numpy())]
    five_d = list(tf.reshape(x_train_noisy, shape=x_train_noisy.shape+(1,)).shape)   # as printed: one axis more

    class Denoise(Model):
        def __init__(self):
            super(Denoise, self).__init__()
            self.encoder = tf.keras.Sequential([
                layers.Input(shape=(28, 28, 1)),
                layers.Conv2D(4, (3, 3), activation='relu', padding='same', strides=2),
                layers.Conv2D(2, (3, 3), activation='relu', padding='same', strides=2)])

            self.decoder = tf.keras.Sequential([
                layers.Conv2DTranspose(2, kernel_size=3, strides=2, activation='relu', padding='same'),
                layers.Conv2DTranspose(4, kernel_size=3, strides=2, activation='relu', padding='same'),
                layers.Conv2D(1, kernel_size=(3, 3), activation='sigmoid', padding='same')])

        def call(self, x):
            encoded = self.encoder(x)
            decoded = self.decoder(encoded)
            return decoded

    autoencoder = Denoise()
    autoencoder(x_train[:1])
    fixed_weights(autoencoder, 0.3)
    autoencoder.compile(optimizer='adam', loss=losses.MeanSquaredError())
    history = autoencoder.fit(x_train_noisy, x_train, epochs=2, shuffle=True,
                              validation_data=(x_test_noisy, x_test), verbose=0)
    encoded_imgs = autoencoder.encoder(x_test).numpy()
    decoded_imgs = autoencoder.decoder(encoded_imgs).numpy()
    return {"clipped": approx(clipped, 1e-6), "five_d": five_d, "history": _hist(history),
            "shapes": [list(encoded_imgs.shape), list(decoded_imgs.shape)],
            "squeezed": list(tf.squeeze(x_test_noisy[1]).shape), "decoded": approx(decoded_imgs[0, 9, :6, 0], 1e-5)}


def case_anomaly_normalization_numpy_minus_tensor(tf):
    """The printed normalization: numpy data minus ``tf.reduce_min`` of it (a tensor)."""
    train_data = ECG[:32, 0:-1]
    min_val = tf.reduce_min(train_data)
    max_val = tf.reduce_max(train_data)
    train_data = (train_data - min_val) / (max_val - min_val)
    return approx(float(tf.reduce_sum(train_data).numpy()), 1e-6)


def _anomaly(tf, strategy=None, raw_data=ECG):
    layers, Model = tf.keras.layers, tf.keras.models.Model
    # The last element contains the labels
    labels = raw_data[:, -1]
    # The other data points are the electrocadriogram data
    data = raw_data[:, 0:-1]
    train_data, test_data, train_labels, test_labels = data[:32], data[32:], labels[:32], labels[32:]

    min_val = tf.reduce_min(train_data)
    max_val = tf.reduce_max(train_data)
    train_data = (tf.constant(train_data) - min_val) / (max_val - min_val)
    test_data = (tf.constant(test_data) - min_val) / (max_val - min_val)
    train_data = tf.cast(train_data, tf.float32)
    test_data = tf.cast(test_data, tf.float32)

    train_labels = train_labels.astype(bool)
    test_labels = test_labels.astype(bool)
    normal_train_data = train_data[train_labels]
    normal_test_data = test_data[test_labels]
    anomalous_test_data = test_data[~test_labels]

    class AnomalyDetector(Model):
        def __init__(self):
            super(AnomalyDetector, self).__init__()
            self.encoder = tf.keras.Sequential([
                layers.Dense(32, activation="relu"),
                layers.Dense(16, activation="relu"),
                layers.Dense(8, activation="relu")])

            self.decoder = tf.keras.Sequential([
                layers.Dense(16, activation="relu"),
                layers.Dense(32, activation="relu"),
                layers.Dense(140, activation="sigmoid")])

        def call(self, x):
            encoded = self.encoder(x)
            decoded = self.decoder(encoded)
            return decoded

    with scope_of(strategy):
        autoencoder = AnomalyDetector()
        autoencoder(normal_train_data[:1])
        fixed_weights(autoencoder, 0.4)
        autoencoder.compile(optimizer='adam', loss='mae')
    history = autoencoder.fit(normal_train_data, normal_train_data, epochs=5, batch_size=512,
                              validation_data=(test_data, test_data), shuffle=True, verbose=0)
    encoded_imgs = autoencoder.encoder(normal_test_data).numpy()
    decoded_imgs = autoencoder.decoder(encoded_imgs).numpy()

    reconstructions = autoencoder.predict(normal_train_data, verbose=0)
    train_loss = tf.keras.losses.mae(reconstructions, normal_train_data)
    threshold = np.mean(train_loss) + np.std(train_loss)
    reconstructions = autoencoder.predict(anomalous_test_data, verbose=0)
    test_loss = tf.keras.losses.mae(reconstructions, anomalous_test_data)

    def predict(model, data, threshold):
        reconstructions = model(data)
        loss = tf.keras.losses.mae(reconstructions, data)
        return tf.math.less(loss, threshold)

    preds = predict(autoencoder, test_data, threshold)
    p, y = np.asarray(preds), test_labels   # sklearn's accuracy_score / precision_score / recall_score
    return {"sizes": [len(normal_train_data), len(normal_test_data), len(anomalous_test_data)],
            "history": _hist(history), "decoded": approx(decoded_imgs[0, :5], 2e-5),
            "train_loss": approx(train_loss.numpy(), 2e-5), "threshold": approx(float(threshold), 2e-5),
            "test_loss": approx(test_loss.numpy(), 2e-5), "preds": p.tolist(),
            "scores": [float(np.mean(p == y)), float(np.sum(p & y) / max(np.sum(p), 1)),
                       float(np.sum(p & y) / np.sum(y))]}


def case_anomaly_detection(tf):
    return _anomaly(tf)


def case_anomaly_detection_two_replicas(tf):
    return _anomaly(tf, two_cpus(tf))


def case_anomaly_detection_25_normal(tf):
    return _anomaly(tf, raw_data=ECG_25)


def case_anomaly_detection_25_normal_two_replicas(tf):
    """25 rhythms split 13/12: TF 2.21 fails ``fit`` (InvalidArgumentError from an AddN of the replicas' [13, 140]
    and [12, 140] tensors); multidev trains as one device does (SAME_AS the case above)."""
    return _anomaly(tf, two_cpus(tf), raw_data=ECG_25)


def case_mae_arguments(tf):
    """``tf.keras.losses.mae`` as the tutorial calls it (a numpy array and a tensor) and its neighbours."""
    a, b = np.array([[0.1, 0.5], [0.9, 0.2]], "float32"), tf.constant([[0.0, 1.0], [1.0, 0.0]])
    return {"numpy_tensor": approx(tf.keras.losses.mae(a, b).numpy(), 1e-6),
            "tensor_numpy": approx(tf.keras.losses.mae(b, a).numpy(), 1e-6),
            "1d": approx(float(tf.keras.losses.mae([0.0, 1.0], [0.5, 0.5]).numpy()), 1e-6),
            "shape_mismatch": raises(tf.keras.losses.mae, b, tf.constant([[1.0, 2.0, 3.0]]))}
