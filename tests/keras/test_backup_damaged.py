"""A damaged BackupAndRestore directory: a clear DataLossError naming the problem and the fix, never
an inexact resume, never a read outside backup_dir."""

import json
import os
import shutil

import numpy as np
import pytest
import torch

import multidev as md
import multidev.keras as keras
from multidev.keras import callbacks, layers, models
from tests.keras.test_backup_resume import Crash, CrashAt


def model():
    torch.manual_seed(1)
    m = models.Sequential([layers.Dense(4, input_shape=(3,)), layers.Dense(1)])
    m.compile(keras.optimizers.Adam(0.01), "mse")
    return m


def fit(m, cbs):
    x = np.random.RandomState(0).randn(16, 3).astype("float32")
    return m.fit(x, x[:, :1], batch_size=4, epochs=2, verbose=0, callbacks=cbs)


@pytest.fixture
def backup(tmp_path):
    """A backup directory left by a fit that crashed after its 3rd batch (backups every 2 batches)."""
    path = tmp_path / "b"
    with pytest.raises(Crash):
        fit(model(), [callbacks.BackupAndRestore(str(path), save_freq=2), CrashAt(3)])
    assert sorted(os.listdir(path)) == ["ckpt-1", "state.json"]
    return path


def resume(path):
    m = model()
    before = [w.copy() for w in m.get_weights()]
    with pytest.raises(md.errors.DataLossError) as err:
        fit(m, [callbacks.BackupAndRestore(str(path), save_freq=2)])
    for a, b in zip(before, m.get_weights()):
        np.testing.assert_array_equal(a, b)     # nothing restored from a damaged backup
    message = str(err.value)
    assert f"Delete {str(path)!r}" in message, message
    return message


def set_state(path, value):
    (path / "state.json").write_text(json.dumps(value))


@pytest.mark.parametrize("state, problem", [
    ({}, "format None"),
    ([], "holds []"),
    ("x", "holds 'x'"),
    ({"format": "multidev.keras.backup/2"}, "checkpoint None"),
])
def test_damaged_state_json_names_the_problem(backup, state, problem):
    set_state(backup, state)
    assert problem in resume(backup)


def test_unparsable_state_json(backup):
    (backup / "state.json").write_text('{"format": ')
    assert "cannot read" in resume(backup)


def test_bad_counters(backup):
    state = json.loads((backup / "state.json").read_text())
    for key, bad in (("resume_epoch", "1"), ("resume_step", -1), ("pass_taken", True), ("workers", None)):
        set_state(backup, dict(state, **{key: bad}))
        assert f"{key}={bad!r}" in resume(backup)


@pytest.mark.parametrize("entry", ["../elsewhere", "ckpt-1/../../elsewhere", "/etc", "ckpt-x", 7])
def test_checkpoint_entry_never_leaves_the_directory(backup, entry, monkeypatch):
    elsewhere = backup.parent / "elsewhere"
    shutil.copytree(backup / "ckpt-1", elsewhere)
    opened = []
    real_open = open

    def spy(file, *args, **kwargs):
        opened.append(os.path.abspath(os.fspath(file)))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr("builtins.open", spy)
    state = json.loads((backup / "state.json").read_text())
    set_state(backup, dict(state, checkpoint=entry))
    assert f"checkpoint {entry!r}" in resume(backup)
    assert not any(p.startswith(str(elsewhere)) or p.startswith("/etc") for p in opened), opened


def test_missing_checkpoint_directory(backup):
    shutil.rmtree(backup / "ckpt-1")
    assert "checkpoint directory" in resume(backup) and "is missing" in resume(backup)


@pytest.mark.parametrize("name", ["weights", "optimizer", "rng"])
def test_missing_file_is_never_resumed_inexactly(backup, name):
    os.remove(backup / "ckpt-1" / f"{name}.safetensors")
    assert f"its {name} file" in resume(backup)


@pytest.mark.parametrize("name", ["weights", "optimizer", "rng"])
def test_bit_flipped_file(backup, name):
    path = backup / "ckpt-1" / f"{name}.safetensors"
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x10      # inside the tensor data
    path.write_bytes(bytes(data))
    assert "Checksum mismatch" in resume(backup)


def test_rng_file_without_its_tensors(backup):
    from multidev.keras.saving import weights_io
    (backup / "ckpt-1" / "rng.safetensors").write_bytes(weights_io.to_bytes({"pass": torch.zeros(3)}, {}))
    assert "lacks ['workers']" in resume(backup)


@pytest.mark.parametrize("tensors", [
    {"pass": torch.zeros(3), "workers": torch.zeros(1, 3)},                               # float, wrong length
    {"pass": torch.zeros(5056, dtype=torch.uint8), "workers": torch.zeros(1, 7, dtype=torch.uint8)},
])
def test_rng_file_with_tensors_that_are_no_rng_state(backup, tensors):
    from multidev.keras.saving import weights_io
    (backup / "ckpt-1" / "rng.safetensors").write_bytes(weights_io.to_bytes(tensors, {}))
    assert "not a torch RNG state" in resume(backup)


def test_intact_backup_still_resumes(backup):
    m = model()
    fit(m, [callbacks.BackupAndRestore(str(backup), save_freq=2)])
    assert not backup.exists()


@pytest.mark.timeout(300)
def test_a_backup_killed_at_every_step_still_resumes_exactly(backup):
    """Kill the next backup's writer before each mkdir/rename/replace (the steps that change what a reader
    sees): the resumed fit always ends equal to an uninterrupted one (from the old backup or the new one),
    and nothing of the dead writer remains."""
    from tests.keras._kill_points import killed_at

    reference = model()
    fit(reference, [])
    expected = [w.copy() for w in reference.get_weights()]
    pristine = backup.parent / "pristine"
    shutil.copytree(backup, pristine)

    def one_more_backup():
        try:
            fit(model(), [callbacks.BackupAndRestore(str(backup), save_freq=2), CrashAt(2)])
        except Crash:
            pass

    kills = 0
    for point in range(1, 100):
        shutil.rmtree(backup, ignore_errors=True)
        shutil.copytree(pristine, backup)
        if not killed_at(point, one_more_backup, points=("rename", "replace", "mkdir")):
            break
        kills += 1
        resumed = model()
        fit(resumed, [callbacks.BackupAndRestore(str(backup), save_freq=2)])
        for got, want in zip(resumed.get_weights(), expected):
            np.testing.assert_array_equal(got, want, err_msg=f"kill at step {point}")
        assert sorted(os.listdir(backup.parent)) == ["pristine"], f"kill at step {point}: {os.listdir(backup.parent)}"
    assert kills >= 6, kills
