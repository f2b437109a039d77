"""Keras under a strategy (tf-keras's keras/distribute tests, TensorFlow's "Distributed training with
Keras" and "Custom training with tf.distribute.Strategy" tutorials, the SavedModel guide)."""

import os
import tempfile

from conformance_support import local, replica_id, two_cpus, val

_X = [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]]
_Y = [[1.0], [2.0], [3.0], [4.0]]


def _model(tf):
    return tf.keras.Sequential([tf.keras.Input((2,)),
                                tf.keras.layers.Dense(1, kernel_initializer="ones", bias_initializer="zeros")])


def _compiled(tf, s):
    with s.scope():
        model = _model(tf)
        model.compile(optimizer=tf.keras.optimizers.SGD(0.01), loss="mse")
    return model


def case_fit_one_epoch(tf):
    s = two_cpus(tf)
    model = _compiled(tf, s)
    history = model.fit(tf.constant(_X), tf.constant(_Y), batch_size=4, epochs=2, verbose=0, shuffle=False)
    return [history.history["loss"], val(model.layers[-1].kernel.numpy())]


def case_fit_on_dataset(tf):
    s = two_cpus(tf)
    model = _compiled(tf, s)
    data = tf.data.Dataset.from_tensor_slices((_X, _Y)).batch(2)
    history = model.fit(data, epochs=1, verbose=0)
    return history.history["loss"]


def case_evaluate(tf):
    s = two_cpus(tf)
    return val(_compiled(tf, s).evaluate(tf.constant(_X), tf.constant(_Y), batch_size=4, verbose=0))


def case_predict(tf):
    s = two_cpus(tf)
    return val(_compiled(tf, s).predict(tf.constant(_X), batch_size=4, verbose=0))


def case_weights_per_replica(tf):
    s = two_cpus(tf)
    model = _compiled(tf, s)
    return [len(model.weights), len(model.trainable_weights)]


def case_custom_loop_apply_gradients(tf):
    s = two_cpus(tf)
    with s.scope():
        model = _model(tf)
        optimizer = tf.keras.optimizers.SGD(0.01)
    dist = s.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices((_X, _Y)).batch(4))

    def step(x, y):
        with tf.GradientTape() as tape:
            per_example = tf.reduce_sum((model(x) - y) ** 2, axis=1)
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=4)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss
    losses = [val(s.reduce("SUM", s.run(step, args=batch), axis=None)) for batch in dist]
    return [losses, val(model.layers[-1].kernel.numpy()), val(model.layers[-1].bias.numpy())]


def case_compute_average_loss(tf):
    s = two_cpus(tf)
    out = s.run(lambda: tf.nn.compute_average_loss(tf.constant([1.0, 3.0]) * float(replica_id(tf) + 1)))
    return local(s, out)


def case_compute_average_loss_global_batch(tf):
    s = two_cpus(tf)
    out = s.run(lambda: tf.nn.compute_average_loss(tf.constant([1.0, 3.0]), global_batch_size=8))
    return local(s, out)


def case_scale_regularization_loss(tf):
    s = two_cpus(tf)
    out = s.run(lambda: tf.nn.scale_regularization_loss(tf.constant(4.0)))
    return local(s, out)


def case_mean_metric_in_replicas(tf):
    s = two_cpus(tf)
    with s.scope():
        metric = tf.keras.metrics.Mean()
    s.run(lambda: metric.update_state(tf.constant(float(replica_id(tf) * 2 + 1))))
    return val(metric.result())


def case_sum_metric_in_replicas(tf):
    s = two_cpus(tf)
    with s.scope():
        metric = tf.keras.metrics.Sum()
    s.run(lambda: metric.update_state(tf.constant([1.0, float(replica_id(tf))])))
    return val(metric.result())


def case_saved_model_output_key(tf):
    model = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(1, name="out")])
    path = os.path.join(tempfile.mkdtemp(), "exported")
    tf.saved_model.save(model, path)
    loaded = tf.saved_model.load(path)
    out = loaded.signatures["serving_default"](tf.constant([[1.0, 2.0]]))
    return [sorted(loaded.signatures), sorted(out)]


def case_saved_model_unbuilt_subclass(tf):
    class Tiny(tf.keras.Model):
        def __init__(self):
            super().__init__()
            self.dense = tf.keras.layers.Dense(1)

        def call(self, x):
            return self.dense(x)
    path = os.path.join(tempfile.mkdtemp(), "exported")
    tf.saved_model.save(Tiny(), path)
    return sorted(tf.saved_model.load(path).signatures)
