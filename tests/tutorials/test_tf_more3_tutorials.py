"""TensorFlow's text/transformer, text/nmt_with_attention and generative/pix2pix tutorials, typed as printed with ``tf.`` ->
``md.``, give TensorFlow's results on one device and under a MirroredStrategy on 2 logical CPUs.

``_tf_more3_programs.py`` runs each page once per framework (each program module's docstring names its data
and the few substitutions). TensorFlow's observations are in ``_tf_more3_expected.json`` (tensorflow-cpu
2.21.0, tf.keras = Keras 2: ``cd tests/tutorials && TF_USE_LEGACY_KERAS=1 python _tf_more3_programs.py tf``),
compared at float32 tolerances (2e-4 relative). Programs with random draws both frameworks cannot repeat
(Dropout masks, ``shuffle``) run twice: as printed, compared before the draws, and without them
("_no_dropout", "_no_shuffle"), compared throughout.

What the pages needed from md (each with its unit test in tests/keras, failing before): a layer called with
its inputs by name (``self.causal_self_attention(x=x)``: test_layer_call_inputs.py); RE2's ``\\0`` rewrite
and ``tf.strings.join`` (test_strings_rewrite.py: md's regex_replace silently wrote NUL for the punctuation);
``validation_steps`` equal to one pass (test_epoch_steps_one_pass.py); pix2pix's ``tf.random_normal_initializer``
refused naming md.keras.initializers.RandomNormal (test_tf_initializer_names.py). md refuses
``TextVectorization(ragged=True)`` saying why; the nmt program passes ragged=False on md.
"""

import os

from tests.keras.test_tf_idioms import _differences
from tests.tutorials._tf_compare import compared, expected, md_observations, without

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAM = os.path.join(HERE, "_tf_more3_programs.py")

#: Observations made after random draws (Dropout masks, shuffled batches): compared on the draw-free twin.
RANDOM_AFTER = {
    "transformer": ("fit", "evaluate"),
    "nmt_with_attention": ("fit",),
    "pix2pix": ("losses", "trained", "prediction"),
}

#: pix2pix's train_step under ``strategy.run``: tf.keras 2 refuses (ValueError) a Keras loss of the default
#: reduction in a custom loop under a strategy; md, as Keras 3, divides it by the replica count and trains
#: (the page's ``LAMBDA * tf.reduce_mean(...)`` term is a plain per-replica mean: its gradients are summed, as
#: TensorFlow sums them; docs/architecture.md). Compared with TF's one-device run up to training.
TF_REFUSES_ON_TWO = {"pix2pix": ("losses", "trained", "prediction"),
                     "pix2pix_no_dropout": ("losses", "trained", "prediction")}


def _problems(tf, md_out):
    problems = []
    for name, got in md_out.items():
        want = tf[name]
        program, _, replicas = name.partition("/")
        if replicas == "2" and program in TF_REFUSES_ON_TWO:
            if want.get("raises") != "ValueError":
                problems.append(f"{name}: tf.keras 2 no longer refuses: {want}")
            skip = TF_REFUSES_ON_TWO[program]
            want, got = without(tf[f"{program}/1"], skip), without(got, skip)
        problems += compared(name, want, got, {}, RANDOM_AFTER.get(program, ()))
    return problems


def test_more3_tutorials_give_tensorflows_results_on_one_device_and_two_replicas():
    tf, md_out = expected("_tf_more3_expected.json"), md_observations(PROGRAM)
    assert sorted(md_out) == sorted(tf)
    problems = _problems(tf, md_out)
    assert not problems, "\n".join(problems)
    for name, got in md_out.items():   # every replica's copy of the trained weights agrees; training ran
        assert got["copies_agree"] is True, name
        assert len(got["fit"]["loss"]) == 3 if "fit" in got else len(got["losses"]) == 2, name


def test_two_replica_differences_in_tensorflow_are_only_the_ratio_metric():
    """TF's 2-replica numbers are its one-device numbers but for nmt's ``masked_acc``: a metric function that
    returns one ratio per replica, which Keras averages as equals (md does as TF, compared above)."""
    tf = expected("_tf_more3_expected.json")
    assert _differences(tf["transformer_no_dropout/1"], tf["transformer_no_dropout/2"]) == []
    differ = _differences(tf["nmt_with_attention_no_shuffle/1"], tf["nmt_with_attention_no_shuffle/2"])
    assert differ and all("masked_acc" in d for d in differ), differ
