"""keras.io guides' snippets, written once for ``tf`` = TensorFlow or multidev (``tests/keras/test_tf_guides.py``).

``python tests/keras/_tf_guides_program.py tf`` (TensorFlow 2.21's python, tf.keras = Keras 3) or ``... md``
prints one JSON dict ``{"1": {snippet: observation}, "2": {...}}``: each snippet of the guides "Working
with preprocessing layers", "Understanding masking & padding", "Working with RNNs", "Making new layers
and models via subclassing", "Writing your own callbacks" and "The Sequential model", typed as printed
with ``tf.`` -> ``md.``, on one device and under a MirroredStrategy over 2 logical CPUs. Weights are set
from numpy (``_guides_common.deterministic``) so both sides start equal; random draws the guides make
(the VAE's epsilon) are replaced by constants. An observation is rounded numbers, or the exception's
type name and message.
"""

import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _guides_common as common  # noqa: E402  (chooses tf or multidev from sys.argv)
import _guides_callbacks  # noqa: E402
import _guides_layers  # noqa: E402
import _guides_masking_rnn  # noqa: E402
import _guides_preprocessing  # noqa: E402

MODULES = [_guides_preprocessing, _guides_masking_rnn, _guides_layers, _guides_callbacks]


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
                    out[snippet.__name__] = snippet(replicas)
                except Exception as e:  # the observation is the exception's type
                    out[snippet.__name__] = {"raises": type(e).__name__, "message": str(e)[:300]}
    print(json.dumps(results))


if __name__ == "__main__":
    main()
