"""Record TensorFlow 2.21's numbers for p58's ``train`` (tf.keras = Keras 3 on TensorFlow, on one device
and on MirroredStrategy over 2 logical CPUs) into p58_tensorflow.json.

Run with TensorFlow's interpreter (CI has no TensorFlow; the JSON is committed):
    /work/tfvenv/bin/python tests/programs/keras/_p58_tensorflow.py
"""

import importlib.util
import json
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def _p58():
    spec = importlib.util.spec_from_file_location("p58", os.path.join(HERE, "p58_simsiam.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _digits(value):
    return float(np.format_float_positional(np.float32(value), precision=7, unique=False, fractional=False))


def record():
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    out = {"recorded_with": f"tensorflow-cpu {tf.__version__}: tf.keras (Keras {tf.keras.version()} on TensorFlow); "
                            "MirroredStrategy over 2 logical CPUs"}
    for name, strategy in (("one_device", tf.distribute.get_strategy()),
                           ("two_replicas", tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))):
        _, result = _p58().train(tf.keras, strategy, tf.GradientTape, tf.data.Dataset)
        out[name] = {k: np.vectorize(_digits)(np.asarray(v)).tolist() for k, v in result.items()}
    return out


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ["TF_USE_LEGACY_KERAS"] = "0"
    with open(os.path.join(HERE, "p58_tensorflow.json"), "w") as f:
        json.dump(record(), f, indent=1)
        f.write("\n")
