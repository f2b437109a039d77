"""TensorFlow's "Migrate to TF2" guides, TF2 code typed as printed with ``tf.`` -> ``md.``, give TF 2.21's results.

``_program.py`` runs each guide's snippets once per framework, on one replica and on a MirroredStrategy
over 2 logical CPUs, in one fresh interpreter. TensorFlow's observations are in ``_expected_tf.json``
(tensorflow-cpu 2.21.0, tf.keras = Keras 3). On 2 replicas multidev gives TF's 2-replica result
except where TF's fails or differs from its own one-device result (``TF_2_21_TWO_REPLICAS``): there
multidev gives the one-device result. What multidev refuses or differs in on purpose: ``MD_DIFFERS``.
"""

import json
import os

from tests.conftest import run_fresh
from tests.keras.test_tf_idioms import _differences

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAM = os.path.join(HERE, "_program.py")

#: Snippets whose TF result on 2 replicas is not TF's one-device result, and why multidev gives the latter.
TF_2_21_TWO_REPLICAS = {
    "mirrored_keras_fit": "TF fails a global batch of 1 split [1, 0] over the replicas (AddN of unequal shapes)",
    "metrics_optimizers_fit": "TF fails a global batch of 1 split [1, 0] over the replicas (AddN of unequal shapes)",
    "stop_and_logging_callbacks": "TF fails a global batch of 1 split [1, 0] over the replicas (AddN of unequal "
                                  "shapes)",
    "backup_and_restore": "TF fails Keras 3's fit with steps_per_execution=10 on 2 replicas (a placeholder in a cond)",
    "custom_loop_early_stopping": "TF fails apply_gradients in a tf.function outside strategy.run (cross-replica "
                                  "context); eagerly (checkpoint_manager_loop) it updates every copy, as multidev does",
}

#: Where multidev differs from TF 2.21 on purpose: snippet -> (the snippet whose TF result multidev gives, or
#: multidev's observation itself, or the exception it raises and words of its message; why).
MD_DIFFERS = {
    "model_checkpoint_dir": ("model_checkpoint_keras_file", "the guide's ModelCheckpoint(filepath=<a directory>) is "
                             "tf.keras 2's (md.keras's): it trains and saves; TF 2.21's Keras 3 wants a .keras path"),
    "saved_model_keras_tf_format": ({"output": [7.0]}, "tf.keras 2's model.save(path, save_format='tf', "
                                    "signatures=...) writes a SavedModel (an md.saved_model) with the signatures, "
                                    "for a batch signature ([None]; md refuses the scalar one at save); TF 2.21's "
                                    "Keras 3 fails tracing the guide's scalar signature"),
    "saved_model_keras_file": ({"raises": "ValueError", "says": "wraps a Python function, which multidev does not "
                                "serialize"}, "a Lambda's Python function would need pickle (TF 2.21 writes its "
                                "bytecode and loads it only with safe_mode=False)"),
    "sidecar_evaluator": ({"files": ["checkpoint", "ckpt-1.index"], "evaluated": ["ckpt-1"], "same_as_evaluate": True},
                          "the guide's ModelCheckpoint('ckpt-{epoch}', save_weights_only=True) writes tf.keras 2's "
                          "TF-format checkpoint, which SidecarEvaluator evaluates (it picked the checkpoint's data "
                          "file as a weights file and failed); TF 2.21's Keras 3 wants .weights.h5"),
    "tensorboard_callback_fit": ({"epochs": 2, "event_dirs": ["train", "validation"]},
                                 "TF 2.21's venv has no tensorboard package (TBNotInstalledError); the callback's "
                                 "train/ and validation/ event directories are tf.keras's layout"),
    "summary_in_custom_loop": ({"event_dirs": [""]}, "no tensorboard package in TF 2.21's venv; the writer's events "
                               "file lies in log_dir itself, as TF's does"),
    "reset_states_spelling": ([0.5, 0.0], "tf.keras 2's metric.reset_states() (the guide's) works in md.keras; Keras 3 "
                              "removed it (AttributeError)"),
}


def _problems(tf, md, replicas):
    problems = []
    for name, want in tf["1"].items():
        got = md[replicas][name]
        if name in MD_DIFFERS:
            other = MD_DIFFERS[name][0]
            if isinstance(other, dict) and "says" in other:
                if got.get("raises") != other["raises"] or other["says"] not in got.get("message", ""):
                    problems.append(f"{replicas}/{name}: expected {other}, got {json.dumps(got)[:300]}")
            elif not isinstance(other, str):
                problems += _differences(other, got, f"{replicas}/{name}")
            elif "raises" in got or _differences({k: tf[replicas][other][k] for k in got}, got):
                problems.append(f"{replicas}/{name}: expected TF's {other} result, got {json.dumps(got)[:300]}")
            continue
        if replicas == "2" and name not in TF_2_21_TWO_REPLICAS:
            want = tf["2"][name]
        problems += _differences(want, got, f"{replicas}/{name}")
    return problems


def test_migrate_guides_give_tensorflows_results_on_one_device_and_two_replicas():
    with open(os.path.join(HERE, "_expected_tf.json")) as f:
        tf = json.load(f)
    proc = run_fresh(f"import runpy, sys; sys.argv = [{PROGRAM!r}, 'md']; runpy.run_path({PROGRAM!r}, "
                     "run_name='__main__')", timeout=300)
    md = json.loads(proc.stdout.strip().splitlines()[-1])
    problems = _problems(tf, md, "1") + _problems(tf, md, "2")
    assert not problems, "\n".join(problems)


def test_two_replica_exceptions_are_real_tensorflow_differences():
    """Every listed 2-replica exception is a snippet whose TF results differ between 1 and 2 replicas."""
    with open(os.path.join(HERE, "_expected_tf.json")) as f:
        tf = json.load(f)
    assert [n for n in TF_2_21_TWO_REPLICAS if tf["1"][n] == tf["2"][n]] == []
