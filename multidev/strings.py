"""``md.strings``: the few ``tf.strings`` ops a TextVectorization ``standardize`` function calls.

TensorFlow's text tutorials pass ``TextVectorization(standardize=custom_standardization)`` a function of
``tf.strings.lower`` and ``tf.strings.regex_replace``. multidev's TextVectorization calls ``standardize``
on each text as a Python ``str`` (there are no string tensors in torch), so these ops take a ``str`` or
``bytes``, or a list / numpy array of them (element-wise), and return the same kind. The pattern is
Python's ``re`` syntax, which agrees with TensorFlow's RE2 on the patterns the tutorials write
(``'<br />'``, ``'[%s]' % re.escape(string.punctuation)``). Other ``tf.strings`` ops are refused,
naming what to write instead.
"""

from __future__ import annotations

import re

import numpy as np

__all__ = ["lower", "upper", "regex_replace", "strip", "join"]


def _each(fn, value):
    """``fn`` on a str or bytes (decoded and encoded back as UTF-8), or on each of a list or array's."""
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, bytes):
        return fn(value.decode("utf-8")).encode("utf-8")
    if isinstance(value, (list, tuple, np.ndarray)):
        array = np.asarray(value, dtype=object)
        out = np.empty(array.shape, dtype=object)
        for index in np.ndindex(array.shape):
            out[index] = _each(fn, array[index])
        return out if isinstance(value, np.ndarray) else out.tolist()
    raise TypeError(f"md.strings takes a str, bytes, or a list / numpy array of them; received "
                    f"{type(value).__name__}. multidev has no string tensors: TextVectorization hands a "
                    f"standardize function each text as a Python str.")


def lower(input, encoding="", name=None):  # noqa: A002  (TensorFlow's argument name)
    """``tf.strings.lower``."""
    return _each(str.lower, input)


def upper(input, encoding="", name=None):  # noqa: A002
    """``tf.strings.upper``."""
    return _each(str.upper, input)


def strip(input, name=None):  # noqa: A002
    """``tf.strings.strip``: leading and trailing whitespace removed."""
    return _each(str.strip, input)


def regex_replace(input, pattern, rewrite, replace_global=True, name=None):  # noqa: A002
    """``tf.strings.regex_replace``: every match (only the first when ``replace_global=False``) of
    ``pattern`` replaced by ``rewrite`` (``\\1`` names a group, as RE2's)."""
    compiled, rewrite = re.compile(pattern), _python_rewrite(rewrite)
    return _each(lambda text: compiled.sub(rewrite, text, count=0 if replace_global else 1), input)


def _python_rewrite(rewrite):
    """RE2's rewrite in Python's ``re.sub`` syntax: RE2's ``\\0`` is the whole match (the nmt tutorial's
    ``r' \\0 '`` spaces out punctuation), which Python would read as the character NUL."""
    return re.sub(r"\\\\|\\(\d)", lambda m: m.group(0) if m.group(1) is None else f"\\g<{m.group(1)}>", rewrite)


def join(inputs, separator="", name=None):
    """``tf.strings.join``: the strings of ``inputs`` joined element-wise with ``separator`` (a str joins
    to every element of a list or array beside it)."""
    if not isinstance(inputs, (list, tuple)):
        raise TypeError(f"tf.strings.join takes a list of strings (or of lists / arrays of them); received "
                        f"{type(inputs).__name__}.")
    if all(isinstance(x, (str, bytes)) for x in inputs):
        as_str = [x.decode("utf-8") if isinstance(x, bytes) else x for x in inputs]
        out = separator.join(as_str)
        return out.encode("utf-8") if all(isinstance(x, bytes) for x in inputs) else out
    arrays = np.broadcast_arrays(*[np.asarray(x, dtype=object) for x in inputs])
    out = np.empty(arrays[0].shape, dtype=object)
    for index in np.ndindex(out.shape):
        out[index] = join([a[index] for a in arrays], separator)
    return out if any(isinstance(x, np.ndarray) for x in inputs) else out.tolist()


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(f"module 'multidev.strings' has no attribute {name!r}")
    raise AttributeError(
        f"module 'multidev.strings' has no attribute {name!r}: multidev implements only {__all__} of "
        f"tf.strings (for a TextVectorization standardize function, which multidev calls with each text as a "
        f"Python str). Write tf.strings.{name} with Python's str methods or re on that str.")
