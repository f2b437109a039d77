"""tf.keras and tf.distribute idioms next to ``fit`` (its arguments, callbacks, losses and metrics by name,
optimizer options, custom-loop reductions, tf.data pipelines over replicas), written once for ``tf`` =
TensorFlow or multidev.

``python tests/tutorials/_tf_more4_programs.py tf|md [name,...]`` prints one JSON dict
``{program: {observation: value}}`` (``tests/tutorials/test_tf_more4_tutorials.py``); with
``TUTORIAL_TRACEBACK=1`` an observed exception's traceback goes to stderr. Each program runs on one device
("<name>/1") and under a MirroredStrategy over 2 logical CPUs ("<name>/2").
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _tf_core_common  # noqa: E402,F401  (chooses tf or multidev from sys.argv)
import _tf_callback_idioms  # noqa: E402
import _tf_compile_idioms  # noqa: E402
import _tf_fit_idioms  # noqa: E402
import _tf_loop_idioms  # noqa: E402
import _tf_more_programs  # noqa: E402

_tf_more_programs.MODULES[:] = [_tf_fit_idioms, _tf_callback_idioms, _tf_compile_idioms, _tf_loop_idioms]

if __name__ == "__main__":
    _tf_more_programs.main()
