"""TensorFlow's "Migrate to TF2" guides, their TF2 code written once for ``tf`` = TensorFlow or multidev.

``python tests/tutorials/migrate/_program.py tf|md [snippet,...]`` prints one JSON dict
``{"1": {snippet: observation}, "2": {...}}``: each snippet on one replica and on a MirroredStrategy
over 2 logical CPUs (``test_migrate_guides.py``). TensorFlow's observations (tensorflow-cpu 2.21.0,
tf.keras = Keras 3) are in ``_expected_tf.json``: ``cd tests/tutorials/migrate &&
/work/tfvenv/bin/python _program.py tf > _expected_tf.json``. An observation is rounded numbers, or
the exception's type name and message.
"""

import contextlib
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _common  # noqa: E402,F401  (chooses tf or multidev from sys.argv)
import _checkpoints  # noqa: E402
import _early_stopping  # noqa: E402
import _metrics_saved_model  # noqa: E402
import _evaluator  # noqa: E402
import _logging  # noqa: E402
import _mirrored  # noqa: E402

MODULES = [_mirrored, _checkpoints, _early_stopping, _logging, _metrics_saved_model, _evaluator]


def main():
    only = sys.argv[2].split(",") if len(sys.argv) > 2 else None
    results = {}
    for replicas in (1, 2):
        results[str(replicas)] = out = {}
        for module in MODULES:
            for snippet in module.SNIPPETS:
                if only and snippet.__name__ not in only:
                    continue
                os.chdir(tempfile.mkdtemp())
                try:
                    with contextlib.redirect_stdout(sys.stderr):   # what the guides print
                        out[snippet.__name__] = snippet(replicas)
                except Exception as e:  # the observation is the exception's type
                    out[snippet.__name__] = {"raises": type(e).__name__, "message": str(e)[:300]}
    print(json.dumps(results))


if __name__ == "__main__":
    main()
