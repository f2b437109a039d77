"""Record TensorFlow 2.21's numbers for p53's ``regularized_fit`` and p58's ``train`` (tf.keras = Keras 3 on
TensorFlow, on one device and on MirroredStrategy over 2 logical CPUs) into p53_tensorflow.json and
p58_tensorflow.json.

Run with TensorFlow's interpreter (CI has no TensorFlow; the JSONs are committed):
    /work/tfvenv/bin/python tests/programs/keras/_tensorflow_numbers.py [p53] [p58]
"""

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAMS = {"p53": "p53_pointnet_regularizers", "p58": "p58_simsiam"}


def _program(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, f"{PROGRAMS[name]}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _digits(value):
    return float(np.format_float_positional(np.float32(value), precision=7, unique=False, fractional=False))


def _results(tf, name, strategy):
    if name == "p53":
        return _program(name).regularized_fit(tf.keras, strategy)
    return _program(name).train(tf.keras, strategy, tf.GradientTape, tf.data.Dataset)[1]


def record(tf, name):
    out = {"recorded_with": f"tensorflow-cpu {tf.__version__}: tf.keras (Keras {tf.keras.version()} on TensorFlow); "
                            "MirroredStrategy over 2 logical CPUs"}
    for label, strategy in (("one_device", tf.distribute.get_strategy()),
                            ("two_replicas", tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))):
        out[label] = {k: np.vectorize(_digits)(np.asarray(v)).tolist() for k, v in _results(tf, name, strategy).items()}
    return out


if __name__ == "__main__":
    names = sys.argv[1:] or sorted(PROGRAMS)
    if len(names) > 1:   # one process each: TensorFlow's collective keys of two programs' strategies collide
        for name in names:
            subprocess.run([sys.executable, __file__, name], check=True)
        sys.exit(0)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ["TF_USE_LEGACY_KERAS"] = "0"
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    result = record(tf, names[0])
    with open(os.path.join(HERE, f"{names[0]}_tensorflow.json"), "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
