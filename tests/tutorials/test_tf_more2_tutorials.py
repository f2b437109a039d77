"""TensorFlow's images/cnn, images/classification, load_data/numpy, load_data/csv and customization/basics
tutorials, typed as printed with ``tf.`` -> ``md.``, give TensorFlow's results on one device and under a
MirroredStrategy on 2 logical CPUs, or fail saying why.

``_tf_more2_programs.py`` runs each page once per framework (its docstring lists the data and the named
substitutions). TensorFlow's observations are in ``_tf_more2_expected.json`` (tensorflow-cpu 2.21.0,
tf.keras = Keras 2: ``cd tests/tutorials && TF_USE_LEGACY_KERAS=1 python _tf_more2_programs.py tf``).
Numbers are compared at float32 tolerances (2e-4 relative). What multidev does differently is listed
with why.
"""

import os

import pytest

from tests.tutorials._tf_compare import compared, expected, md_observations

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAM = os.path.join(HERE, "_tf_more2_programs.py")

#: Programs whose TF result on 2 replicas is not TF's one-device result; multidev gives the latter.
TF_TWO_REPLICAS = {
    "classification": "TF fails `model.predict` of one image on 2 replicas (replica 1's batch is empty and its "
                      "Conv2D raises 'input depth must be evenly divisible by filter depth: 3 vs 16'); multidev "
                      "predicts it as one device does",
}

#: Observations made after random draws TF and torch cannot repeat.
RANDOM_AFTER = {
    # the first image of a batch after the per-epoch shuffle (the batch's sum is compared)
    "classification": ("pixel_range",),
}

#: (program, key) -> (check of md's value, why it differs from TF's on purpose).
MD_DIFFERS = {
    ("basics", "cpu_device"): (
        lambda got, tf: "torch.device" in got["message"],
        "an md tensor is a torch tensor: `x.device` is a torch.device, not a string; the page's "
        "`x.device.endswith('CPU:0')` raises AttributeError (write `str(x.device)`, which is 'cpu')"),
    ("classification", "img_array"): (
        lambda got, tf: got[0] == tf[0],
        "tf_keras's load_img needs PIL, which the TensorFlow venv lacks: TF's side decodes with tf.io and resizes "
        "bilinearly, md's load_img resizes with PIL's default 'nearest' as tf_keras's does; shapes compared"),
    ("classification", "np_min_of_tensor"): (
        lambda got, tf: got.get("raises") == "TypeError" and "'dim'" in got["message"],
        "numpy's reductions of a torch tensor call its method with numpy's keywords: np.min(t) is t.min(axis=None, "
        "out=None), which torch refuses (TypeError: min(): argument 'dim' must be int); the page's "
        "`print(np.min(first_image), np.max(first_image))` needs `first_image.numpy()` (or `first_image.min()`)"),
    ("classification", "confidence"): (
        lambda got, tf: got.get("raises") == "TypeError" and "'dim'" in got["message"],
        "the same for the page's `100 * np.max(score)`: write `100 * np.max(score.numpy())`"),
}

#: Programs md refuses with an error saying why: (program, exception, words the message must hold).
MD_REFUSES = {
    "csv_titanic": ("AttributeError", ("string tensors", "StringLookup")),
}


def _problems(tf, md_out):
    problems = []
    for name, got in md_out.items():
        program, _, replicas = name.partition("/")
        if program in MD_REFUSES:
            kind, words = MD_REFUSES[program]
            if got.get("raises") != kind or not all(w in got.get("message", "") for w in words):
                problems.append(f"{name}: the refusal changed: {got}")
            continue
        want = tf[f"{program}/1" if replicas == "2" and program in TF_TWO_REPLICAS else name]
        problems += compared(name, want, got, MD_DIFFERS, RANDOM_AFTER.get(program, ()))
    return problems


@pytest.fixture(scope="module")
def observations():
    return expected("_tf_more2_expected.json"), md_observations(PROGRAM)


def test_more2_tutorials_give_tensorflows_results_on_one_device_and_two_replicas(observations):
    tf, md_out = observations
    assert sorted(md_out) == sorted(tf)
    problems = _problems(tf, md_out)
    assert not problems, "\n".join(problems)
    for name, got in md_out.items():   # every replica's copy of the trained weights agrees
        assert got.get("copies_agree", True) is True and got.get("copies_agree_augmented", True) is True, name


def test_refused_programs_run_in_tensorflow_and_two_replica_exceptions_are_real(observations):
    tf, _ = observations
    assert all("raises" not in tf[f"{p}/{r}"] for p in MD_REFUSES for r in (1, 2))
    assert all(tf[f"{p}/2"].get("raises") and "raises" not in tf[f"{p}/1"] for p in TF_TWO_REPLICAS)
