"""md.keras's side of tests/keras/tf_2.21_names_and_copies.json (run fresh: it configures 2 logical CPUs): weight
names with and without a strategy, ``copy.deepcopy`` and ``clone_model`` of a model, exclude_from_weight_decay
and checkpoint keys under a strategy. Prints one JSON object."""
import copy
import json
import os
import sys
import tempfile

import numpy as np

import multidev as md

cpu = md.config.list_physical_devices("CPU")[0]
md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * 2)
keras = md.keras
L = keras.layers


def copies(model):
    values = [getattr(w, "values", None) for w in model.weights]   # a distributed variable's copies
    return [len(v) if isinstance(v, (list, tuple)) else 1 for v in values]


def same(a, b):
    return bool(all(np.array_equal(x, y) for x, y in zip(a.get_weights(), b.get_weights())))


class Scale(L.Layer):
    def build(self, input_shape):
        self.w = self.add_weight(shape=(input_shape[-1],), initializer="ones")
        self.count = self.add_weight(shape=(), initializer="zeros", trainable=False)

    def call(self, x):
        return x * self.w


def conv():
    return keras.Sequential([keras.Input((8, 8, 1)), L.Conv2D(2, 3, name="conv2d"), L.BatchNormalization(name="bn"),
                             L.Flatten(), L.Dense(1)])


def decayed(strategy):
    """AdamW with the bias excluded from weight decay: (kernel, bias) after one step on zero inputs."""
    with strategy.scope():
        model = keras.Sequential([keras.Input((2,)), L.Dense(1, kernel_initializer="ones", bias_initializer="ones")])
        opt = keras.optimizers.AdamW(learning_rate=0.1, weight_decay=0.5)
        opt.exclude_from_weight_decay(var_names=["bias"])
        model.compile(opt, "mse")
    model.fit(np.zeros((4, 2), "float32"), np.zeros((4, 1), "float32"), batch_size=4, verbose=0)
    return [float(model.layers[0].kernel.numpy().ravel()[0]), float(model.layers[0].bias.numpy()[0])]


def run(strategy, workdir):
    r = {}
    with strategy.scope():
        m = conv()
        m.compile("adam", "mse")
        m.fit(np.ones((4, 8, 8, 1), "float32"), np.ones((4, 1), "float32"), verbose=0)
        scale = Scale()
        scale(md.constant([[1.0, 2.0]]))
        r["names"] = [w.name for w in m.weights]
        r["layer_weight_names"] = [w.name for w in m.layers[0].weights]
        r["scale_names"] = [scale.w.name, scale.count.name]
        r["copies"] = copies(m)
        c = copy.deepcopy(m)
        r["deepcopy_in_scope"] = {"same_weights": same(m, c), "shared": c.weights[0] is m.weights[0],
                                  "names": [w.name for w in c.weights], "copies": copies(c),
                                  "compiled": c.optimizer is not None and c.optimizer is not m.optimizer}
        k = keras.models.clone_model(m)
        r["clone_in_scope"] = {"same_weights": same(m, k), "names": [w.name for w in k.weights], "copies": copies(k),
                               "layer_names": [l.name for l in k.layers] == [l.name for l in m.layers]}
        c.fit(np.zeros((4, 8, 8, 1), "float32"), np.zeros((4, 1), "float32"), verbose=0)
        r["copy_trains_alone"] = not same(m, c)

        bn = copy.deepcopy(m.layers[1])   # a layer: torch's deepcopy, Keras's names kept
        bn.moving_mean.assign_add(np.ones(2, "float32"))
        r["layer_deepcopy"] = {"names": [w.name for w in bn.weights], "copies": copies(bn),
                               "independent": bool((bn.moving_mean.numpy() != m.layers[1].moving_mean.numpy()).all())}

    c = copy.deepcopy(m)
    r["deepcopy_outside"] = {"same_weights": same(m, c), "names": [w.name for w in c.weights][:2], "copies": copies(c)}
    r["weight_decay"] = decayed(strategy)
    prefix = md.train.Checkpoint(model=m).write(os.path.join(workdir, type(strategy).__name__, "ckpt"))
    r["checkpoint_keys"] = sorted(name for name, _ in md.train.list_variables(prefix))
    return r


def local_subclass():
    class Local(keras.Model):
        def __init__(self):
            super().__init__()
            self.d = L.Dense(2)

        def call(self, x):
            return self.d(x)

    model = Local()
    model(np.zeros((1, 3), "float32"))
    try:
        copy.deepcopy(model)
    except TypeError as e:
        return f"TypeError: {e}"
    return "copied"


with tempfile.TemporaryDirectory() as workdir:
    out = {"one": run(md.distribute.get_strategy(), workdir),
           "two": run(md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]), workdir),
           "deepcopy_local_subclass": local_subclass()}
print("NAMES_AND_COPIES " + json.dumps(out))
sys.stdout.flush()
