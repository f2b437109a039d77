"""Record what TensorFlow 2.21 does with the cases of ``_layer_state_cases.py`` into
``tf_2.21_layer_state.json``, once with its tf.keras (Keras 3) and once with tf-keras 2
(``TF_USE_LEGACY_KERAS=1``); run once per TF release, in TensorFlow's venv, never in CI:

    /work/tfvenv/bin/python tests/keras/record_layer_state.py

Each flavour runs in its own interpreter (the Keras flavour is chosen at import) on 2 logical CPUs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "tf_2.21_layer_state.json")


def worker(flavour: str) -> None:
    """Run every case with this interpreter's TensorFlow; one JSON object on stdout's last line."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    sys.path.insert(0, HERE)
    import tensorflow as tf

    from _layer_state_cases import all_cases
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    tf.get_logger().setLevel("ERROR")
    observed = {}
    for name, case in all_cases():
        try:
            observed[name] = case(tf, tf.keras, flavour)
        except Exception as exc:  # the observation is the type's name
            observed[name] = {"raises": type(exc).__name__, "message": str(exc).splitlines()[0][:300]}
    sys.stdout.write("\n" + json.dumps({"tensorflow": tf.__version__, "keras": str(getattr(tf.keras, "__version__", "2")),
                                        "cases": observed}) + "\n")


def main() -> None:
    record = {}
    for flavour, legacy in (("keras3", "0"), ("tf_keras2", "1")):
        env = dict(os.environ, TF_USE_LEGACY_KERAS=legacy)
        proc = subprocess.run([sys.executable, __file__, "--worker", flavour], capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            raise RuntimeError(f"{flavour} worker failed:\n{proc.stderr[-3000:]}")
        record[flavour] = json.loads(proc.stdout.strip().splitlines()[-1])
    with open(OUT, "w") as f:
        json.dump(record, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker(sys.argv[2])
    else:
        main()
