"""Record what TF 2.21 logs for the values a custom train_step/test_step returns on 2 replicas vs 1 device
(tests/keras/tf_2.21_replica_logs.json). Run with a TensorFlow venv, once as is (Keras 3) and once with
TF_USE_LEGACY_KERAS=1 (tf-keras 2); merge the two printed objects."""
import json, os, sys
import numpy as np
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
if os.environ.get("TF_USE_LEGACY_KERAS") == "1":
    import tf_keras as keras
    flavour = "tf_keras2"
else:
    keras = tf.keras
    flavour = "keras3"

def build(strategy):
    class M(keras.Model):
        def __init__(self):
            super().__init__()
            self.d = keras.layers.Dense(1, use_bias=False, kernel_initializer="ones")
            self.tracker = keras.metrics.Mean(name="xmean")
            self.wtracker = keras.metrics.Mean(name="wmean")
        def call(self, x):
            return self.d(x)
        def _out(self, x):
            n = tf.cast(tf.shape(x)[0], tf.float32)
            mx = tf.reduce_mean(x)
            self.tracker.update_state(mx)
            self.wtracker.update_state(x, sample_weight=tf.cast(x > 5, tf.float32))
            out = {"raw_mean_x": mx, "raw_n": n, "raw_int": tf.shape(x)[0]}
            out.update({m.name: m.result() for m in self.metrics})
            return out
        def train_step(self, data):
            x, y = data
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean((self(x) - y) ** 2)
            g = tape.gradient(loss, self.trainable_variables)
            self.optimizer.apply_gradients(zip(g, self.trainable_variables))
            o = self._out(x); o["raw_loss"] = loss
            return o
        def test_step(self, data):
            x, y = data
            return self._out(x)
        @property
        def metrics(self):
            return [self.tracker, self.wtracker]
    with strategy.scope():
        m = M()
        m.compile(optimizer=keras.optimizers.SGD(0.0))
    return m

class Rec(keras.callbacks.Callback):
    def __init__(self): super().__init__(); self.train=[]; self.test=[]
    def on_train_batch_end(self, b, logs=None): self.train.append({k: float(v) for k, v in logs.items()})
    def on_test_batch_end(self, b, logs=None): self.test.append({k: float(v) for k, v in logs.items()})

x = np.array([[1.], [2.], [10.], [20.], [100.], [200.], [1000.], [2000.]], "float32")
y = np.zeros((8, 1), "float32")
out = {}
for name, st in [("one", tf.distribute.get_strategy()), ("two", tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))]:
    m = build(st)
    rec = Rec()
    h = m.fit(x, y, batch_size=4, epochs=1, verbose=0, callbacks=[rec], shuffle=False)
    ev = m.evaluate(x, y, batch_size=4, verbose=0, return_dict=True, callbacks=[rec])
    out[name] = {"history": {k: [float(a) for a in v] for k, v in h.history.items()},
                 "train_batch_logs": rec.train, "test_batch_logs": rec.test,
                 "evaluate": {k: float(v) for k, v in ev.items()},
                 "distribute_reduction_method": getattr(m, "distribute_reduction_method", "absent")}
print(json.dumps({flavour: out}))
