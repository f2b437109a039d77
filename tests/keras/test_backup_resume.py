"""BackupAndRestore mid-epoch: an interrupted fit, resumed, ends bitwise equal to an uninterrupted one."""

import json
import os

import numpy as np
import pytest
import torch

import multidev as md
import multidev.keras as keras
from multidev.keras import callbacks, layers, models


class Crash(Exception):
    pass


class CrashAt(callbacks.Callback):
    """Raises after the ``at``-th training batch of the fit (counted across epochs)."""

    def __init__(self, at):
        super().__init__()
        self.at, self.seen = at, 0

    def on_train_batch_end(self, batch, logs=None):
        self.seen += 1
        if self.seen == self.at:
            raise Crash


class Steps(callbacks.Callback):
    """Records (epoch, step) of every trained batch."""

    def __init__(self):
        super().__init__()
        self.trained, self.epoch = [], None

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        self.trained.append((self.epoch, batch))


def data(n=40):
    rng = np.random.RandomState(0)
    x = rng.randn(n, 6).astype("float32")
    return x, (x @ rng.randn(6, 1)).astype("float32")


def model():
    torch.manual_seed(1)
    m = models.Sequential([layers.Dense(16, activation="relu", input_shape=(6,)), layers.Dropout(0.3), layers.Dense(1)])
    m.compile(keras.optimizers.Adam(0.01), "mse")
    return m


def fit(m, cbs, steps_per_epoch=None):
    x, y = data()
    return m.fit(x, y, batch_size=8, epochs=3, shuffle=True, verbose=0, callbacks=cbs, steps_per_epoch=steps_per_epoch)


def weights(m):
    return [torch.as_tensor(w) for w in m.get_weights()]


@pytest.mark.parametrize("steps_per_epoch, save_freq, crash_at, resume, first", [
    (None, 3, 8, (1, 1), (1, 1)),   # 5 batches/epoch: last backup after batch 6 = epoch 1, step 1
    (3, 2, 7, (1, 3), (2, 0)),      # passes of 5 batches wrap across epochs of 3 steps; backup after
                                    # an epoch's last batch: that epoch has nothing left to train
    (3, 4, 5, (1, 1), (1, 1)),      # resumes inside the second pass over the arrays
    (None, "epoch", 12, (2, 0), (2, 0)),
])
def test_resumed_fit_equals_uninterrupted_fit(tmp_path, steps_per_epoch, save_freq, crash_at, resume, first):
    reference = model()
    fit(reference, [], steps_per_epoch)
    expected = weights(reference)

    backup = str(tmp_path / "backup")
    interrupted = model()
    with pytest.raises(Crash):
        fit(interrupted, [callbacks.BackupAndRestore(backup, save_freq=save_freq), CrashAt(crash_at)], steps_per_epoch)
    with open(os.path.join(backup, "state.json")) as f:
        state = json.load(f)
    assert (state["resume_epoch"], state["resume_step"]) == resume

    torch.manual_seed(123)   # a different process state: everything must come from the backup
    resumed, steps = model(), Steps()
    fit(resumed, [callbacks.BackupAndRestore(backup, save_freq=save_freq), steps], steps_per_epoch)
    assert steps.trained[0] == first
    assert int(resumed.optimizer.iterations) == int(reference.optimizer.iterations)
    for got, want in zip(weights(resumed), expected):
        assert torch.equal(got, want)
    assert not os.path.exists(backup)


def test_mid_epoch_resume_skips_trained_batches_without_training_on_them(tmp_path):
    backup = str(tmp_path / "b")
    with pytest.raises(Crash):
        fit(model(), [callbacks.BackupAndRestore(backup, save_freq=2), CrashAt(3)])
    resumed, steps = model(), Steps()
    fit(resumed, [callbacks.BackupAndRestore(backup, save_freq=2), steps])
    assert steps.trained[:4] == [(0, 2), (0, 3), (0, 4), (1, 0)]
    assert len(steps.trained) == 15 - 2


def test_backup_is_committed_atomically(tmp_path):
    backup = tmp_path / "b"
    with pytest.raises(Crash):
        fit(model(), [callbacks.BackupAndRestore(str(backup), save_freq=1), CrashAt(4)])
    assert sorted(os.listdir(backup)) == ["ckpt-4", "state.json"]
    assert sorted(os.listdir(backup / "ckpt-4")) == ["optimizer.safetensors", "rng.safetensors",
                                                     "weights.safetensors"]
    os.makedirs(backup / "ckpt-5")       # an uncommitted leftover of a crash while writing is ignored
    (backup / "ckpt-5" / "weights.safetensors").write_bytes(b"garbage")
    resumed, steps = model(), Steps()
    fit(resumed, [callbacks.BackupAndRestore(str(backup), save_freq=1), steps])
    assert steps.trained[0] == (0, 4)


def test_invalid_save_freq():
    for bad in (0, -3, "batch", 1.5, True):
        with pytest.raises(ValueError, match="save_freq"):
            callbacks.BackupAndRestore("/tmp/x", save_freq=bad)


def test_a_backup_of_the_older_single_directory_layout_is_still_read(tmp_path):
    x, y = data()
    first = model()
    first.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    backup = tmp_path / "old"
    backup.mkdir()
    first.save_weights(str(backup / "weights.safetensors"))
    (backup / "state.json").write_text(json.dumps({"epoch": 0}))
    with pytest.raises(md.errors.DataLossError, match="optimizer file .* is missing.*Delete"):
        fit(model(), [callbacks.BackupAndRestore(str(backup))])     # format 1 always had the optimizer's
    first.save(str(tmp_path / "model"))
    os.replace(tmp_path / "model" / "optimizer.safetensors", backup / "optimizer.safetensors")
    resumed, steps = model(), Steps()
    with pytest.warns(UserWarning, match="format 1, without RNG state"):
        fit(resumed, [callbacks.BackupAndRestore(str(backup)), steps])
    assert steps.trained[0] == (1, 0) and len(steps.trained) == 10
    assert int(resumed.optimizer.iterations) == 15


def test_the_same_model_resumes_in_process_under_a_strategy(tmp_path):
    import multidev as md

    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])

    def build():
        torch.manual_seed(1)
        with strategy.scope():
            m = models.Sequential([layers.Dense(16, activation="relu", input_shape=(6,)), layers.Dense(1)])
            m.compile(keras.optimizers.Adam(0.01), "mse")
        return m

    reference = build()
    fit(reference, [])
    backup = str(tmp_path / "b")
    m = build()
    with pytest.raises(Crash):
        fit(m, [callbacks.BackupAndRestore(backup, save_freq=3), CrashAt(8)])
    fit(m, [callbacks.BackupAndRestore(backup, save_freq=3)])   # optimizer slots reach every replica's copy
    for got, want in zip(weights(m), weights(reference)):
        assert torch.equal(got, want)
    assert all(torch.equal(c, v.values[0]) for v in m.trainable_variables for c in v.values)


def test_workers_that_see_different_backups_refuse_to_train(tmp_path, pretend_workers):
    import multidev as md

    backup = str(tmp_path / "b")
    with pytest.raises(Crash):
        fit(model(), [callbacks.BackupAndRestore(backup, save_freq=2), CrashAt(3)])
    strategy = md.distribute.MirroredStrategy(["/cpu:0"])
    with strategy.scope():
        m = models.Sequential([layers.Dense(16, activation="relu", input_shape=(6,)), layers.Dropout(0.3),
                               layers.Dense(1)])
        m.compile(keras.optimizers.Adam(0.01), "mse")
    # Pretend to be worker 0 of 2, and that worker 1 found no backup (a directory it cannot see).
    pretend_workers(strategy, 2, 0, gather=lambda t, axis: torch.cat([t, torch.tensor([[0, -1, -1]])]))
    with pytest.raises(md.errors.FailedPreconditionError, match=r"worker 0: epoch 0 step 2; worker 1: no backup"):
        fit(m, [callbacks.BackupAndRestore(backup, save_freq=2)])
