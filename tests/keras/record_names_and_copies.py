"""Record TF 2.21's weight names/paths with and without a strategy, copy.deepcopy and clone_model of a model, and
the output shapes of a model built on a None sequence length (tests/keras/tf_2.21_names_and_copies.json). Run with a
TensorFlow venv, once as is (Keras 3) and once with TF_USE_LEGACY_KERAS=1 (tf-keras 2); merge the printed objects."""
import copy, json, os
import numpy as np
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
legacy = os.environ.get("TF_USE_LEGACY_KERAS") == "1"
keras = __import__("tf_keras") if legacy else tf.keras
out = {}
def try_(f):
    try:
        return f()
    except Exception as e:
        return f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
def conv():
    return keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Conv2D(2, 3, name="conv2d"),
                             keras.layers.Flatten(), keras.layers.Dense(1)])
for name, st in [("one", tf.distribute.get_strategy()), ("two", tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))]:
    r = {}
    with st.scope():
        m = conv()
        m.compile("adam", "mse")
        r["names"] = [w.name for w in m.weights]
        r["paths"] = [getattr(w, "path", "absent") for w in m.weights]
        r["layer_weight_names"] = [w.name for w in m.layers[0].weights]
        r["var_type"] = type(m.weights[0]).__name__
        r["value_name"] = try_(lambda: m.weights[0].value.name)
        def dc():
            c = copy.deepcopy(m)
            return {"ok": True, "same_weights": bool(all(np.array_equal(a, b) for a, b in zip(m.get_weights(), c.get_weights()))),
                    "shared": c.weights[0] is m.weights[0], "names": [w.name for w in c.weights][:2],
                    "var_type": type(c.weights[0]).__name__}
        r["deepcopy_in_scope"] = try_(dc)
        def cl():
            c = keras.models.clone_model(m)
            return {"ok": True, "same_weights": bool(all(np.array_equal(a, b) for a, b in zip(m.get_weights(), c.get_weights()))),
                    "names": [w.name for w in c.weights][:2], "paths": [getattr(w, "path", "absent") for w in c.weights][:2],
                    "var_type": type(c.weights[0]).__name__, "compiled": getattr(c, "optimizer", None) is not None,
                    "layer_names": [l.name for l in c.layers]}
        r["clone_in_scope"] = try_(cl)
    r["deepcopy_outside"] = try_(dc)
    r["clone_outside"] = try_(cl)
    # subclassed model clone
    class Sub(keras.Model):
        def __init__(self, **kw):
            super().__init__(**kw); self.d = keras.layers.Dense(2)
        def call(self, x): return self.d(x)
    with st.scope():
        s = Sub(); s(np.zeros((1, 3), "float32"))
        r["clone_subclassed"] = try_(lambda: type(keras.models.clone_model(s)).__name__)
        r["deepcopy_subclassed"] = try_(lambda: type(copy.deepcopy(s)).__name__)
    out[name] = r
# item 4: None sequence length
inp = keras.Input((None,), dtype="int32")
e = keras.layers.Embedding(10, 24)(inp)
a = keras.layers.MultiHeadAttention(2, 12)(e, e)
d = keras.layers.Dense(24)(a + e)
g = keras.layers.GlobalAveragePooling1D()(d)
m = keras.Model(inp, [d, g])
def oshape(l):
    try:
        return str(l.output_shape)
    except Exception as ex:
        return str(getattr(l, "output", None) is not None and l.output.shape)
out["none_shapes"] = {l.name: oshape(l) for l in m.layers}
out["none_model_output"] = str([o.shape for o in m.outputs])
print("RESULT " + json.dumps({"tf_keras2" if legacy else "keras3": out}))
