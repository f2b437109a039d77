"""Saving survives kills at every step (the old or the new model loads), damage is detected by the
checksum, a dead writer's temporaries are cleaned by the next save, files follow the umask."""

import os

import numpy as np
import pytest
import torch

import multidev as md
from multidev.keras import layers, models
from tests.keras._kill_points import killed_at



def make_model(seed):
    torch.manual_seed(seed)
    model = models.Sequential([layers.Dense(8, activation="relu", input_shape=(4,)), layers.Dense(2)])
    model.compile("adam", "mse")
    model.fit(np.ones((8, 4), "float32"), np.zeros((8, 2), "float32"), epochs=1, verbose=0)
    return model


def weights(model):
    return [w.copy() for w in model.get_weights()]


def same(a, b):
    return all(np.array_equal(x, y) for x, y in zip(a, b))


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", ["m", "m.keras"])
def test_model_save_killed_at_every_step_leaves_a_loadable_model(tmp_path, name):
    path = str(tmp_path / name)
    old, new = make_model(1), make_model(2)
    old_w, new_w = weights(old), weights(new)
    assert not same(old_w, new_w)
    old.save(path)
    kills = 0
    for point in range(1, 200):
        if not killed_at(point, lambda: new.save(path)):
            break
        kills += 1
        loaded = weights(md.keras.models.load_model(path))   # finishes an interrupted swap if needed
        assert same(loaded, old_w) or same(loaded, new_w), f"kill at step {point}: neither model"
        old.save(path)                                         # and the next save cleans up after the dead one
        assert os.listdir(tmp_path) == [name], f"kill at step {point} left {os.listdir(tmp_path)}"
    assert kills >= (8 if name == "m" else 3), kills
    assert same(weights(md.keras.models.load_model(path)), new_w)   # the uninterrupted save


@pytest.mark.timeout(300)
def test_save_weights_killed_at_every_step(tmp_path):
    path = str(tmp_path / "w.safetensors")
    old, new = make_model(1), make_model(2)
    old_w, new_w = weights(old), weights(new)
    old.save_weights(path)
    for point in range(1, 50):
        if not killed_at(point, lambda: new.save_weights(path)):
            break
        probe = make_model(3)
        probe.load_weights(path)
        assert same(weights(probe), old_w) or same(weights(probe), new_w)
    else:
        pytest.fail("save_weights never finished")
    assert point > 3


def test_a_killed_writers_temporary_is_deleted_by_the_next_save(tmp_path):
    path = str(tmp_path / "w.safetensors")
    model = make_model(1)
    model.save_weights(path)
    real_replace = os.replace
    assert killed_at(3, lambda: model.save_weights(path))   # write, fsync, then dies at replace
    assert os.replace is real_replace
    left = sorted(os.listdir(tmp_path))
    assert len(left) == 2 and left[1].startswith("w.safetensors.tmp-"), left
    other_host = tmp_path / "w.safetensors.tmp-otherhost-1-0123abcd"    # another host's: too recent to judge
    other_host.write_bytes(b"x")
    model.save_weights(path)
    assert sorted(os.listdir(tmp_path)) == ["w.safetensors", other_host.name]


def test_model_directory_set_aside_by_a_killed_save_is_recovered(tmp_path):
    from multidev._core import atomic_files

    path = str(tmp_path / "m")
    model = make_model(1)
    model.save(path)
    os.rename(path, atomic_files.temp_name(path, "old"))   # the state after "rename old aside"
    assert same(weights(md.keras.models.load_model(path)), weights(model))
    assert os.listdir(tmp_path) == ["m"]


def flip(path, index, bit):
    data = bytearray(open(path, "rb").read())
    data[index] ^= 1 << bit
    open(path, "wb").write(bytes(data))


def test_every_single_bit_flip_is_detected_or_harmless(tmp_path):
    path = str(tmp_path / "w.safetensors")
    model = make_model(1)
    model.save_weights(path)
    good = open(path, "rb").read()
    rng = np.random.RandomState(0)
    detected = 0
    for index in rng.randint(0, len(good), 200):
        open(path, "wb").write(good)
        flip(path, int(index), int(rng.randint(8)))
        probe = make_model(3)
        before = weights(probe)
        try:
            probe.load_weights(path)
        except ValueError as err:     # DataLossError, or a header damage that reads as a mismatch
            detected += 1
            assert same(weights(probe), before), err
            continue
        assert same(weights(probe), weights(model)), f"flip at byte {index} loaded silently changed weights"
    assert detected >= 190


def test_bit_flip_in_tensor_data_names_the_file_and_the_opt_out(tmp_path):
    path = str(tmp_path / "w.safetensors")
    model = make_model(1)
    model.save_weights(path)
    flip(path, os.path.getsize(path) - 3, 6)
    probe = make_model(3)
    with pytest.raises(md.errors.DataLossError, match=r"Checksum mismatch in '.*w\.safetensors'.*verify_checksum"):
        probe.load_weights(path)
    probe.load_weights(path, verify_checksum=False)    # opt-out: loads the damaged data
    assert not same(weights(probe), weights(model)) and not same(weights(probe), weights(make_model(3)))


def test_bit_flip_in_a_saved_model_directory(tmp_path):
    path = str(tmp_path / "m")
    make_model(1).save(path)
    flip(os.path.join(path, "model.weights.safetensors"), -2, 0)
    with pytest.raises(md.errors.DataLossError, match="Checksum mismatch"):
        md.keras.models.load_model(path)
    md.keras.models.load_model(path, verify_checksum=False)


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_files_and_directories_follow_the_umask(tmp_path, umask):
    previous = os.umask(umask)
    try:
        model = make_model(1)
        model.save_weights(str(tmp_path / "w.safetensors"))
        model.save(str(tmp_path / "m"))
        model.save(str(tmp_path / "m.keras"))
    finally:
        os.umask(previous)
    for name, full in (("w.safetensors", 0o666), ("m.keras", 0o666), ("m", 0o777),
                       ("m/config.json", 0o666), ("m/model.weights.safetensors", 0o666)):
        mode = os.stat(tmp_path / name).st_mode & 0o777
        assert mode == full & ~umask, f"{name}: {oct(mode)}"


def test_temporaries_left_by_earlier_versions_and_other_targets_are_cleaned(tmp_path):
    legacy_old, legacy_new = tmp_path / ".tmp_abcd1234.safetensors", tmp_path / ".tmp_zzzz9999.safetensors"
    legacy_old.write_bytes(b"x" * 100)
    legacy_new.write_bytes(b"x")
    os.utime(legacy_old, (0, 0))                          # a day-old leftover of a killed save
    model = make_model(1)
    assert killed_at(3, lambda: model.save_weights(str(tmp_path / "epoch1.safetensors")))
    model.save_weights(str(tmp_path / "epoch2.safetensors"))   # another file in the same directory
    assert sorted(os.listdir(tmp_path)) == [legacy_new.name, "epoch2.safetensors"]   # epoch1 never completed


def test_model_checkpoint_killed_while_saving_keeps_the_last_good_file(tmp_path):
    from multidev.keras import callbacks

    path = str(tmp_path / "best.safetensors")
    x, y = np.ones((8, 4), "float32"), np.zeros((8, 2), "float32")
    model = make_model(1)
    model.fit(x, y, epochs=1, verbose=0, callbacks=[callbacks.ModelCheckpoint(path, save_weights_only=True)])
    first = weights(model)

    def second_epoch():
        model.fit(x, y, epochs=1, verbose=0, callbacks=[callbacks.ModelCheckpoint(path, save_weights_only=True)])

    assert killed_at(3, second_epoch)      # dies before replacing best.safetensors
    probe = make_model(3)
    probe.load_weights(path)
    assert same(weights(probe), first)
    model.fit(x, y, epochs=1, verbose=0, callbacks=[callbacks.ModelCheckpoint(path, save_weights_only=True)])
    assert os.listdir(tmp_path) == ["best.safetensors"]
