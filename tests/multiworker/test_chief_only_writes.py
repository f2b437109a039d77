"""Chief-only writing, in one process: a strategy that says this process is not the chief."""

from __future__ import annotations

import os

import numpy as np
import pytest

import multidev as md
from multidev import keras


@pytest.fixture
def non_chief(monkeypatch, pretend_workers):
    """A one-device strategy posing as worker 1 (not the chief) of a job."""
    strategy = md.distribute.MirroredStrategy(["/cpu:0"])
    monkeypatch.setattr(strategy.extended, "should_checkpoint", False)
    pretend_workers(strategy, 1, 1)
    with strategy.scope():
        model = keras.models.Sequential([keras.layers.Dense(2, input_shape=(3,))])
        model.compile("sgd", "mse")
    return model


def test_other_workers_write_to_temporary_directories_and_delete_them(non_chief, tmp_path, capsys, monkeypatch):
    saved = []
    original = non_chief.save_weights
    monkeypatch.setattr(non_chief, "save_weights", lambda path, **kw: (saved.append(path), original(path, **kw)))
    x = np.ones((8, 3), "float32")
    non_chief.fit(x, x[:, :2], batch_size=4, epochs=2, verbose=1, callbacks=[
        keras.callbacks.ModelCheckpoint(str(tmp_path / "ckpt" / "w.{epoch}.weights.h5"), save_weights_only=True),
        keras.callbacks.CSVLogger(str(tmp_path / "log.csv")),
        keras.callbacks.TensorBoard(str(tmp_path / "tb")),
        keras.callbacks.BackupAndRestore(str(tmp_path / "backup"), save_freq=1, delete_checkpoint=False)])
    assert saved == [str(tmp_path / "ckpt" / "workertemp_1" / f"w.{e}.weights.h5") for e in (1, 2)]
    assert os.listdir(tmp_path / "ckpt") == [] and os.listdir(tmp_path / "tb") == []
    assert sorted(os.listdir(tmp_path)) == ["ckpt", "tb"]        # no CSV, no backup written here
    assert capsys.readouterr().out == ""                          # no progress bar either


def test_the_chief_writes_where_asked(tmp_path):
    model = keras.models.Sequential([keras.layers.Dense(2, input_shape=(3,))])
    model.compile("sgd", "mse")
    x = np.ones((8, 3), "float32")
    model.fit(x, x[:, :2], batch_size=4, epochs=1, verbose=0, callbacks=[
        keras.callbacks.ModelCheckpoint(str(tmp_path / "ckpt" / "w.weights.h5"), save_weights_only=True),
        keras.callbacks.CSVLogger(str(tmp_path / "log.csv"))])
    assert sorted(os.listdir(tmp_path)) == ["ckpt", "log.csv"] and os.listdir(tmp_path / "ckpt") == ["w.weights.h5"]
