"""keras.io/examples/vision/involution as printed (``tf.image.extract_patches`` -> ``keras.ops.image.
extract_patches``, ``tf.multiply``/``tf.reduce_sum`` -> ``keras.ops``, ``tf.identity`` -> ``layers.Identity()``): an
``Involution`` layer that creates its sublayers in ``build(input_shape)`` (an optional AveragePooling2D, a
``kernel_gen`` Sequential of Conv2D-BatchNormalization-ReLU-Conv2D, three Reshape layers sized from the input
shape), multiplies the generated kernel with the input's patches, sums over the window and returns ``(output,
kernel)``, so the functional model unpacks ``x, _ = Involution(...)(inputs)``; the model is
``keras.Model(inputs=[inputs], outputs=[outputs])``, compiled with ``"adam"``,
``SparseCategoricalCrossentropy(from_logits=True)`` and ``["accuracy"]``, fitted on a shuffled dataset with
validation data; then a ``vis_model`` of the three layers' ``.output`` (each a pair) predicts ONE image
(``test_image[None, ...]``) and the kernels are summed over their last three axes. The convolution baseline
model is left out.

Shrunk: 64 8x8 RGB training and 32 test images of 10 classes (CIFAR-10's 32x32), batch 16 (256), 2 epochs (20).
"""

import numpy as np

import multidev as md

SOURCE = "https://keras.io/examples/vision/involution/"


def run(keras, strategy, workdir, scale=1):
    layers, ops = keras.layers, keras.ops

    class Involution(keras.layers.Layer):
        def __init__(self, channel, group_number, kernel_size, stride, reduction_ratio, name):
            super().__init__(name=name)
            self.channel = channel
            self.group_number = group_number
            self.kernel_size = kernel_size
            self.stride = stride
            self.reduction_ratio = reduction_ratio

        def build(self, input_shape):
            (_, height, width, num_channels) = input_shape
            height = height // self.stride
            width = width // self.stride
            self.stride_layer = (
                keras.layers.AveragePooling2D(pool_size=self.stride, strides=self.stride, padding="same")
                if self.stride > 1
                else keras.layers.Identity()
            )
            self.kernel_gen = keras.Sequential([
                keras.layers.Conv2D(filters=self.channel // self.reduction_ratio, kernel_size=1),
                keras.layers.BatchNormalization(),
                keras.layers.ReLU(),
                keras.layers.Conv2D(filters=self.kernel_size * self.kernel_size * self.group_number, kernel_size=1),
            ])
            self.kernel_reshape = keras.layers.Reshape(
                target_shape=(height, width, self.kernel_size * self.kernel_size, 1, self.group_number))
            self.input_patches_reshape = keras.layers.Reshape(
                target_shape=(height, width, self.kernel_size * self.kernel_size, num_channels // self.group_number,
                              self.group_number))
            self.output_reshape = keras.layers.Reshape(target_shape=(height, width, num_channels))

        def call(self, x):
            kernel_input = self.stride_layer(x)
            kernel = self.kernel_gen(kernel_input)
            kernel = self.kernel_reshape(kernel)
            input_patches = ops.image.extract_patches(
                x, size=(self.kernel_size, self.kernel_size), strides=(self.stride, self.stride),
                dilation_rate=1, padding="same")
            input_patches = self.input_patches_reshape(input_patches)
            output = ops.multiply(kernel, input_patches)
            output = ops.sum(output, axis=3)
            output = self.output_reshape(output)
            return output, kernel

    rng = np.random.RandomState(0)
    n = 64 * scale
    train_labels, test_labels = rng.randint(0, 10, (n, 1)), rng.randint(0, 10, (32, 1))

    def images(labels):
        base = rng.uniform(0, 255, (len(labels), 8, 8, 3)) * 0.5 + labels[:, :, None, None] * 12
        return base.astype("float32")

    (train_images, test_images) = (images(train_labels) / 255.0, images(test_labels) / 255.0)
    train_ds = md.data.Dataset.from_tensor_slices((train_images, train_labels)).shuffle(256, seed=0).batch(16)
    test_ds = md.data.Dataset.from_tensor_slices((test_images, test_labels)).batch(16)

    keras.utils.set_random_seed(42)
    with strategy.scope():
        inputs = keras.Input(shape=(8, 8, 3))
        x, _ = Involution(channel=3, group_number=1, kernel_size=3, stride=1, reduction_ratio=2, name="inv_1")(inputs)
        x = keras.layers.ReLU()(x)
        x = keras.layers.MaxPooling2D((2, 2))(x)
        x, _ = Involution(channel=3, group_number=1, kernel_size=3, stride=1, reduction_ratio=2, name="inv_2")(x)
        x = keras.layers.ReLU()(x)
        x = keras.layers.MaxPooling2D((2, 2))(x)
        x, _ = Involution(channel=3, group_number=1, kernel_size=3, stride=1, reduction_ratio=2, name="inv_3")(x)
        x = keras.layers.ReLU()(x)
        x = keras.layers.Flatten()(x)
        x = keras.layers.Dense(64, activation="relu")(x)
        outputs = keras.layers.Dense(10)(x)
        inv_model = keras.Model(inputs=[inputs], outputs=[outputs], name="inv_model")
        inv_model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                          metrics=["accuracy"])
    inv_hist = inv_model.fit(train_ds, epochs=2, validation_data=test_ds, verbose=0)

    layer_names = ["inv_1", "inv_2", "inv_3"]
    outputs = [inv_model.get_layer(name).output for name in layer_names]
    vis_model = keras.Model(inv_model.input, outputs)
    kernels = {}
    for i, test_image in enumerate(test_images[:2]):
        (inv1_out, inv2_out, inv3_out) = vis_model.predict(test_image[None, ...], verbose=0)
        for name, (_, kernel) in zip(layer_names, (inv1_out, inv2_out, inv3_out)):
            kernels[f"{i}.{name}"] = ops.convert_to_numpy(ops.sum(kernel, axis=[-1, -2, -3]))
    return {"_model": inv_model, "history": inv_hist.history, "kernels": kernels,
            "predict": inv_model.predict(test_images[:8], verbose=0)}
