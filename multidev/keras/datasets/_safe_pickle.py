"""Reading the pickled parts of Keras's data-set files without letting them run code.

Keras's IMDB and Reuters ``.npz`` files store ragged sequences as object arrays and CIFAR's batches
are Python pickles; both can only be read by unpickling. multidev does that only when the caller
passes ``allow_pickle=True``, and even then through an unpickler that can build nothing but numpy
arrays, dtypes, lists, dicts, numbers and bytes: a file that names any other global is refused.
"""

from __future__ import annotations

import io
import pickle
import zipfile

import numpy as np

_NUMPY_GLOBALS = frozenset({
    ("numpy", "ndarray"), ("numpy", "dtype"),
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
})


class _NumpyOnlyUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) in _NUMPY_GLOBALS:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a data-set file: only numpy arrays are "
                                     "allowed (the file may be damaged or crafted)")


def consent_error(path: str, what: str, convert_hint: str) -> ValueError:
    """The refusal to unpickle without ``allow_pickle=True``; ``what`` says what is pickled."""
    return ValueError(f"{path!r} stores {what}. Reading them means unpickling data from the file. "
                      f"If you trust the file, pass allow_pickle=True (multidev then builds only numpy arrays from "
                      f"it); {convert_hint}")


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

