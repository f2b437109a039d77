"""md.keras's side of tests/keras/tf_2.21_replica_logs.json: the same model and data (run fresh: it configures
2 logical CPUs); prints one JSON object: the default strategy, MirroredStrategy (auto), and with "sum"."""
import json
import numpy as np
import multidev as md
cpu = md.config.list_physical_devices("CPU")[0]
md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * 2)
keras = md.keras
ops = keras.ops
def build(strategy, method=None):
    class M(keras.Model):
        def __init__(self):
            super().__init__()
            self.d = keras.layers.Dense(1, use_bias=False, kernel_initializer="ones")
            self.tracker = keras.metrics.Mean(name="xmean")
            self.wtracker = keras.metrics.Mean(name="wmean")
        def call(self, x):
            return self.d(x)
        def _out(self, x):
            n = ops.cast(ops.shape(x)[0], "float32")
            mx = ops.mean(x)
            self.tracker.update_state(mx)
            self.wtracker.update_state(x, sample_weight=ops.cast(x > 5, "float32"))
            out = {"raw_mean_x": mx, "raw_n": n, "raw_int": md.constant(ops.shape(x)[0])}
            out.update({m.name: m.result() for m in self.metrics})
            return out
        def train_step(self, data):
            x, y = data
            loss = ops.mean((self(x) - y) ** 2)
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
    if method: m.distribute_reduction_method = method
    return m
class Rec(keras.callbacks.Callback):
    def __init__(self): super().__init__(); self.train=[]; self.test=[]
    def on_train_batch_end(self, b, logs=None): self.train.append({k: float(md.keras.ops.convert_to_numpy(v)) for k, v in logs.items()})
    def on_test_batch_end(self, b, logs=None): self.test.append({k: float(md.keras.ops.convert_to_numpy(v)) for k, v in logs.items()})
x = np.array([[1.], [2.], [10.], [20.], [100.], [200.], [1000.], [2000.]], "float32")
y = np.zeros((8, 1), "float32")
out = {}
for name, st, meth in [("one", md.distribute.get_strategy(), None), ("two", md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]), None), ("two_sum", md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]), "sum")]:
    m = build(st, meth)
    rec = Rec()
    h = m.fit(x, y, batch_size=4, epochs=1, verbose=0, callbacks=[rec], shuffle=False)
    ev = m.evaluate(x, y, batch_size=4, verbose=0, return_dict=True, callbacks=[rec])
    out[name] = {"history": {k: [float(a) for a in v] for k, v in h.history.items()},
                 "train_batch_logs": rec.train, "test_batch_logs": rec.test,
                 "evaluate": {k: float(v) for k, v in ev.items()}, "drm": m.distribute_reduction_method}
print("REPLICA_LOGS " + json.dumps(out))
