"""compile/fit/evaluate/predict on arrays, tensors and iterables; model kinds; bad input."""

import numpy as np
import pytest
import torch

import multidev.keras as keras
from multidev.keras import layers, metrics, models


def regression_data(n=64):
    rng = np.random.RandomState(0)
    x = rng.randn(n, 4).astype("float32")
    y = (x @ np.array([1.0, -2.0, 0.5, 3.0], dtype="float32"))[:, None]
    return x, y


def small_classifier(n_classes=3):
    return models.Sequential([layers.Dense(16, activation="relu", input_shape=(4,)),
                              layers.Dense(n_classes, activation="softmax")])


def test_fit_reduces_loss_and_returns_history():
    x, y = regression_data()
    model = models.Sequential([layers.Dense(1, input_shape=(4,))])
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse", metrics=["mae"])
    history = model.fit(x, y, batch_size=16, epochs=5, verbose=0)
    assert history is model.history and history.epoch == [0, 1, 2, 3, 4]
    assert set(history.history) == {"loss", "mae"}
    assert history.history["loss"][-1] < 0.1 * history.history["loss"][0]
    assert model.evaluate(x, y, verbose=0)[0] < 0.1 * history.history["loss"][0]


def test_epoch_loss_is_batch_size_weighted_mean_over_uneven_batches():
    x, y = regression_data(10)
    model = models.Sequential([layers.Dense(1, input_shape=(4,))])
    model.compile(optimizer=keras.optimizers.SGD(0.0), loss="mse")
    logs = model.evaluate(x, y, batch_size=4, verbose=0, return_dict=True)     # batches of 4, 4, 2
    full = float(((model.predict(x, verbose=0) - y) ** 2).mean())
    assert logs["loss"] == pytest.approx(full, rel=1e-5)


def test_accuracy_string_resolves_from_loss_and_shapes():
    x = np.random.randn(32, 4).astype("float32")
    y = np.random.randint(0, 3, 32)
    model = small_classifier()
    model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(x, y, epochs=1, verbose=0)
    assert isinstance(model.metrics[1], metrics.SparseCategoricalAccuracy) and model.metrics_names == ["loss", "accuracy"]
    onehot = keras.utils.to_categorical(y, 3)
    model2 = small_classifier()
    model2.compile("adam", "categorical_crossentropy", metrics=["acc"])
    model2.fit(x, onehot, epochs=1, verbose=0)
    assert isinstance(model2.metrics[1], metrics.CategoricalAccuracy)
    binary = models.Sequential([layers.Dense(1, activation="sigmoid", input_shape=(4,))])
    binary.compile("adam", "binary_crossentropy", metrics=["accuracy"])
    binary.fit(x, (y > 0).astype("float32"), epochs=1, verbose=0)
    assert isinstance(binary.metrics[1], metrics.BinaryAccuracy)


def test_fit_on_tensors_and_on_an_iterable_dataset():
    x, y = regression_data()
    model = models.Sequential([layers.Dense(1, input_shape=(4,))])
    model.compile(keras.optimizers.Adam(0.05), "mse")
    model.fit(torch.from_numpy(x), torch.from_numpy(y), epochs=1, verbose=0)

    class Batches:
        def __iter__(self):
            for i in range(0, 64, 16):
                yield torch.from_numpy(x[i:i + 16]), torch.from_numpy(y[i:i + 16])

        def cardinality(self):
            return 4

    hist = model.fit(Batches(), epochs=3, verbose=0, validation_data=Batches())
    assert len(hist.history["val_loss"]) == 3
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.from_numpy(x), torch.from_numpy(y)),
                                         batch_size=16)
    assert model.evaluate(loader, verbose=0) == pytest.approx(model.evaluate(x, y, verbose=0), rel=1e-5)
    assert model.predict(loader, verbose=0).shape == (64, 1)


def test_steps_per_epoch_continues_one_iterator_and_stops_when_data_runs_out():
    x, y = regression_data(32)
    model = models.Sequential([layers.Dense(1, input_shape=(4,))])
    model.compile("sgd", "mse")
    batches = [(x[i:i + 8], y[i:i + 8]) for i in range(0, 32, 8)]   # 4 batches in total
    with pytest.warns(UserWarning, match="ran out of data"):
        hist = model.fit(iter(batches), steps_per_epoch=3, epochs=5, verbose=0)
    assert hist.epoch == [0, 1]
    hist = model.fit(x, y, batch_size=8, steps_per_epoch=3, epochs=3, verbose=0)   # arrays restart
    assert hist.epoch == [0, 1, 2]


def test_validation_split_uses_the_last_samples_and_validation_freq():
    x, y = regression_data(40)
    model = models.Sequential([layers.Dense(1, input_shape=(4,))])
    model.compile("sgd", "mse")
    seen = []
    cb = keras.callbacks.LambdaCallback(on_test_batch_end=lambda b, logs: seen.append(b))
    hist = model.fit(x, y, batch_size=8, epochs=4, validation_split=0.25, validation_freq=2, verbose=0, callbacks=[cb])
    assert len(hist.history["val_loss"]) == 2 and seen == [0, 1, 0, 1]    # 10 validation samples -> 2 batches


def test_sample_weight_and_class_weight():
    x = np.random.randn(16, 4).astype("float32")
    y = np.array([0, 1] * 8)
    model = small_classifier(2)
    model.compile(keras.optimizers.SGD(0.0), "sparse_categorical_crossentropy")
    base = model.evaluate(x, y, verbose=0, batch_size=16)
    zeroed = model.evaluate(x, y, sample_weight=np.zeros(16), verbose=0, batch_size=16)
    assert zeroed == 0.0 and base > 0
    per_sample = keras.losses.sparse_categorical_crossentropy(y, model.predict(x, verbose=0)).numpy()
    logs = model.train_on_batch(x, y, class_weight={0: 0.0, 1: 2.0})
    assert logs == pytest.approx(2 * per_sample[y == 1].sum() / 16, rel=1e-5)


def test_train_test_predict_on_batch():
    x, y = regression_data(8)
    model = models.Sequential([layers.Dense(1, input_shape=(4,))])
    model.compile(keras.optimizers.SGD(0.1), "mse", metrics=["mae"])
    before = model.test_on_batch(x, y)
    model.train_on_batch(x, y)
    after = model.test_on_batch(x, y, return_dict=True)
    assert after["loss"] < before[0] and set(after) == {"loss", "mae"}
    assert model.predict_on_batch(x).shape == (8, 1)


def test_functional_model_multi_io_and_dict_losses():
    a, b = layers.Input(shape=(4,), name="a"), layers.Input(shape=(3,), name="b")
    merged = layers.Concatenate()([layers.Dense(5)(a), b])
    out_cls = layers.Dense(2, activation="softmax", name="cls")(merged)
    out_reg = layers.Dense(1, name="reg")(merged)
    model = keras.Model(inputs=[a, b], outputs=[out_cls, out_reg])
    assert [l.name for l in model.layers][:2] == ["a", "b"]
    model.compile("adam", loss={"cls": "sparse_categorical_crossentropy", "reg": "mse"},
                  loss_weights={"cls": 1.0, "reg": 0.0}, metrics={"cls": ["accuracy"]})
    xa, xb = np.random.randn(20, 4).astype("float32"), np.random.randn(20, 3).astype("float32")
    yc, yr = np.random.randint(0, 2, 20), np.random.randn(20, 1).astype("float32")
    logs = model.evaluate([xa, xb], [yc, yr], verbose=0, return_dict=True)
    assert set(logs) == {"loss", "cls_loss", "reg_loss", "cls_accuracy"}
    assert logs["loss"] == pytest.approx(logs["cls_loss"], rel=1e-5)
    preds = model.predict({"a": xa, "b": xb}, verbose=0)
    assert [p.shape for p in preds] == [(20, 2), (20, 1)]
    with pytest.raises(ValueError, match=r'Input 1 of layer "model" is incompatible.*expected shape=\(None, 3\)'):
        model.predict([xa, np.zeros((20, 5), "float32")], verbose=0)


def test_subclassed_and_wrapped_torch_models_train():
    class MLP(keras.Model):
        def __init__(self):
            super().__init__()
            self.hidden = layers.Dense(8, activation="relu")
            self.out = layers.Dense(1)

        def call(self, x):
            return self.out(self.hidden(x))

    x, y = regression_data()
    sub = MLP()
    sub.compile(keras.optimizers.Adam(0.02), "mse")
    h = sub.fit(x, y, epochs=3, verbose=0)
    assert h.history["loss"][-1] < h.history["loss"][0] and sub.count_params() == 4 * 8 + 8 + 9
    assert [l.name for l in sub.layers] == ["dense", "dense_1"]
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Dropout(0.5), torch.nn.Linear(8, 1))
    wrapped = keras.Model.from_torch(net)
    wrapped.compile(keras.optimizers.Adam(0.02), "mse")
    h = wrapped.fit(x, y, epochs=3, verbose=0)
    assert h.history["loss"][-1] < h.history["loss"][0]
    assert np.allclose(wrapped.predict(x, verbose=0), wrapped.predict(x, verbose=0))   # dropout off in predict
    assert not net.training


def test_sequential_building_and_input_shape_errors():
    model = models.Sequential()
    model.add(layers.Input(shape=(6,)))
    model.add(layers.Dense(3))
    assert model.built and model.layers[0].output_shape == (None, 3)
    lazy = models.Sequential([layers.Dense(3)])
    lines = []
    lazy.summary(print_fn=lines.append)   # Keras 3's table of an unbuilt model (tf.keras 2 raised): keras.io prints it
    assert any("0 (unbuilt)" in line for line in lines)
    lazy(torch.ones(2, 6))
    assert lazy.count_params() == 21
    with pytest.raises(ValueError, match=r'layer "sequential" is incompatible.*expected shape=\(None, 6\), found shape=\(2, 5\)'):
        model(torch.ones(2, 5))
    with pytest.raises(TypeError, match="must be an instance of class Layer.*from_torch"):
        model.add(torch.nn.Linear(2, 2))


def test_bad_inputs_give_clear_errors():
    model = small_classifier()
    with pytest.raises(RuntimeError, match="must compile your model"):
        model.fit(np.zeros((4, 4)), np.zeros(4))
    with pytest.raises(ValueError, match="Could not interpret optimizer identifier: 'adamm'.*'adam'"):
        model.compile("adamm", "mse")
    with pytest.raises(ValueError, match="Could not interpret loss identifier: 'mse2'"):
        model.compile("adam", "mse2")
    with pytest.raises(ValueError, match="Unknown metric function: 'acuracy'"):
        model.compile("adam", "mse", metrics=["acuracy"])
    model.compile("adam", "sparse_categorical_crossentropy")
    with pytest.raises(ValueError, match=r"(?s)Data cardinality is ambiguous.*x sizes: 10.*y sizes: 9"):
        model.fit(np.zeros((10, 4)), np.zeros(9), verbose=0)
    with pytest.raises(ValueError, match=r"label value of 7 .*valid range of \[0, 3\)"):
        model.fit(np.zeros((4, 4)), np.array([0, 1, 7, 2]), verbose=0)
    with pytest.raises(ValueError, match=r"expected shape=\(None, 4\), found shape=\(4, 5\)"):
        model.fit(np.zeros((4, 5)), np.zeros(4), verbose=0)
    with pytest.raises(ValueError, match="Target data is missing"):
        model.fit(np.zeros((4, 4)), verbose=0)


def test_subclassed_model_tracks_lists_of_layers():
    class Stack(keras.Model):
        def __init__(self):
            super().__init__()
            self.blocks = [layers.Dense(4, activation="relu"), layers.Dense(4)]
            self.head = layers.Dense(1)

        def call(self, x):
            for block in self.blocks:
                x = block(x)
            return self.head(x)

    model = Stack()
    model(torch.ones(2, 3))
    assert [l.name for l in model.layers] == ["dense", "dense_1", "dense_2"]
    assert len(model.trainable_variables) == 6
    model.compile("sgd", "mse")
    x, y = regression_data(16)
    model.fit(x[:, :3], y, verbose=0)


def test_step_global_batch_size_divides_the_summed_loss():
    import multidev as md
    from multidev.keras.step_inputs import StepInputs

    x, y = regression_data(8)
    model = models.Sequential([layers.Dense(1, input_shape=(4,))])
    model.compile("sgd", "mse")
    loss = lambda: float(model.compiled_loss(torch.from_numpy(y), model(torch.from_numpy(x))).detach())  # noqa: E731
    local = loss()
    strategy = md.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope():                               # this replica holds 8 of 16 examples
        scaled = strategy.extended._call_for_each_replica(loss, (), {}, step=StepInputs("train", 16))
    assert scaled == pytest.approx(local / 2)
    assert loss() == pytest.approx(local)               # nothing was left changed
