"""TensorFlow's core tutorials and guides typed as printed with ``tf.`` -> ``md.`` give TensorFlow's results.

``_tf_core_programs.py`` runs quickstart/beginner, quickstart/advanced, keras/classification,
customization/custom_training_walkthrough, guide/basic_training_loops, guide/intro_to_modules,
guide/autodiff (and guide/advanced_autodiff's jacobians) and guide/variable once per framework; the
Keras pages also under a MirroredStrategy over 2 logical CPUs (the model, optimizer and metrics made
in its scope; the custom loops as printed, without strategy.run, and every replica's copies checked
equal at the end). TensorFlow's observations are in ``_tf_core_expected.json``
(tensorflow-cpu 2.21.0 with tf.keras = Keras 2, the tf.keras API md.keras implements and these
pages were written for: ``cd tests/tutorials && TF_USE_LEGACY_KERAS=1 python _tf_core_programs.py tf``;
Keras 3 gives the same numbers for the quickstarts and classification, while it refuses
``tf.keras.losses.mean_squared_error``, list inputs to a layer, and does not train the
basic_training_loops Keras model, whose ``tf.Variable`` attributes it does not track).
Numbers are compared at float32 tolerances (2e-4 relative). What multidev does differently is
listed below with why; the pure math ops it leaves to torch are asserted refused with the torch name.
"""

import json
import os

import pytest

import multidev as md
from tests.conftest import run_fresh
from tests.keras.test_tf_idioms import _differences

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAM = os.path.join(HERE, "_tf_core_programs.py")

#: Programs whose TF result on 2 replicas is not TF's one-device result; multidev gives the latter.
TF_TWO_REPLICAS = {
    "basic_training_loops_fit": "the loss function reduces a 1-D y to a scalar per replica; TF averages the two "
                                "replicas' means (101 and 100 examples; its numbers vary run to run), multidev "
                                "weighs them as one device does",
    "quickstart_beginner": "Dropout draws different masks per replica in TF; multidev draws one device's",
    "quickstart_advanced": "with the model, optimizer and metrics made in the scope and the loop as printed (no "
                           "strategy.run), TF refuses the metric call in its tf.function (ValueError); multidev "
                           "updates every copy with the one set of gradients, as TF's walkthrough does",
}

#: Observations where multidev differs from TF on purpose: (program, key) -> (check of md's value, why).
MD_DIFFERS = {
    ("intro_to_modules", "list_variables"): (
        lambda got: sorted(shape for _, shape in got) == [[2], [3], [3, 2], [3, 3]],
        "md's checkpoint keys are 'model:dense_1.b' (safetensors + JSON, no object-graph entry); same shapes"),
}

#: Observations that only TF repeats run after run (Dropout's random masks): compared before fit only.
RANDOM_AFTER_FIT = {"quickstart_beginner": ("fit", "evaluate", "probabilities")}


def _problems(tf, md_out):
    problems = []
    for name, got in md_out.items():
        program, _, replicas = name.partition("/")
        want = tf[name if replicas != "2" or program not in TF_TWO_REPLICAS else f"{program}/1"]
        if program in RANDOM_AFTER_FIT:
            if replicas == "2":   # one device's masks on 2 replicas: md's own one-device run
                problems += _differences(md_out[f"{program}/1"], got, name)
            want = {k: v for k, v in want.items() if k not in RANDOM_AFTER_FIT[program]}
            got = {k: v for k, v in got.items() if k not in RANDOM_AFTER_FIT[program]}
        if "raises" in got and "raises" not in want:
            problems.append(f"{name}: {got}")
            continue
        for key in list(want):
            if (program, key) in MD_DIFFERS:
                if not MD_DIFFERS[program, key][0](got.get(key)):
                    problems.append(f"{name}/{key}: the known difference changed: {got.get(key)!r}")
                want, got = {k: v for k, v in want.items() if k != key}, {k: v for k, v in got.items() if k != key}
            elif key.startswith("printed"):   # formatted text: it formats; the numbers are compared elsewhere
                if len(got.get(key, [])) != len(want[key]):
                    problems.append(f"{name}/{key}: {got.get(key)!r}")
                want, got = {k: v for k, v in want.items() if k != key}, {k: v for k, v in got.items() if k != key}
        problems += _differences(want, got, name)
    return problems


def test_core_tutorials_give_tensorflows_results_on_one_device_and_two_replicas():
    with open(os.path.join(HERE, "_tf_core_expected.json")) as f:
        tf = json.load(f)
    proc = run_fresh(f"import runpy, sys; sys.argv = [{PROGRAM!r}, 'md']; runpy.run_path({PROGRAM!r}, "
                     "run_name='__main__')", timeout=300)
    md_out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert sorted(md_out) == sorted(tf)
    problems = _problems(tf, md_out)
    assert not problems, "\n".join(problems)


def test_two_replica_exceptions_are_real_tensorflow_differences():
    with open(os.path.join(HERE, "_tf_core_expected.json")) as f:
        tf = json.load(f)
    assert [p for p in TF_TWO_REPLICAS if tf[f"{p}/1"] == tf[f"{p}/2"]] == []


@pytest.mark.parametrize("tf_name, torch_name", [
    ("nn.relu", "torch.relu"), ("nn.sigmoid", "torch.sigmoid"),
    ("nn.softplus", "torch.nn.functional.softplus"), ("math.sin", "torch.sin"), ("linspace", "torch.linspace"),
    ("random.normal", "torch.randn"), ("norm", "torch.norm"), ("nn.elu", "torch.nn.functional.elu"), ("data.experimental.CsvDataset", "md.data.Dataset.from_tensor_slices"),
])
def test_pure_math_ops_the_programs_substitute_are_refused_naming_torchs(tf_name, torch_name):
    """The programs call torch's op where these appear (``_tf_core_common``): md says which."""
    obj, *path, last = ["md", *tf_name.split(".")]
    owner = md
    for part in path:
        owner = getattr(owner, part)
    with pytest.raises(AttributeError, match=torch_name.replace(".", r"\.")):
        getattr(owner, last)
