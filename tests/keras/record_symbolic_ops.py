"""Record Keras 3's results of symbolic_ops_cases (run with TF 2.21's Python: its tf.keras is Keras 3):

    /work/tfvenv/bin/python tests/keras/record_symbolic_ops.py > tests/keras/tf_2.21_symbolic_ops.json
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tensorflow as tf  # noqa: E402
from symbolic_ops_cases import run  # noqa: E402

if __name__ == "__main__":
    print(json.dumps({"tensorflow": tf.__version__, "keras": tf.keras.__version__,
                      "cases": run(tf.keras, tf.keras.ops)}, indent=1))
