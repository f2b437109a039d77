"""Record TensorFlow's side of the conformance cases into tf_<version>.json (run once per TF release,
in TensorFlow's own venv, never in CI):

    TF_USE_LEGACY_KERAS=1 /work/tfvenv/bin/python tests/conformance/record_tf.py

Keras cases use Keras 2 (tf-keras), the Keras of the seeds and of md.keras.
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tensorflow as tf  # noqa: E402

from harness import run_all  # noqa: E402


def main() -> None:
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    tf.get_logger().setLevel("ERROR")
    only = set(sys.argv[1:]) or None
    observed = run_all(tf, only)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"tf_{'.'.join(tf.__version__.split('.')[:2])}.json")
    if only:   # print the selected cases instead of rewriting the record
        print(json.dumps(observed, indent=1, sort_keys=True))
        return
    with open(path, "w") as f:
        json.dump({"tensorflow": tf.__version__, "cases": observed}, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"{len(observed)} cases recorded in {path}")


if __name__ == "__main__":
    main()
