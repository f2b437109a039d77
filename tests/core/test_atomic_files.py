"""multidev._core.atomic_files: the old or the new version, never neither; leftovers of dead writers go."""

import os
import subprocess
import sys

import pytest

from multidev._core import atomic_files as af


def dead_pid():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_atomic_write_replaces_and_accepts_chunks(tmp_path):
    path = tmp_path / "f"
    af.atomic_write(path, b"old")
    af.atomic_write(path, iter([b"n", b"ew"]))
    assert path.read_bytes() == b"new" and os.listdir(tmp_path) == ["f"]


def test_a_failed_write_keeps_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "f"
    af.atomic_write(path, b"old")

    def chunks():
        yield b"half"
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        af.atomic_write(path, chunks())
    assert path.read_bytes() == b"old" and os.listdir(tmp_path) == ["f"]


def test_a_failed_swap_puts_the_old_directory_back(tmp_path, monkeypatch):
    path = tmp_path / "d"
    with af.atomic_directory(path) as tmp:
        (open(os.path.join(tmp, "x"), "w")).write("old")
    real_rename = os.rename

    def fail_moving_in(src, dst):
        if ".tmp-" in os.fspath(src):
            raise OSError("injected")
        return real_rename(src, dst)

    monkeypatch.setattr(os, "rename", fail_moving_in)
    with pytest.raises(OSError, match="injected"):
        with af.atomic_directory(path) as tmp:
            open(os.path.join(tmp, "x"), "w").write("new")
    assert (path / "x").read_text() == "old" and os.listdir(tmp_path) == ["d"]


def test_recover_directory_after_a_kill_between_the_renames(tmp_path):
    path = tmp_path / "d"
    path.mkdir()
    (path / "x").write_text("old")
    os.rename(path, af.temp_name(path, "old"))
    assert af.clean_stale(path) == []          # the set-aside copy is all there is: kept
    assert af.recover_directory(path) and (path / "x").read_text() == "old"
    assert not af.recover_directory(path)


def test_clean_stale_removes_only_dead_writers_leftovers(tmp_path):
    (tmp_path / "t").write_text("target")
    host = af._HOST
    dead = dead_pid()
    names = {
        f"t.tmp-{host}-{dead}-0123abcd": True,          # dead writer on this host
        f"t.old-{host}-{dead}-0123abcd": True,          # set aside by a dead writer, target exists
        f"u.del-{host}-{dead}-0123abcd": True,          # another target in the same directory
        f"t.tmp-{host}-{os.getpid()}-0123abcd": False,  # a live writer (this process)
        f"t.tmp-{host}-1-0123abcd": False,              # pid 1 is alive
        "t.tmp-otherhost-5-0123abcd": False,            # another host's, recent
        f"t.tmp-{host}-{dead}-xyz": False,              # not our pattern
        f".tmp-{host}-{dead}-0123abcd": False,          # no target name
    }
    for name in names:
        (tmp_path / name).mkdir() if "old" in name else (tmp_path / name).write_text("")
    os.utime(tmp_path / "t.tmp-otherhost-5-0123abcd", (1, 1))
    names["t.tmp-otherhost-5-0123abcd"] = True          # ... unless older than STALE_SECONDS
    removed = {os.path.basename(p) for p in af.clean_stale(tmp_path / "t")}
    assert removed == {n for n, stale in names.items() if stale}


def test_new_files_and_directories_follow_the_umask(tmp_path):
    previous = os.umask(0o027)
    try:
        af.atomic_write(tmp_path / "f", b"x")
        with af.atomic_directory(tmp_path / "d"):
            pass
    finally:
        os.umask(previous)
    assert os.stat(tmp_path / "f").st_mode & 0o777 == 0o640
    assert os.stat(tmp_path / "d").st_mode & 0o777 == 0o750


def test_remove_tree_renames_before_deleting(tmp_path, monkeypatch):
    path = tmp_path / "d"
    path.mkdir()
    (path / "x").write_text("1")
    seen = []
    monkeypatch.setattr(af, "_remove", lambda full: seen.append(os.listdir(tmp_path)))
    af.remove_tree(path)
    assert len(seen) == 1 and seen[0][0].startswith("d.del-")   # "d" was gone before deleting began


def test_disk_full_names_the_file_and_keeps_the_old_one(tmp_path):
    import errno

    path = tmp_path / "weights.safetensors"
    af.atomic_write(path, b"old")

    def full_disk():
        yield b"new"
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))   # what write() raises: no file name

    with pytest.raises(OSError) as info:
        af.atomic_write(path, full_disk())
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(path)
    assert repr(str(path)) in str(info.value) and "No space left on device" in str(info.value)
    assert path.read_bytes() == b"old" and os.listdir(tmp_path) == ["weights.safetensors"]
