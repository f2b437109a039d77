"""tensorflow.org's tutorials/customization/custom_layers, typed as printed with ``tf.`` -> ``md.``: a Dense layer's
``variables``/``kernel``/``bias``, ``MyDenseLayer`` (``build``/``call`` with ``add_weight``) and its
``trainable_variables`` names, the ``ResnetIdentityBlock`` model (its ``layers``, ``variables``, output and
parameter count) and the ``Sequential`` of Conv2D/BatchNormalization; the block also trained one step on a
MirroredStrategy of two (made in its scope, ``strategy.run``), where each replica normalizes its own half.

The tutorial's ``self.add_weight("kernel", shape=[...])`` (the name first) is tf.keras 2's signature: Keras 3
refuses it (ValueError), md.keras takes both (KNOWN; the ``_tf_keras2`` case gives tf_keras's names). Substitutions:
``tf.nn.relu`` is torch's on multidev; weights are set after building; auto-generated layer names are left out
(their counters depend on how many layers the process made before).
"""

import numpy as np

from conformance_support import approx, fixed_weights, keras2, rounded, scope_of, torch_or_tf, two_cpus


def case_dense_layer_variables(tf):
    # In the tf.keras.layers package, layers are objects.
    layer = tf.keras.layers.Dense(100)
    layer = tf.keras.layers.Dense(10, input_shape=(None, 5))
    out = layer(tf.zeros([10, 5]))
    return {"out": list(out.shape), "variables": [[v.name.split("/")[-1].split(":")[0], list(v.shape)]
                                                  for v in layer.variables],
            "accessors": [list(layer.kernel.shape), list(layer.bias.shape)],
            "trainable": len(layer.trainable_variables)}


def _my_dense_layer(keras, keras3_signature):
    class MyDenseLayer(keras.layers.Layer):
        def __init__(self, num_outputs):
            super(MyDenseLayer, self).__init__()
            self.num_outputs = num_outputs

        def build(self, input_shape):
            if keras3_signature:
                self.kernel = self.add_weight(shape=[int(input_shape[-1]), self.num_outputs], name="kernel")
            else:
                self.kernel = self.add_weight("kernel",
                                              shape=[int(input_shape[-1]),
                                                     self.num_outputs])

        def call(self, input):
            return input @ self.kernel
    return MyDenseLayer


def case_my_dense_layer_as_printed(tf):
    """The printed ``add_weight("kernel", shape=...)``: Keras 3 refuses the name given first."""
    layer = _my_dense_layer(tf.keras, False)(10)
    _ = layer(tf.zeros([10, 5]))  # Calling the layer `.builds` it.
    return [var.name for var in layer.trainable_variables]


def case_my_dense_layer_as_printed_tf_keras2(tf):
    keras = keras2(tf)
    layer = _my_dense_layer(keras, False)(10)
    _ = layer(np.zeros([10, 5], "float32"))  # Calling the layer `.builds` it.
    return {"shape": [list(v.shape) for v in layer.trainable_variables],
            "names": [var.name.split("/")[-1].split(":")[0] for var in layer.trainable_variables]}


def case_my_dense_layer_keras3_signature(tf):
    layer = _my_dense_layer(tf.keras, True)(10)
    x = tf.constant([[1.0, 2.0, 3.0, 4.0, 5.0]])
    _ = layer(tf.zeros([10, 5]))
    layer.kernel.assign(tf.constant(np.arange(50, dtype="float32").reshape(5, 10) / 50.0))
    return {"names": [var.name for var in layer.trainable_variables], "out": rounded(layer(x), 4),
            "built": layer.built}


def _block(tf, keras=None):
    relu = torch_or_tf(tf, "nn.relu", "relu")
    keras = keras or tf.keras

    class ResnetIdentityBlock(keras.Model):
        def __init__(self, kernel_size, filters):
            super(ResnetIdentityBlock, self).__init__(name='')
            filters1, filters2, filters3 = filters

            self.conv2a = keras.layers.Conv2D(filters1, (1, 1))
            self.bn2a = keras.layers.BatchNormalization()

            self.conv2b = keras.layers.Conv2D(filters2, kernel_size, padding='same')
            self.bn2b = keras.layers.BatchNormalization()

            self.conv2c = keras.layers.Conv2D(filters3, (1, 1))
            self.bn2c = keras.layers.BatchNormalization()

        def call(self, input_tensor, training=False):
            x = self.conv2a(input_tensor)
            x = self.bn2a(x, training=training)
            x = relu(x)

            x = self.conv2b(x)
            x = self.bn2b(x, training=training)
            x = relu(x)

            x = self.conv2c(x)
            x = self.bn2c(x, training=training)

            x += input_tensor
            return relu(x)

    return ResnetIdentityBlock(1, [1, 2, 3])


X = np.array([[[[((i * 3 + j * 5 + c * 7) % 11) / 11.0 - 0.4 for c in range(3)] for j in range(3)] for i in range(2)]
              for _ in range(4)], "float32") * np.arange(1, 5, dtype="float32").reshape(4, 1, 1, 1)


def _fixed_block(tf, keras=None):
    block = _block(tf, keras)
    _ = block(tf.zeros([1, 2, 3, 3]))
    for v in block.trainable_variables:   # BatchNormalization's moving statistics keep their start
        n = int(np.prod(v.shape))
        v.assign((np.array([((k * 7) % 13) / 13.0 - 0.2 for k in range(n)], "float32")).reshape(v.shape))
    return block


def case_resnet_identity_block(tf):
    block = _fixed_block(tf)
    return {"layers": [type(layer).__name__ for layer in block.layers], "variables": len(block.variables),
            "trainable": len(block.trainable_variables), "params": block.count_params(),
            "inference": approx(block(tf.constant(X)).numpy()[1], 1e-5),
            "training": approx(block(tf.constant(X), training=True).numpy()[2], 1e-5)}


def case_sequential_of_conv_and_batch_norm(tf):
    my_seq = tf.keras.Sequential([tf.keras.layers.Conv2D(1, (1, 1),
                                                         input_shape=(
                                                             None, None, 3)),
                                  tf.keras.layers.BatchNormalization(),
                                  tf.keras.layers.Conv2D(2, 1,
                                                         padding='same'),
                                  tf.keras.layers.BatchNormalization(),
                                  tf.keras.layers.Conv2D(3, (1, 1)),
                                  tf.keras.layers.BatchNormalization()])
    out = my_seq(tf.zeros([1, 2, 3, 3]))
    fixed_weights(my_seq, 0.5)
    return {"out": list(out.shape), "params": my_seq.count_params(),
            "values": approx(my_seq(tf.constant(X)).numpy()[0, 1], 1e-5)}


def _two_replicas(tf, keras):
    strategy = two_cpus(tf)
    with strategy.scope():
        block = _fixed_block(tf, keras)
        optimizer = keras.optimizers.SGD(0.1)
        optimizer.build(block.trainable_variables)
    dataset = strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices(X).batch(4))

    def step(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(block(x, training=True) ** 2) / 4.0
        optimizer.apply_gradients(zip(tape.gradient(loss, block.trainable_variables), block.trainable_variables))
        return loss

    for x in dataset:
        losses = strategy.experimental_local_results(strategy.run(step, args=(x,)))
    moving = [v for v in block.variables if "moving" in v.name]
    return {"losses": approx([float(v.numpy()) for v in losses], 1e-4),
            "kernel": approx(block.conv2b.kernel.numpy().ravel(), 1e-5),
            "moving": approx([v.numpy() for v in moving[:2]], 1e-5)}


def case_resnet_block_trained_on_two_replicas(tf):
    """One SGD step of the block on a MirroredStrategy (a user's ``strategy.run``): the replicas' own batch
    statistics in training, the summed gradients, BatchNormalization's moving statistics afterwards."""
    return _two_replicas(tf, tf.keras)


def case_resnet_block_trained_on_two_replicas_tf_keras2(tf):
    """The same with tf.keras 2 (tf_keras on TensorFlow): its moving mean is the replicas' mean, as md.keras's.
    (Its moving variance moves toward the Bessel-corrected batch variance; md.keras's, as Keras 3's, toward the
    biased one: left out.)"""
    out = _two_replicas(tf, keras2(tf))
    out["moving"] = approx(out["moving"]["approx"][0], 1e-5)
    return out
