"""tf.keras and tf.distribute idioms next to ``fit``, typed as users type them with ``tf.`` -> ``md.``, give
TensorFlow's results on one device and under a MirroredStrategy on 2 logical CPUs: fit's arguments
(validation_split, validation_freq, initial_epoch, steps_per_epoch over ``.repeat()``, validation_steps, Sequences), the
``*_on_batch`` methods, predict's partial batches, a recompile after freezing; callbacks (ReduceLROnPlateau,
LearningRateScheduler's printing, CSVLogger, TerminateOnNaN, ModelCheckpoint, EarlyStopping, what a Callback
subclass sees); losses and metrics by name and option, a loss's reduction, metrics of logits, outputs/targets/
sample weights by name; optimizer options and schedules in fit; custom-loop reductions; tf.data pipelines.

``_tf_more4_programs.py`` runs the programs once per framework. TensorFlow's observations are in
``_tf_more4_expected.json`` (tensorflow-cpu 2.21.0, tf.keras = Keras 2:
``cd tests/tutorials && TF_USE_LEGACY_KERAS=1 python _tf_more4_programs.py tf``, plus, under the key
``keras3:optimizers/1``, the ``optimizers`` program on TF 2.21's default Keras 3:
``python _tf_more4_programs.py tf optimizers``), compared at float32 tolerances (2e-4 relative).

What the programs needed from md (each with its unit test in tests/keras, failing before):
``validation_steps`` starting every validation on a new pass (test_validation_steps_fresh_pass.py: a finite
validation set ran out in the third epoch); a loss compiled with ``reduction="none"`` training on the
per-example losses' sum (test_loss_reduction_none_in_fit.py: md trained on their mean, silently); threshold
metrics of logits and soft labels (test_confusion_metrics_out_of_range.py: a PR-AUC of 0.0 for 0.55); outputs,
targets and sample weights paired by output name (test_outputs_by_name.py: a dict model with keys out of
sorted order had its losses on the wrong outputs); tf.keras 2's ``workers``/``use_multiprocessing``/
``max_queue_size`` taken by fit/evaluate (test_fit_keras2_loading_arguments.py: refused as invalid); a
Sequential's input as ``(x,)`` (test_sequential_one_element_inputs.py: an AttributeError in the first layer).
"""

import os

from tests.keras.test_tf_idioms import _differences
from tests.tutorials._tf_compare import compared, expected, md_observations

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAM = os.path.join(HERE, "_tf_more4_programs.py")


def _lr_as_learning_rate(got, want) -> bool:
    """tf.keras 2's ReduceLROnPlateau and LearningRateScheduler log the rate as ``lr``; md, as Keras 3 (TF 2.21's
    default tf.keras), as ``learning_rate``: the same numbers under Keras 3's name."""
    renamed = {("learning_rate" if k == "lr" else k): v for k, v in want.items()}
    return isinstance(got, dict) and not _differences(renamed, got)


#: Known differences, each as Keras 3 (TensorFlow 2.21's default tf.keras): (program, key) -> (check, why).
MD_DIFFERS = {
    ("callbacks", "history"): (_lr_as_learning_rate, "the rate's log name is Keras 3's"),
    ("callbacks", "csv"): (_lr_as_learning_rate, "the rate's log name is Keras 3's"),
    ("checkpoint_formats", "ckpt_suffix"): (
        lambda got, want: want == "returned" and got == "ValueError",
        "ModelCheckpoint('cp.ckpt', save_weights_only=True): tf.keras 2 writes a TF checkpoint; md refuses the "
        "suffix as Keras 3 does, naming '.weights.h5' and the suffix-free checkpoint prefix it accepts"),
}
#: Optimizers compared with Keras 3's one-device numbers (Keras 3 on TF fails on 2 replicas: merge_call inside
#: use_ema's overwrite cond). ``use_ema``: tf.keras 2 starts the moving average at the weights before the first
#: step; Keras 3, and md, at the weights after it. ``Nadam``: tf.keras 2's traced step counts its ``u_product``
#: with a Python counter fixed at trace time, so from the second step it multiplies the product once per
#: variable (its ``run_eagerly=True`` gives Keras 3's numbers, and md's).
KERAS3_OPTIMIZERS = ("adam_ema", "nadam")


def _problems(tf, md_out) -> list:
    problems = []
    for name, got in md_out.items():
        want = tf[name]
        if name.startswith("optimizers/"):
            want = {**want, **{k: tf["keras3:optimizers/1"][k] for k in KERAS3_OPTIMIZERS}}
        problems += compared(name, want, got, MD_DIFFERS, ())
    return problems


def test_more4_idioms_give_tensorflows_results_on_one_device_and_two_replicas():
    tf, md_out = expected("_tf_more4_expected.json"), md_observations(PROGRAM)
    assert sorted(md_out) == sorted(k for k in tf if not k.startswith("keras3:"))
    problems = _problems(tf, md_out)
    assert not problems, "\n".join(problems)
    for name, got in md_out.items():   # every replica's copy of the trained weights agrees
        copies = [v["copies_agree"] for v in got.values() if isinstance(v, dict) and "copies_agree" in v]
        assert all(copies + [got.get("copies_agree", True)]), name


def test_tensorflows_two_replicas_give_its_one_device_numbers():
    """The programs avoid what makes TF's 2 replicas differ from its one device (batches that split unevenly),
    so md's one-device numbers are checked against both; but for what is per replica by design: the
    pipelines' slices and BatchNormalization's batch statistics (each replica normalizes by its own rows)."""
    tf = expected("_tf_more4_expected.json")
    for name in tf:
        if name.endswith("/1") and not name.startswith(("keras3:", "data_pipelines", "layers_in_fit")):
            assert _differences(tf[name], tf[name[:-2] + "/2"]) == [], name
