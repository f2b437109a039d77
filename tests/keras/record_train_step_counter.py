"""Record what tf-keras under TF 2.21 does with `self.counter.assign_add(1.)` in a custom train_step on
MirroredStrategy over 2 logical CPUs, per aggregation, for an add_weight weight and a tf.Variable attribute
(tests/keras/tf_2.21_train_step_counter.json; 4 steps of one epoch). Run with a TensorFlow venv:
    python tests/keras/record_train_step_counter.py > tests/keras/tf_2.21_train_step_counter.json"""
import os, json
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import tf_keras as keras
import numpy as np
out = {}
def run(agg, explicit):
    class M(keras.Model):
        def __init__(self):
            super().__init__()
            self.d = keras.layers.Dense(1)
            kw = {} if not explicit else {"aggregation": agg}
            if explicit == "variable":
                self.counter = tf.Variable(0.0, trainable=False, **kw)
            else:
                self.counter = self.add_weight(name="counter", shape=(), initializer="zeros", trainable=False, **kw)
        def call(self, x): return self.d(x)
        def train_step(self, data):
            x, y = data
            with tf.GradientTape() as tape:
                loss = self.compiled_loss(y, self(x, training=True))
            g = tape.gradient(loss, self.trainable_variables)
            self.optimizer.apply_gradients(zip(g, self.trainable_variables))
            self.counter.assign_add(1.0)
            return {"loss": loss}
    s = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    x = np.random.RandomState(0).randn(32, 6).astype("float32"); y = x[:, :1]
    with s.scope():
        m = M(); m.compile("sgd", "mse")
    try:
        m.fit(x, y, batch_size=8, epochs=1, verbose=0, shuffle=False)
        return {"counter": float(m.counter.numpy()), "copies": [float(v.numpy()) for v in s.experimental_local_results(m.counter)], "aggregation": str(m.counter.aggregation), "type": type(m.counter).__name__}
    except Exception as e:
        return {"error": type(e).__name__, "message": str(e)[-400:]}
out["default"] = run(None, False)
for a in ["NONE", "ONLY_FIRST_REPLICA", "MEAN", "SUM"]:
    out[a] = run(getattr(tf.VariableAggregation, a), True)
for a in ["NONE", "ONLY_FIRST_REPLICA", "MEAN", "SUM"]:
    out["tf.Variable " + a] = run(getattr(tf.VariableAggregation, a), "variable")
print(json.dumps(out, indent=1))
