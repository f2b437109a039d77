"""Dataset.cache(filename): safetensors + JSON (no pickle), keyed by the pipeline, crash-safe, damage named."""

import collections
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import torch

import multidev as md
from multidev.data import cache_file

D = md.data.Dataset
CALLS = []


def double(x):
    CALLS.append(1)
    return x * 2


def files(tmp_path):
    return sorted(os.listdir(tmp_path))


def test_the_same_pipeline_replays_the_file_without_running_it(tmp_path):
    path = str(tmp_path / "c")
    CALLS.clear()
    assert [int(x) for x in D.range(4).map(double).cache(path)] == [0, 2, 4, 6]
    assert len(CALLS) == 4 and files(tmp_path) == ["c.mdcache.safetensors"]
    fresh = D.range(4).map(double).cache(path)           # a new dataset object, e.g. the next run
    assert [int(x) for x in fresh] == [0, 2, 4, 6] and len(CALLS) == 4


def test_another_pipeline_never_replays_a_stale_cache(tmp_path):
    path = str(tmp_path / "c")
    assert [int(x) for x in D.range(3).cache(path)] == [0, 1, 2]
    for other, want in ((D.range(5), [0, 1, 2, 3, 4]), (D.range(3).map(lambda x: x + 1), [1, 2, 3]),
                        (D.from_tensor_slices(torch.tensor([7, 8, 9])), [7, 8, 9])):
        with pytest.warns(UserWarning, match="written by another input pipeline"):
            assert [int(x) for x in other.cache(path)] == want
    scale = 3   # a captured value is part of the key
    assert [int(x) for x in D.range(2).map(lambda x: x * scale).cache(str(tmp_path / "s"))] == [0, 3]
    scale = 4
    with pytest.warns(UserWarning, match="another input pipeline"):
        assert [int(x) for x in D.range(2).map(lambda x: x * scale).cache(str(tmp_path / "s"))] == [0, 4]


def test_structures_dtypes_and_strings_round_trip(tmp_path):
    Point = collections.namedtuple("Point", ["x", "label"])
    elements = [{"b": Point(torch.tensor([1.5, 2.0], dtype=torch.bfloat16), "one"), "a": torch.tensor(True)},
                {"b": Point(torch.tensor([3.0], dtype=torch.bfloat16), "two"), "a": torch.tensor(False)}]
    path = str(tmp_path / "c")
    cache_file.write(cache_file.cache_path(path), elements, "k")
    back, other = cache_file.read(cache_file.cache_path(path), "k")
    assert other is None and len(back) == 2
    for got, want in zip(back, elements):
        assert list(got) == ["b", "a"] and got["b"]._fields == ("x", "label") and got["b"].label == want["b"].label
        assert torch.equal(got["b"].x, want["b"].x) and got["b"].x.dtype == torch.bfloat16
        assert torch.equal(got["a"], want["a"])
    batches = [list(b) for b in D.from_tensor_slices(np.array([b"x\\xff", b"y", b"z"], dtype=object)).batch(2)]
    cache_file.write(cache_file.cache_path(path), [np.array(b, dtype=object) for b in batches], "s")
    strings, _ = cache_file.read(cache_file.cache_path(path), "s")
    assert [list(s) for s in strings] == batches


def test_cache_file_is_safetensors_with_json_structure(tmp_path):
    from safetensors import safe_open

    path = str(tmp_path / "c")
    list(D.range(3).map(lambda x: (x, {"s": "t"})).cache(path))
    with safe_open(cache_file.cache_path(path), "pt") as f:        # readable by any safetensors reader
        assert sorted(f.keys()) == ["leaf0", "leaf1"] and f.get_tensor("leaf0").tolist() == [0, 1, 2]
        assert '"structure": {"tuple": [null, {"dict": [["s", null]]}]}' in f.metadata()["multidev.cache"]


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage"])
def test_damaged_cache_is_named_with_the_fix(tmp_path, damage):
    path = str(tmp_path / "c")
    list(D.range(50).map(lambda x: x * 2).cache(path))
    file = cache_file.cache_path(path)
    data = bytearray(open(file, "rb").read())
    if damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "flip":
        data[-5] ^= 0x04
    else:
        data = bytearray(b"not a cache")
    open(file, "wb").write(bytes(data))
    with pytest.raises(md.errors.DataLossError, match=rf"{damage == 'flip' and 'Checksum mismatch' or ''}.*Delete "
                                                       rf"'{file}' to rebuild the cache"):
        list(D.range(50).map(lambda x: x * 2).cache(path))


KILLED_WRITER = textwrap.dedent("""
    import os, sys
    import multidev as md
    from multidev._core import atomic_files
    real_replace = os.replace
    def die(src, dst):          # killed after writing the temporary, before it replaces the cache
        os._exit(17)
    os.replace = die
    list(md.data.Dataset.range(1000).cache(sys.argv[1]))
""")


def test_a_writer_killed_mid_write_leaves_no_cache_and_its_temporary_is_cleaned(tmp_path):
    path = str(tmp_path / "c")
    env = dict(os.environ, PYTHONPATH=os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", KILLED_WRITER, path], env=env, capture_output=True, timeout=120)
    assert proc.returncode == 17, proc.stderr.decode()[-2000:]
    left = files(tmp_path)
    assert len(left) == 1 and left[0].startswith("c.mdcache.safetensors.tmp-"), left
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [int(x) for x in D.range(1000).cache(path)][-1] == 999    # rebuilt, no error
    assert files(tmp_path) == ["c.mdcache.safetensors"]                  # the dead writer's temporary is gone
