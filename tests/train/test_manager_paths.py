"""Where checkpoints are found again: the `checkpoint` file records paths relative to its directory,
as TensorFlow writes them (``tf.train.CheckpointManager(ckpt, "./tf_ckpts")`` records ``ckpt-2``), so
relative, absolute, ``~``, symlinked, moved and copied directories all restore (issue 24 item 4)."""

from __future__ import annotations

import os
import re
import shutil

import pytest

import multidev as md
from tests.conftest import ROOT


def _save_twice(directory, value=3.0):
    v = md.Variable(0.0)
    manager = md.train.CheckpointManager(md.train.Checkpoint(v=v), directory, max_to_keep=2)
    manager.save()
    v.assign(value)
    return manager.save()


def _restored(directory):
    """A restarted job's view of ``directory``: (latest path, the value restore_or_initialize gives)."""
    v = md.Variable(0.0)
    manager = md.train.CheckpointManager(md.train.Checkpoint(v=v), directory, max_to_keep=2)
    return manager.restore_or_initialize(), float(v), manager.checkpoints


def _state_lines(directory):
    with open(os.path.join(directory, "checkpoint")) as f:
        return [line for line in f.read().splitlines() if "paths" in line or "model_checkpoint_path" in line]


@pytest.mark.parametrize("directory", ["./tf_ckpts", "ckpt", "runs/2/ckpts", "~/md_ckpts"])
def test_relative_directories_record_names_inside_the_directory(tmp_path, monkeypatch, directory):
    monkeypatch.chdir(tmp_path)
    path = _save_twice(directory)
    assert path == os.path.join(directory, "ckpt-2")                    # as TF returns it
    assert _state_lines(directory) == ['model_checkpoint_path: "ckpt-2"', 'all_model_checkpoint_paths: "ckpt-1"',
                                       'all_model_checkpoint_paths: "ckpt-2"']
    assert md.train.latest_checkpoint(directory) == path
    assert _restored(directory) == (path, 3.0, [os.path.join(directory, "ckpt-1"), path])


def test_tilde_is_a_directory_name_as_in_tensorflow(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    _save_twice("~/md_ckpts")
    assert os.path.isfile(tmp_path / "~" / "md_ckpts" / "ckpt-2.index")   # TF does not expand `~` either
    assert not (tmp_path / "home").exists()


def test_absolute_directory_and_a_relative_view_of_it(tmp_path, monkeypatch):
    directory = str(tmp_path / "abs")
    path = _save_twice(directory)
    assert path == os.path.join(directory, "ckpt-2") and _state_lines(directory)[0] == 'model_checkpoint_path: "ckpt-2"'
    monkeypatch.chdir(tmp_path)
    assert _restored("abs")[:2] == (os.path.join("abs", "ckpt-2"), 3.0)


def test_symlinked_moved_and_copied_directories(tmp_path, monkeypatch):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    _save_twice("link", value=5.0)                                   # saved through the symlink
    assert _restored(str(real))[:2] == (str(real / "ckpt-2"), 5.0)   # read through the real path
    assert _restored("link")[:2] == (os.path.join("link", "ckpt-2"), 5.0)
    os.rename(real, tmp_path / "moved")                               # the job's directory moved
    assert _restored("moved")[:2] == (os.path.join("moved", "ckpt-2"), 5.0)
    other = tmp_path / "other_machine" / "job"                       # copied elsewhere (another machine)
    shutil.copytree(tmp_path / "moved", other)
    shutil.rmtree(tmp_path / "moved")
    latest, value, kept = _restored(str(other))
    assert (latest, value) == (str(other / "ckpt-2"), 5.0) and kept == [str(other / "ckpt-1"), latest]


def test_checkpoint_save_with_a_relative_prefix(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    v = md.Variable(7.0)
    path = md.train.Checkpoint(v=v).save("rel/sub/ck")
    assert path == "rel/sub/ck-1" and _state_lines("rel/sub")[0] == 'model_checkpoint_path: "ck-1"'
    v2 = md.Variable(0.0)
    md.train.Checkpoint(v=v2).restore(md.train.latest_checkpoint("rel/sub")).assert_consumed()
    assert float(v2) == 7.0


def test_the_docs_example_restores_on_its_second_run(tmp_path, monkeypatch, capsys):
    with open(os.path.join(ROOT, "docs", "checkpoints.md")) as f:
        code = re.search(r"```python\n(.*?)```", f.read(), re.S).group(1)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "docs/checkpoints.md", "exec"), {})
    first = capsys.readouterr().out
    exec(compile(code, "docs/checkpoints.md", "exec"), {})
    second = capsys.readouterr().out
    assert first.startswith("Initializing from scratch.") and "step 50: ./tf_ckpts/ckpt-5" in first
    assert second.startswith("Restored from ./tf_ckpts/ckpt-5")
    assert "Saved checkpoint for step 60: ./tf_ckpts/ckpt-6" in second
    assert "step 100: ./tf_ckpts/ckpt-10" in second
    assert sorted(os.listdir("tf_ckpts")) == sorted(["checkpoint"] + [f"ckpt-{i}.{s}" for i in (8, 9, 10)
                                                                       for s in ("data.safetensors", "index")])
