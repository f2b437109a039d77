"""Record TensorFlow 2.21's numbers for ``_mw_evaluate_program.py`` (CI has no TensorFlow).

    /work/tfvenv/bin/python tests/multiworker/record_mw_evaluate.py

runs it as 2 local TF worker processes (``record_mw_tutorials.run_tf_workers``: TF_CONFIG on loopback,
MultiWorkerMirroredStrategy on CPU, tf-keras 2) and writes ``mw_evaluate_tf.json``: each worker's JSON.
"""

import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from record_mw_tutorials import run_tf_workers, write_record  # noqa: E402


def main():
    out = tempfile.mkdtemp(prefix="mw_evaluate_tf_")
    workers = run_tf_workers(os.path.join(HERE, "_mw_evaluate_program.py"), out)
    write_record({"tensorflow": __import__("tensorflow").__version__, "workers": workers}, "mw_evaluate_tf.json")


if __name__ == "__main__":
    main()
