"""Keras 3 names md.keras now has (layers.ReLU & co, confusion-count metrics, text_dataset_from_directory,
positional ``Model(inputs, outputs)``), each against Keras 3's own result; unknown names say where they live."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

import multidev as md
from benchmarks.keras3_names import NAMESPACES, public_names
from multidev.keras._keras3_names import KERAS_VERSION, NAMES
from tests.integrations._keras3_env import import_keras3

keras = import_keras3()
X = torch.linspace(-3, 8, 23).reshape(1, 23)


@pytest.mark.parametrize("name,kwargs", [
    ("ReLU", {}), ("ReLU", {"max_value": 6.0}), ("ReLU", {"negative_slope": 0.1, "threshold": 1.0}),
    ("ReLU", {"max_value": 2.0, "negative_slope": 0.5}), ("LeakyReLU", {}), ("LeakyReLU", {"negative_slope": 0.1}),
    ("Softmax", {}), ("ELU", {"alpha": 0.5}),
])
def test_activation_layers_equal_keras3(name, kwargs):
    ours = getattr(md.keras.layers, name)(**kwargs)
    torch.testing.assert_close(ours(X), getattr(keras.layers, name)(**kwargs)(X))
    assert type(ours).from_config(ours.get_config()).get_config() == ours.get_config()


def test_relu_rejects_negative_arguments_as_keras3():
    with pytest.raises(ValueError, match="max_value of a ReLU layer cannot be a negative value"):
        md.keras.layers.ReLU(max_value=-1)


@pytest.mark.parametrize("name", ["TruePositives", "FalsePositives", "TrueNegatives", "FalseNegatives"])
@pytest.mark.parametrize("kwargs", [{}, {"thresholds": [0.2, 0.5, 0.9]}])
def test_confusion_count_metrics_equal_keras3(name, kwargs):
    y_true = torch.tensor([0, 1, 1, 0, 1, 0, 1, 1.0])
    y_pred = torch.tensor([0.1, 0.8, 0.4, 0.6, 0.95, 0.3, 0.5, 0.7])
    weights = torch.tensor([1, 2, 1, 1, 0.5, 1, 3, 1.0])
    ours, theirs = getattr(md.keras.metrics, name)(**kwargs), getattr(keras.metrics, name)(**kwargs)
    for part in (slice(0, 3), slice(3, 8)):  # two updates accumulate
        ours.update_state(y_true[part], y_pred[part], sample_weight=weights[part])
        theirs.update_state(y_true[part], y_pred[part], sample_weight=weights[part])
    torch.testing.assert_close(torch.as_tensor(ours.result()), torch.as_tensor(theirs.result()).float())
    assert type(md.keras.metrics.get(keras.metrics.serialize(theirs)["class_name"])) is type(ours)


def test_confusion_counts_in_fit_on_two_replicas_equal_one_device():
    x = torch.randn(20, 3, generator=torch.Generator().manual_seed(0))
    y = (x[:, :1] > 0).float()

    def fit():
        md.keras.utils.set_random_seed(0)
        model = md.keras.Sequential([md.keras.Input((3,)), md.keras.layers.Dense(1, activation="sigmoid")])
        model.compile("sgd", "binary_crossentropy", metrics=[md.keras.metrics.FalseNegatives(), "true_positives"])
        return model, model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0).history

    _, expected = fit()
    with md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]).scope():
        _, history = fit()
    assert history.keys() == expected.keys()
    for key in expected:
        assert history[key] == pytest.approx(expected[key], rel=1e-5), key
    assert expected["false_negatives"][0] + expected["true_positives"][0] == float(y.sum())


def _write_tree(root, counts):
    for name, n in counts.items():
        os.makedirs(root / name)
        for i in range(n):
            (root / name / f"{i:02d}.txt").write_text(f"{name} {i}", encoding="utf-8")
    (root / "neg" / "notes.md").write_text("not a .txt file")


def test_text_dataset_from_directory_labels_split_and_modes(tmp_path, capsys):
    _write_tree(tmp_path, {"neg": 6, "pos": 4})
    train, val = md.keras.utils.text_dataset_from_directory(tmp_path, batch_size=3, validation_split=0.3,
                                                            subset="both", seed=7)
    assert "Found 10 files belonging to 2 classes." in capsys.readouterr().out
    assert train.class_names == val.class_names == ["neg", "pos"]
    seen = {}
    for ds in (train, val):
        for texts, labels in ds:
            for text, label in zip(texts, labels.tolist()):
                seen[str(text)] = (label, ds is val)
    assert len(seen) == 10 and sum(v for _, v in seen.values()) == 3           # 7 training + 3 validation
    assert all(label == (text.startswith("pos")) for text, (label, _) in seen.items())
    first = [str(t) for t, _ in md.keras.utils.text_dataset_from_directory(tmp_path, shuffle=False, batch_size=None,
                                                                           verbose=False)]
    assert first == [f"neg {i}" for i in range(6)] + [f"pos {i}" for i in range(4)]   # sorted walk, class order
    _, binary = next(iter(md.keras.utils.text_dataset_from_directory(tmp_path, label_mode="binary", seed=1,
                                                                     verbose=False)))
    assert binary.dtype == torch.float32 and binary.shape == (10, 1)
    texts = next(iter(md.keras.utils.text_dataset_from_directory(tmp_path, labels=None, max_length=3,
                                                                 shuffle=False, verbose=False)))
    assert list(texts[:2]) == ["neg", "neg"]


@pytest.mark.parametrize("kwargs,match", [
    ({"label_mode": "sparse"}, "label_mode"), ({"validation_split": 0.2, "subset": "training"}, "seed"),
    ({"labels": "dirs"}, "labels"), ({"class_names": ["cat"]}, "class_names"),
    ({"label_mode": "binary", "class_names": ["neg"]}, "exactly 2"),
])
def test_text_dataset_from_directory_bad_arguments(tmp_path, kwargs, match):
    _write_tree(tmp_path, {"neg": 2, "pos": 2})
    with pytest.raises(ValueError, match=match):
        md.keras.utils.text_dataset_from_directory(tmp_path, verbose=False, **kwargs)


def test_model_inputs_outputs_given_positionally():
    inputs = md.keras.Input((3,))
    outputs = md.keras.layers.Dense(2)(md.keras.layers.ReLU()(inputs))
    model = md.keras.Model(inputs, outputs, name="positional")
    assert model.name == "positional" and model(torch.ones(4, 3)).shape == (4, 2)
    with pytest.raises(TypeError, match="positional"):
        md.keras.Model(3)   # one positional argument is not a functional model


@pytest.mark.parametrize("expr,keras_has", [
    ("md.keras.layers.RandomShear", True), ("md.keras.ops.image.affine_transform", True), ("md.keras.quantizers", True),
    ("md.keras.losses.Circle", True), ("md.keras.layers.Densse", False), ("md.keras.ops.foo", False),
    ("md.keras.optimizers.Muon", True), ("md.keras.optimizers.Adamm", False),
])
def test_unknown_names_say_whether_keras3_has_them(expr, keras_has):
    with pytest.raises(AttributeError) as info:
        eval(expr)
    message = str(info.value)
    assert repr(expr.rsplit(".", 1)[1]) in message
    assert ("run this program with Keras 3 on multidev" in message) == keras_has, message
    assert ("strategy.scope()" in message) == keras_has
    if expr.endswith("Densse"):
        assert "'Dense'" in message   # the close md.keras name
    assert not hasattr(md.keras.layers, "__wrapped__")   # dunder probes keep the plain error


def test_stored_keras3_names_match_the_installed_keras():
    if keras.__version__ != KERAS_VERSION:
        pytest.skip(f"names stored for Keras {KERAS_VERSION}, installed {keras.__version__}: regenerate with "
                    "benchmarks/keras3_names.py")
    for namespace in NAMESPACES:
        assert sorted(NAMES[namespace]) == public_names(keras, namespace), namespace


def test_vocabulary_the_issue_counted_is_present():
    for namespace, name in [("layers", "ReLU"), ("metrics", "FalseNegatives"), ("metrics", "TruePositives"),
                            ("utils", "text_dataset_from_directory")] + [("ops", n) for n in (
            "matmul reshape transpose concatenate stack expand_dims squeeze cast convert_to_tensor shape sum mean max "
            "min argmax sqrt square exp log abs softmax relu sigmoid gelu arange ones zeros ones_like zeros_like "
            "where clip top_k one_hot einsum").split()]:
        assert callable(getattr(getattr(md.keras, namespace), name)), (namespace, name)
        assert name in NAMES[namespace]
    assert np.isin(sorted(md.keras.ops.__all__), sorted(NAMES["ops"]) + ["core", "elementwise", "standardize_dtype"]).all()


@pytest.mark.parametrize("mode", ["one_hot", "multi_hot", "count"])
@pytest.mark.parametrize("ids", [[[1], [3], [0]], [[1, 2, 2], [0, 3, 1]], [2, 0, 2]])
def test_category_encoding_equals_keras3(mode, ids):
    ids = torch.tensor(ids)
    ours = md.keras.layers.CategoryEncoding(num_tokens=4, output_mode=mode)
    torch.testing.assert_close(ours(ids), keras.layers.CategoryEncoding(num_tokens=4, output_mode=mode)(ids))
    assert md.keras.layers.CategoryEncoding.from_config(ours.get_config()).output_mode == mode


def test_category_encoding_count_weights_and_bad_mode():
    ids, weights = torch.tensor([[1, 1, 3]]), torch.tensor([[0.5, 2.0, 1.0]])
    layer = md.keras.layers.CategoryEncoding(num_tokens=4, output_mode="count")
    torch.testing.assert_close(layer(ids, count_weights=weights), torch.tensor([[0.0, 2.5, 0.0, 1.0]]))
    with pytest.raises(ValueError, match="output_mode"):
        md.keras.layers.CategoryEncoding(4, output_mode="tf_idf")


def test_keras3_add_weight_and_add_variable_forms():
    class Linear(md.keras.layers.Layer):
        def build(self, input_shape):
            self.w = self.add_weight(shape=(input_shape[-1], 2), initializer="ones", trainable=True)
            self.b = self.add_weight((2,), initializer="zeros")

        def call(self, x):
            return md.keras.ops.matmul(x, self.w) + self.b

    layer = Linear()
    torch.testing.assert_close(layer(torch.ones(1, 3)), torch.full((1, 2), 3.0))
    assert len(layer.trainable_weights) == 2

    class Total(md.keras.metrics.Metric):
        def __init__(self):
            super().__init__(name="total")
            self.total = self.add_variable(shape=(), initializer="zeros", name="total")

        def update_state(self, values, sample_weight=None):
            self.total.assign_add(md.keras.ops.sum(values))

        def result(self):
            return self.total.value

    metric = Total()
    metric.update_state(torch.tensor([1.0, 2.0]))
    metric.update_state(torch.tensor([3.0]))
    assert float(metric.result()) == 6.0 and float(metric.total / 2) == 3.0
    metric.total.assign(0.5)
    assert float(md.keras.ops.convert_to_tensor(metric.total)) == 0.5


def test_model_subclass_called_with_inputs_and_outputs_is_functional_with_its_methods():
    class CustomModel(md.keras.Model):
        def marker(self):
            return "custom"

    inputs = md.keras.Input((3,))
    model = CustomModel(inputs, md.keras.layers.Dense(1)(inputs))
    assert isinstance(model, CustomModel) and model.marker() == "custom" and len(model.layers) == 2
    assert type(CustomModel(inputs=inputs, outputs=model.output)) is type(model)


def test_registered_custom_layer_reloads_from_a_keras_file(tmp_path):
    @md.keras.saving.register_keras_serializable(package="vocab_test", name="scale_layer")
    class Scale(md.keras.layers.Layer):
        """x * factor, rebuilt from its config by the registered name."""

        def __init__(self, factor, **kwargs):
            self.factor = factor
            super().__init__(**kwargs)

        def get_config(self):
            return dict(super().get_config(), factor=self.factor)

        def call(self, x):
            return self.factor * x

    inputs = md.keras.Input((2,))
    model = md.keras.Model(inputs, Scale(3.0)(md.keras.layers.Dense(2)(inputs)))
    model.save(tmp_path / "m.keras")
    loaded = md.keras.models.load_model(tmp_path / "m.keras")
    x = torch.ones(1, 2)
    torch.testing.assert_close(loaded(x), model(x))
    assert loaded.layers[-1].factor == 3.0
