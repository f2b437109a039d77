"""Record TensorFlow 2.21's three-replica splits (run once, in TensorFlow's venv, never in CI):

    /work/tfvenv/bin/python tests/distribute/record_three_replica_split.py
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tensorflow as tf  # noqa: E402

from _three_replica_cases import observe  # noqa: E402


def main() -> None:
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 3)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1", "/cpu:2"])
    record = {"recorded_with": f"tensorflow {tf.__version__}, MirroredStrategy over 3 logical CPUs",
              "steps": observe(tf, strategy)}
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "three_replica_split_tensorflow.json"), "w") as f:
        json.dump(record, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
