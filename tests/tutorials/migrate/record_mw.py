"""Record TensorFlow 2.21's numbers for ``_mw_program.py`` (CI has no TensorFlow):

    /work/tfvenv/bin/python tests/tutorials/migrate/record_mw.py

2 TF worker processes (TF_CONFIG on loopback, tf_keras 2.21) -> ``_expected_mw_tf.json``.
"""

import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "multiworker"))

from record_mw_tutorials import run_tf_workers  # noqa: E402


def main():
    workers = run_tf_workers(os.path.join(HERE, "_mw_program.py"), tempfile.mkdtemp(prefix="mw_migrate_tf_"))
    with open(os.path.join(HERE, "_expected_mw_tf.json"), "w") as f:
        json.dump({"tensorflow": __import__("tensorflow").__version__, "workers": workers}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
