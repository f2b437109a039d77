"""``model.save_weights("ckpt")`` without a suffix: Keras 2's TensorFlow-format prefix, as an md.train
checkpoint readable by ``load_weights`` and ``md.train.Checkpoint`` (seed 004, issue 25); Keras 3's
suffix rule holds for names with a suffix."""

from __future__ import annotations

import os

import pytest
import torch

import multidev as md


def _create_and_compile_model():
    model = md.keras.models.Sequential([md.keras.layers.Dense(1, input_shape=(1,))])
    model.compile(loss=md.keras.losses.MeanSquaredError(), optimizer=md.keras.optimizers.Adam(learning_rate=0.1),
                  metrics=[md.keras.metrics.mean_absolute_error])
    return model


def _data():
    x = torch.arange(0, 20, dtype=torch.float32)[:, None]
    return x, 2.0 * x + 3


def test_seed_004_saves_under_a_strategy_and_loads_into_a_plain_model(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    x, y = _data()
    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        model = _create_and_compile_model()
        model.fit(x, y, batch_size=4, epochs=3, verbose=0)
    model.save_weights("ckpt")
    assert sorted(os.listdir(".")) == ["checkpoint", "ckpt.data.safetensors", "ckpt.index"]
    assert md.train.latest_checkpoint(".") == os.path.join(".", "ckpt")      # listed, as Keras 2 did
    nonrep_model = _create_and_compile_model()
    status = nonrep_model.load_weights("ckpt")
    status.assert_consumed()                               # weights and the optimizer's state
    assert [w.tolist() for w in nonrep_model.get_weights()] == [w.tolist() for w in model.get_weights()]
    assert int(nonrep_model.optimizer.iterations) == int(model.optimizer.iterations) == 15
    perf = nonrep_model.evaluate(x, y, batch_size=4, verbose=0)
    assert perf[0] == pytest.approx(model.evaluate(x, y, batch_size=4, verbose=0)[0], rel=1e-6)


def test_md_train_checkpoint_with_the_model_as_root_reads_it(tmp_path):
    x, y = _data()
    model = _create_and_compile_model()
    model.fit(x, y, batch_size=4, epochs=1, verbose=0)
    prefix = str(tmp_path / "weights")
    model.save_weights(prefix)
    plain = md.keras.models.Sequential([md.keras.layers.Dense(1, input_shape=(1,))])     # not compiled
    status = md.train.Checkpoint(plain).read(prefix)
    status.assert_existing_objects_matched()
    with pytest.raises(AssertionError, match="optimizer"):
        status.assert_consumed()                           # the optimizer's values have no object here
    status.expect_partial()
    assert [w.tolist() for w in plain.get_weights()] == [w.tolist() for w in model.get_weights()]
    # ... and a Checkpoint(root=model) written by the user is read by load_weights
    step = md.Variable(4)
    md.train.Checkpoint(root=model, step=step).write(str(tmp_path / "rooted"))
    other = _create_and_compile_model()
    other.load_weights(str(tmp_path / "rooted")).expect_partial()
    assert [w.tolist() for w in other.get_weights()] == [w.tolist() for w in model.get_weights()]


def test_names_with_a_suffix_keep_keras_3s_rule(tmp_path):
    model = _create_and_compile_model()
    model.save_weights(str(tmp_path / "m.weights.h5"))
    assert os.path.isfile(tmp_path / "m.weights.h5") and not os.path.exists(tmp_path / "checkpoint")
    for name in ("m.h5", "m.keras", "m.ckpt"):
        with pytest.raises(ValueError, match=r"must end in `\.weights\.h5`.*or have no suffix at all"):
            model.save_weights(str(tmp_path / name))


def test_prefix_errors(tmp_path):
    model = _create_and_compile_model()
    with pytest.raises(md.errors.NotFoundError, match="does not exist"):
        model.load_weights(str(tmp_path / "never_saved"))
    model.save_weights(str(tmp_path / "ckpt"))
    with pytest.raises(FileExistsError, match="overwrite=True"):
        model.save_weights(str(tmp_path / "ckpt"), overwrite=False)
    wider = md.keras.models.Sequential([md.keras.layers.Dense(2, input_shape=(1,))])
    before = [w.tolist() for w in wider.get_weights()]
    with pytest.raises(ValueError, match="incompatible tensor shapes"):
        wider.load_weights(str(tmp_path / "ckpt"))
    assert [w.tolist() for w in wider.get_weights()] == before          # nothing restored
    unbuilt = md.keras.models.Sequential([md.keras.layers.Dense(1)])
    with pytest.raises(ValueError, match="no weights to save yet"):
        unbuilt.save_weights(str(tmp_path / "empty"))
