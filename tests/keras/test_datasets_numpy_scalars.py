"""Keras-layout ``.npz`` files whose sequences hold numpy integer scalars (``np.savez`` of lists of
``np.int64``), written by numpy 1.x and 2.x: read with ``allow_pickle=True``, and still nothing but
numpy data is built from them (issue 25, seed 002)."""

from __future__ import annotations

import io
import os
import pickle
import zipfile

import numpy as np
import pytest

from multidev.keras import datasets
from tests.conftest import ROOT

FIXTURES = os.path.join(ROOT, "tests", "seeds", "fixtures")


@pytest.mark.parametrize("numpy_major", [1, 2])
def test_files_of_numpy_1_and_2_with_integer_scalars_load_with_consent(numpy_major):
    path = os.path.join(FIXTURES, f"reuters_npscalars_numpy{numpy_major}.npz")
    with pytest.raises(ValueError, match="pickled object arrays.*allow_pickle=True"):
        datasets.reuters.load_data(path)
    (x_train, y_train), (x_test, y_test) = datasets.reuters.load_data(path, allow_pickle=True)
    assert (len(x_train), len(x_test)) == (48, 12) and y_train.max() == 45
    # Keras's processing: start char 1, ids shifted by 3, the largest id (30979 + 3) becomes the OOV id 2
    assert all(type(w) is int for x in x_train for w in x)
    assert max(max(x) for x in x_train) == 30981 and all(x[0] == 1 for x in x_train)
    raw = np.load(path, allow_pickle=True)["x"]           # numpy's own reader, for the reference values
    order = np.arange(60)
    np.random.RandomState(113).shuffle(order)
    first = [w + 3 for w in raw[order[0]]]
    assert x_train[0] == [1] + [2 if w == 30982 else int(w) for w in first]


def _npz_with_object_array(tmp_path, payload: bytes):
    """An npz whose ``x.npy`` is an object array header followed by ``payload`` (a pickle stream)."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "|O", "fortran_order": False, "shape": (1,)})
    path = tmp_path / "crafted.npz"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("x.npy", header.getvalue() + payload)
        buf = io.BytesIO()
        np.save(buf, np.zeros(1, dtype=np.int64))
        archive.writestr("y.npy", buf.getvalue())
    return str(path)


def _pickle_calling(module, name, *args) -> bytes:
    """protocol-3 pickle bytes of ``[module.name(*args)]``, written by hand (no object is imported)."""
    inner = pickle.dumps(args, protocol=3)[2:-1]    # the args tuple's opcodes, without PROTO and STOP
    return (b"\x80\x03]q\x00c" + f"{module}\n{name}\n".encode() + inner + b"R" + b"a.")


@pytest.mark.parametrize("module,name,args", [
    ("os", "system", ("echo pwned",)),
    ("builtins", "eval", ("1 + 1",)),
    ("numpy", "load", ("/etc/passwd",)),
    ("numpy.core.multiarray", "_vec_string", ()),
])
def test_other_callables_are_still_refused(tmp_path, module, name, args):
    path = _npz_with_object_array(tmp_path, _pickle_calling(module, name, *args))
    with pytest.raises(pickle.UnpicklingError, match=f"refusing to load {module}.{name}"):
        datasets.reuters.load_data(path, allow_pickle=True)


@pytest.mark.parametrize("dtype", [np.dtype(object), np.dtype([("a", "O")]), np.dtype([("a", "<i8")]),
                                   np.dtype("U3")])
def test_scalars_of_non_numeric_dtypes_are_refused(tmp_path, dtype):
    """``scalar(dtype, bytes)`` lets the file say what raw bytes mean: only plain numbers may."""
    payload = (b"\x80\x03]q\x00cnumpy._core.multiarray\nscalar\n" + pickle.dumps(dtype, protocol=3)[2:-1]
               + pickle.dumps(b"\x00" * max(dtype.itemsize, 1), protocol=3)[2:-1] + b"\x86Ra.")
    path = _npz_with_object_array(tmp_path, payload)
    with pytest.raises(pickle.UnpicklingError, match="refusing to build a numpy scalar of dtype"):
        datasets.reuters.load_data(path, allow_pickle=True)
