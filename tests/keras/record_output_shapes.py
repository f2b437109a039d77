"""Record what TF 2.21 reports as the output shapes of a functional model over a None sequence length, after fit
on length-6 batches, with a nested Sequential built by its first call (tests/keras/tf_2.21_output_shapes.json). Run
with a TensorFlow venv, once as is (Keras 3) and once with TF_USE_LEGACY_KERAS=1 (tf-keras 2); merge the objects."""
import json, os
import numpy as np
import tensorflow as tf
legacy = os.environ.get("TF_USE_LEGACY_KERAS") == "1"
keras = __import__("tf_keras") if legacy else tf.keras
L = keras.layers

class Block(L.Layer):
    def __init__(self, **kw):
        super().__init__(**kw)
        self.dense_proj = keras.Sequential([L.Dense(8, activation="relu"), L.Dense(4)])
    def call(self, x):
        return self.dense_proj(x)

inp = keras.Input((None,), dtype="int32")
e = L.Embedding(10, 4)(inp)
b = Block()(e)
out = L.Dense(3)(b)
m = keras.Model(inp, out)
seq = keras.Sequential([keras.Input((None, 4)), L.Dense(2)])
m.compile("adam", "mse")
m.fit(np.ones((4, 6), "int32"), np.ones((4, 6, 3), "float32"), verbose=0)
seq.predict(np.ones((2, 6, 4), "float32"), verbose=0)
def out(x):
    try:
        return str(tuple(x.output.shape))
    except Exception as ex:
        return f"{type(ex).__name__}"
def osh(x):
    try:
        return str(tuple(x.output_shape))
    except Exception as ex:
        return f"{type(ex).__name__}"
blk = m.layers[2]
r = {"model_output_shape": osh(m), "model_output": out(m),
     "block_output_shape": osh(blk), "dense_proj_output_shape": osh(blk.dense_proj),
     "dense_proj_layers_output_shape": [osh(l) for l in blk.dense_proj.layers],
     "dense_proj_output": out(blk.dense_proj), "dense_proj_layers_output": [out(l) for l in blk.dense_proj.layers],
     "sequential_with_input_output_shape": osh(seq), "sequential_output": out(seq)}
print("RESULT " + json.dumps({"tf_keras2" if legacy else "keras3": r}))
