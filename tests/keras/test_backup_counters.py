"""BackupAndRestore checks every counter of its state file against the fit it resumes (epochs, epoch
length, pass length, batch size, workers) and raises DataLossError naming the file and the field,
instead of a fit that silently trains nothing (issue 24 item 6)."""

import json

import numpy as np
import pytest

from multidev.keras import callbacks
from tests.keras.test_backup_damaged import backup, model, resume  # noqa: F401  (the fixture)


def _edit_state(path, **changes):
    state = json.loads((path / "state.json").read_text())
    for key, value in changes.items():
        if key.startswith("run_"):
            state["run"][key[4:]] = value
        else:
            state[key] = value
    (path / "state.json").write_text(json.dumps(state))
    return state


def _names(message, path, field):
    return f"{str(path / 'state.json')!r} field {field!r}" in message


def test_the_state_records_the_run(backup):
    state = json.loads((backup / "state.json").read_text())
    assert (state["resume_epoch"], state["resume_step"], state["pass_taken"], state["workers"]) == (0, 2, 2, 1)
    assert state["run"] == {"epochs": 2, "steps_per_epoch": 4, "pass_length": 4, "batch_size": 4}


@pytest.mark.parametrize("field, value, why", [
    ("resume_step", 10**6, "an epoch of this fit has 4 step(s)"),
    ("resume_epoch", 10**6, "this fit trains 2 epoch(s)"),
    ("pass_taken", 99, "one pass over this fit's input has 4 batch(es)"),
    ("workers", 2, "its rng file holds the RNG states of 1 worker(s)"),
])
def test_a_counter_past_the_run_is_refused(backup, field, value, why):
    _edit_state(backup, **{field: value})
    message = resume(backup)             # nothing restored, and the fix (delete backup_dir) named
    assert _names(message, backup, field) and f"= {value!r}" in message and why in message, message


def test_resume_step_after_the_last_epoch_is_refused(backup):
    _edit_state(backup, resume_epoch=2, resume_step=1)
    assert _names(resume(backup), backup, "resume_step")


def _fit_with(m, cbs, batch_size, epochs=2, n=16):
    x = np.random.RandomState(0).randn(n, 3).astype("float32")
    return m.fit(x, x[:, :1], batch_size=batch_size, epochs=epochs, verbose=0, callbacks=cbs)


def test_resuming_with_another_batch_size_or_data_is_refused(backup):
    import multidev as md
    for kwargs, field in [({"batch_size": 8}, "run.batch_size"), ({"batch_size": 4, "n": 20}, "run.steps_per_epoch")]:
        with pytest.raises(md.errors.DataLossError) as err:
            _fit_with(model(), [callbacks.BackupAndRestore(str(backup), save_freq=2)], **kwargs)
        assert _names(str(err.value), backup, field), str(err.value)


def test_fewer_epochs_than_the_backup_reached_is_refused(tmp_path):
    import multidev as md
    path = tmp_path / "b"
    _fit_with(model(), [callbacks.BackupAndRestore(str(path), delete_checkpoint=False)], 4, epochs=3)
    with pytest.raises(md.errors.DataLossError) as err:
        _fit_with(model(), [callbacks.BackupAndRestore(str(path))], 4, epochs=2)
    assert _names(str(err.value), path, "resume_epoch") and "this fit trains 2 epoch(s)" in str(err.value)
    history = _fit_with(model(), [callbacks.BackupAndRestore(str(path))], 4, epochs=5)   # more epochs: resumes
    assert history.epoch == [3, 4]


def test_a_damaged_run_record_is_refused(backup):
    _edit_state(backup, run_batch_size=-4)
    assert "has run=" in resume(backup)
