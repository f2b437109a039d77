"""Reading the pickled parts of Keras's data-set files without letting them run code.

Keras's IMDB and Reuters ``.npz`` files store ragged sequences as object arrays and CIFAR's batches
are Python pickles; both can only be read by unpickling. multidev does that only when the caller
passes ``allow_pickle=True``, and even then through an unpickler that can build nothing but numpy
arrays, dtypes, numeric numpy scalars (``np.savez`` of lists of ``np.int64`` pickles each as
``numpy[._]core.multiarray.scalar``), lists, dicts, numbers and bytes: a file that names any other
global is refused, and so is a scalar of any but a plain numeric dtype (object and structured
scalars would let the file choose what the raw bytes mean). Files written by numpy 1.x
(``numpy.core``) and 2.x (``numpy._core``) name the same functions; both are read, without
importing numpy 2's deprecated ``numpy.core`` alias.
"""

from __future__ import annotations

import io
import pickle
import zipfile

import numpy as np

try:
    from numpy._core import multiarray as _multiarray     # numpy >= 2
except ImportError:  # pragma: no cover - numpy 1.x
    from numpy.core import multiarray as _multiarray

_NUMERIC_KINDS = "biufc"     # bool, signed and unsigned integers, floats, complex


def _numeric_scalar(dtype, *args):
    """numpy's ``scalar(dtype, bytes)`` for plain numeric dtypes only."""
    if (not isinstance(dtype, np.dtype) or dtype.kind not in _NUMERIC_KINDS or dtype.hasobject
            or dtype.fields is not None or dtype.subdtype is not None):
        raise pickle.UnpicklingError(f"refusing to build a numpy scalar of dtype {dtype!r} from a data-set file: only "
                                     "numeric scalars are allowed (the file may be damaged or crafted)")
    return _multiarray.scalar(dtype, *args)


_GLOBALS = {
    ("numpy", "ndarray"): np.ndarray, ("numpy", "dtype"): np.dtype,
    ("numpy.core.multiarray", "_reconstruct"): _multiarray._reconstruct,
    ("numpy._core.multiarray", "_reconstruct"): _multiarray._reconstruct,
    ("numpy.core.multiarray", "scalar"): _numeric_scalar,
    ("numpy._core.multiarray", "scalar"): _numeric_scalar,
}


class _NumpyOnlyUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        found = _GLOBALS.get((module, name))
        if found is not None:
            return found
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a data-set file: only numpy arrays, "
                                     "dtypes and numeric scalars are allowed (the file may be damaged or crafted)")


def consent_error(path: str, what: str, convert_hint: str) -> ValueError:
    """The refusal to unpickle without ``allow_pickle=True``; ``what`` says what is pickled."""
    return ValueError(f"{path!r} stores {what}. Reading them means unpickling data from the file. "
                      f"If you trust the file, pass allow_pickle=True (multidev then builds only numpy arrays, "
                      f"dtypes and numeric scalars from it); {convert_hint}")


def load_pickle(path: str):
    """A pickle file whose only globals are numpy's array reconstruction (CIFAR's batches)."""
    with open(path, "rb") as f:
        return _NumpyOnlyUnpickler(f, encoding="bytes").load()


def load_npz(path: str) -> dict[str, np.ndarray]:
    """Every array of an ``.npz``; object arrays through the numpy-only unpickler."""
    out = {}
    with zipfile.ZipFile(path) as archive:
        for member in archive.namelist():
            data = io.BytesIO(archive.read(member))
            name = member[:-4] if member.endswith(".npy") else member
            try:
                out[name] = np.lib.format.read_array(data, allow_pickle=False)
            except ValueError:  # an object array: its payload after the header is a pickle stream
                data.seek(0)
                major, _ = np.lib.format.read_magic(data)
                header = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
                header(data)
                out[name] = _NumpyOnlyUnpickler(data).load()
    return out

