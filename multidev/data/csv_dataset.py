"""``md.data.experimental.make_csv_dataset``: batches of CSV columns, as tf.data's (load_data/csv tutorial).

Each batch is an ordered dict ``{column: values}`` (the label column popped into ``(features, label)``
when ``label_name`` is given). Column types come from ``column_defaults`` or are inferred from the first
``num_rows_for_inference`` rows as TF infers them: int32 (int64 past int32's range), float32, else
strings (numpy ``str_`` arrays, which ``StringLookup`` takes; TF gives bytes). The files are read into
memory when the dataset is made; rows are shuffled with a buffer of ``shuffle_buffer_size`` and the
dataset repeats ``num_epochs`` times (None: forever, dropping the last partial batch, as TF does).

Example:
    titanic = md.data.experimental.make_csv_dataset("titanic.csv", batch_size=5, label_name="survived",
                                                    num_epochs=1, ignore_errors=True)
"""

from __future__ import annotations

import collections
import csv
import glob
import gzip
import io
import os
import zlib

import numpy as np

_INT32 = np.iinfo(np.int32)


def _read_text(path, compression_type, encoding):
    with open(path, "rb") as f:
        raw = f.read()
    if compression_type == "GZIP":
        raw = gzip.decompress(raw)
    elif compression_type == "ZLIB":
        raw = zlib.decompress(raw)
    elif compression_type not in (None, ""):
        raise ValueError(f"compression_type must be None, '', 'GZIP' or 'ZLIB'. Received: {compression_type!r}")
    return raw.decode(encoding)


def _files(file_pattern):
    patterns = [file_pattern] if isinstance(file_pattern, (str, os.PathLike)) else list(file_pattern)
    files = sorted({p for pattern in patterns for p in glob.glob(os.fspath(pattern))})
    if not files:
        raise ValueError(f"make_csv_dataset: no files match file_pattern={file_pattern!r}.")
    return files


def _kind(value):
    """'int', 'float' or 'str': the narrowest type TF's inference gives one field."""
    try:
        int(value)
        return "int"
    except ValueError:
        pass
    try:
        float(value)
        return "float"
    except ValueError:
        return "str"


def _infer_dtype(values, na_value):
    kinds = {_kind(v) for v in values if v != na_value}
    if "str" in kinds:
        return "str"
    if "float" in kinds:
        return "float32"
    if not kinds:
        return "float32"
    return "int32" if all(_INT32.min <= int(v) <= _INT32.max for v in values if v != na_value) else "int64"


def _default_dtype(default):
    if isinstance(default, str) or default is str:
        return "str"
    if isinstance(default, (bool, int, np.integer)) or default is int:
        return "int32"
    if isinstance(default, (float, np.floating)) or default is float:
        return "float32"
    name = getattr(default, "name", str(default)).replace("torch.", "")
    if name in ("string", "str"):
        return "str"
    if name in ("int32", "int64", "float32", "float64"):
        return name
    raise ValueError(f"make_csv_dataset: column default {default!r} is not a number, a string or a dtype "
                     "(int32, int64, float32, float64, string).")


def _parse(value, dtype, default, na_value):
    if value == na_value:
        if default is None or isinstance(default, type) or hasattr(default, "is_floating_point"):
            return "" if dtype == "str" else 0
        return default
    if dtype == "str":
        return value
    return int(value) if dtype.startswith("int") else float(value)


def _selected(names, select_columns):
    if select_columns is None:
        return list(range(len(names)))
    out = []
    for col in select_columns:
        if isinstance(col, (int, np.integer)):
            if not 0 <= col < len(names):
                raise ValueError(f"make_csv_dataset: select_columns index {col} is outside [0, {len(names)}).")
            out.append(int(col))
        elif col in names:
            out.append(names.index(col))
        else:
            raise ValueError(f"make_csv_dataset: select_columns names {col!r}, not a column: {names}")
    return sorted(set(out))


def _rows(files, header, delimiter, quote, compression_type, encoding):
    """(header row or None, data rows) of all files in order."""
    first, rows = None, []
    for path in files:
        reader = list(csv.reader(io.StringIO(_read_text(path, compression_type, encoding)), delimiter=delimiter,
                                 quoting=csv.QUOTE_MINIMAL if quote else csv.QUOTE_NONE))
        if header and reader:
            first = first or reader[0]
            reader = reader[1:]
        rows += [(path, r) for r in reader if r]
    return first, rows


def _columns(rows, keep, names, dtypes, defaults, na_value, ignore_errors):
    columns = [[] for _ in keep]
    for path, row in rows:
        try:
            if len(row) != len(names):
                raise ValueError(f"expected {len(names)} fields, found {len(row)}")
            parsed = [_parse(row[i], dtype, default, na_value) for i, dtype, default in zip(keep, dtypes, defaults)]
        except ValueError as e:
            if ignore_errors:
                continue
            raise ValueError(f"make_csv_dataset: a row of {path} cannot be read ({e}): {row}; pass "
                             "ignore_errors=True to skip such rows, or column_defaults to set the types.") from None
        for column, value in zip(columns, parsed):
            column.append(value)
    return [np.asarray(c, dtype=str if d == "str" else d) for c, d in zip(columns, dtypes)]


def make_csv_dataset(file_pattern, batch_size, column_names=None, column_defaults=None, label_name=None,
                     select_columns=None, field_delim=",", use_quote_delim=True, na_value="", header=True,
                     num_epochs=None, shuffle=True, shuffle_buffer_size=10000, shuffle_seed=None,
                     prefetch_buffer_size=None, num_parallel_reads=None, sloppy=False, num_rows_for_inference=100,
                     compression_type=None, ignore_errors=False, encoding="utf-8"):
    """An ``md.data.Dataset`` of batched CSV columns (see the module docstring).

    Raises:
        ValueError: no matching files, no column names, an unknown ``label_name`` or ``select_columns``,
            ``column_defaults`` of the wrong length, or an unreadable row without ``ignore_errors``.
    """
    from multidev.data.dataset import Dataset

    first, rows = _rows(_files(file_pattern), header, field_delim, use_quote_delim, compression_type, encoding)
    names = list(column_names) if column_names is not None else first
    if names is None:
        raise ValueError("make_csv_dataset: pass column_names when the files have no header (header=False).")
    keep = _selected(names, select_columns)
    if column_defaults is not None:
        if len(column_defaults) != len(keep):
            raise ValueError(f"make_csv_dataset: {len(column_defaults)} column_defaults for {len(keep)} "
                             f"columns {[names[i] for i in keep]}.")
        defaults, dtypes = list(column_defaults), [_default_dtype(d) for d in column_defaults]
    else:
        sample = rows[:num_rows_for_inference]
        dtypes = [_infer_dtype([r[i] for _, r in sample if len(r) == len(names)], na_value) for i in keep]
        defaults = [None] * len(keep)
    kept = [names[i] for i in keep]
    if label_name is not None and label_name not in kept:
        raise ValueError(f"make_csv_dataset: label_name {label_name!r} is not one of the columns {kept}.")
    columns = _columns(rows, keep, names, dtypes, defaults, na_value, ignore_errors)
    dataset = Dataset.from_tensor_slices(collections.OrderedDict(zip(kept, columns)))
    if shuffle:
        dataset = dataset.shuffle(shuffle_buffer_size, seed=shuffle_seed)
    if num_epochs != 1:
        dataset = dataset.repeat(num_epochs)
    dataset = dataset.batch(batch_size, drop_remainder=num_epochs is None)
    if label_name is not None:
        dataset = dataset.map(lambda row: (collections.OrderedDict((k, v) for k, v in row.items() if k != label_name),
                                           row[label_name]))
    return dataset.prefetch(prefetch_buffer_size or -1)
