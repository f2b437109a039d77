"""keras.io guides typed as printed with ``tf.`` -> ``md.`` give TensorFlow 2.21's results (tf.keras = Keras 3).

``_tf_guides_program.py`` runs the snippets of six guides (preprocessing layers, masking and
padding, RNNs, subclassed layers and models, callbacks, the Sequential model) once per framework, on
one device and on a MirroredStrategy over 2 logical CPUs. TensorFlow's observations are in
``_tf_guides_expected.json`` (tensorflow-cpu 2.21.0, Keras 3.15.1: ``cd tests/keras && python
_tf_guides_program.py tf > _tf_guides_expected.json``). Under 2 replicas multidev gives TF's
MirroredStrategy result except where TF's differs from its own one-device result (``TF_2_21_TWO_REPLICAS``):
there multidev gives the one-device result. What multidev refuses is in ``MD_REFUSES``, with why.
"""

import json
import os

from tests.conftest import run_fresh
from tests.keras.test_tf_idioms import _differences

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAM = os.path.join(HERE, "_tf_guides_program.py")

#: Snippets whose TF result on 2 replicas is not TF's one-device result, and why multidev gives the latter.
TF_2_21_TWO_REPLICAS = {
    "mask_into_loss": "TF divides each replica's masked loss sum by that replica's own count of unmasked steps; "
                      "multidev divides by the global batch's count, so 2 replicas train as one device",
    "mask_with_temporal_sample_weight": "TF fails a batch of 3 split [2, 1] over the replicas (AddN of unequal shapes)",
    "stateful": "TF fails a stateful LSTM whose per-replica batch (1) is not the state's batch (2)",
    "lookup_inside_model_fit": "TF fails string inputs through a MirroredStrategy step (AddN of strings)",
}

#: What multidev refuses: snippet -> (replica counts, exception type, words of its message).
MD_REFUSES = {
    "lookup_inside_model_fit": (("1", "2"), "ValueError", "has no string inputs"),   # TF trains it on one device
    "stateful": (("2",), "ValueError", "is stateful, which md.keras cannot run on 2 replicas"),   # TF: ValueError
}

#: multidev's 2-replica gap (not yet TF's result, nor one device's): snippet -> (exception type, why).
MD_TWO_REPLICAS_GAPS: dict = {}   # non_trainable_state_in_fit left it: each replica's assign_add writes its copy, as TF


def _problems(tf, md, replicas):
    problems = []
    for name, want in tf["1"].items():
        got = md[replicas][name]
        if replicas in MD_REFUSES.get(name, ((),))[0]:
            _, kind, words = MD_REFUSES[name]
            if got.get("raises") != kind or words not in got.get("message", ""):
                problems.append(f"{replicas}/{name}: expected {kind} saying {words!r}, got {json.dumps(got)[:300]}")
            continue
        if replicas == "2" and name in MD_TWO_REPLICAS_GAPS:
            if got.get("raises") != MD_TWO_REPLICAS_GAPS[name][0]:   # fixed: move it out of the gaps
                problems.append(f"2/{name}: the known gap changed: {json.dumps(got)[:300]}")
            continue
        if replicas == "2" and name not in TF_2_21_TWO_REPLICAS:
            want = tf["2"][name]
        problems += _differences(want, got, f"{replicas}/{name}")
    return problems


def test_guides_give_tensorflows_results_on_one_device_and_two_replicas():
    with open(os.path.join(HERE, "_tf_guides_expected.json")) as f:
        tf = json.load(f)
    proc = run_fresh(f"import runpy, sys; sys.argv = [{PROGRAM!r}, 'md']; runpy.run_path({PROGRAM!r}, "
                     "run_name='__main__')", timeout=300)
    md = json.loads(proc.stdout.strip().splitlines()[-1])
    problems = _problems(tf, md, "1") + _problems(tf, md, "2")
    assert not problems, "\n".join(problems)


def test_two_replica_exceptions_are_real_tensorflow_differences():
    """Every listed 2-replica exception is a snippet whose TF results differ between 1 and 2 replicas."""
    with open(os.path.join(HERE, "_tf_guides_expected.json")) as f:
        tf = json.load(f)
    assert [n for n in TF_2_21_TWO_REPLICAS if tf["1"][n] == tf["2"][n]] == []
