"""keras.io PixelCNN's masked convolution (``self.conv.kernel.assign(self.conv.kernel * self.mask)`` in ``call``,
every replica's forward) trained from set weights: one device and MirroredStrategy on 2 CPUs. Run with TensorFlow
2.21 (``/work/tfvenv/bin/python tests/keras/_masked_kernel_program.py keras3|tf_keras``) it printed
``tf_2.21_masked_kernel_assign.json``; ``test_kernel_assign_in_replicas.py`` runs ``run(keras, strategies)`` on
md.keras. Keeps to what TensorFlow and multidev both take (numpy weights, ``fit(shuffle=False)``)."""

import numpy as np


def run(keras, strategies):
    layers = keras.layers

    class PixelConvLayer(layers.Layer):
        def __init__(self, mask_type, **kwargs):
            super().__init__()
            self.mask_type = mask_type
            self.conv = layers.Conv2D(**kwargs)

        def build(self, input_shape):
            self.conv.build(input_shape)
            kernel_shape = tuple(self.conv.kernel.shape)
            self.mask = np.zeros(shape=kernel_shape)
            self.mask[: kernel_shape[0] // 2, ...] = 1.0
            self.mask[kernel_shape[0] // 2, : kernel_shape[1] // 2, ...] = 1.0
            if self.mask_type == "B":
                self.mask[kernel_shape[0] // 2, kernel_shape[1] // 2, ...] = 1.0

        def call(self, inputs):
            self.conv.kernel.assign(self.conv.kernel * self.mask)
            return self.conv(inputs)

    rng = np.random.RandomState(0)
    data = (rng.rand(16, 6, 6, 1) > 0.5).astype("float32")
    out = {}
    for name, strategy in strategies.items():
        with strategy.scope():
            inputs = keras.Input(shape=(6, 6, 1))
            pixel = PixelConvLayer(mask_type="A", filters=4, kernel_size=3, activation="relu", padding="same")
            x = pixel(inputs)
            x = PixelConvLayer(mask_type="B", filters=4, kernel_size=1, activation="relu", padding="valid")(x)
            model = keras.Model(inputs, layers.Conv2D(1, 1, activation="sigmoid")(x))
            model.compile(optimizer=keras.optimizers.Adam(0.01), loss="binary_crossentropy")
        weights = np.random.RandomState(1)
        model.set_weights([weights.normal(0, 0.5, np.shape(w)).astype("float32") for w in model.get_weights()])
        history = model.fit(data, data, batch_size=8, epochs=3, shuffle=False, verbose=0)
        kernel = np.asarray(pixel.conv.kernel)
        out[name] = {"loss": [float(v) for v in history.history["loss"]],
                     "kernel": kernel.ravel().tolist(),
                     "leak": float(np.abs(kernel * (1 - pixel.mask)).max()),   # Adam's last step, not masked yet
                     "predict": model.predict(data[:2], verbose=0).ravel().tolist()}
    return out


if __name__ == "__main__":
    import json
    import os
    import sys

    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    if sys.argv[1] == "tf_keras":
        import tf_keras as keras
    else:
        import keras
    result = run(keras, {"one_device": tf.distribute.get_strategy(),
                         "mirrored_2": tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])})
    print(json.dumps({"framework": sys.argv[1], "tensorflow": tf.__version__, **result}))
