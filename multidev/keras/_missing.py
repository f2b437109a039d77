"""Unknown names under ``md.keras``: an AttributeError that says where the name lives instead.

A Keras 3 program run on md.keras meets names md.keras lacks (``md.keras.layers.RandomZoom``,
``md.keras.ops.fft``). Python's bare "module has no attribute" leaves the user guessing; this error
says whether Keras 3 has the name (then: run the program with ``import keras`` on multidev, model
built in ``strategy.scope()``) and lists md.keras's close names.

Example (at the end of a namespace module):
    __getattr__ = missing_names(__name__, "layers", globals())
"""

from __future__ import annotations

import difflib
import sys

from multidev.keras._keras3_names import KERAS_VERSION, NAMES


def missing_name_error(module: str, namespace: str, name: str, present) -> AttributeError:
    """The AttributeError for ``<module>.<name>`` (``namespace``: the Keras 3 namespace, '' for ``keras``)."""
    keras_path = ".".join(p for p in ("keras", namespace, name) if p)
    close = difflib.get_close_matches(name, [n for n in present if not n.startswith("_")], n=3, cutoff=0.75)
    hint = f" md.keras has the close name(s) {close!r}." if close else ""
    if name in NAMES.get(namespace, ()):
        where = (f"Keras 3 has `{keras_path}`: run this program with Keras 3 on multidev (KERAS_BACKEND=torch, "
                 "`import keras`, and build the model in `strategy.scope()`), or rewrite it without this name.")
    else:
        where = f"Keras 3 ({KERAS_VERSION}) has no `{keras_path}` either."
    return AttributeError(f"module {module!r} has no attribute {name!r}. {where}{hint}")


def missing_names(module: str, namespace: str, module_globals: dict):
    """A module ``__getattr__`` raising :func:`missing_name_error` for names the module lacks."""

    def __getattr__(name: str):
        if name.startswith("__"):  # dunder probes (pickle, doctest, IPython) get the plain error
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        raise missing_name_error(module, namespace, name, module_globals)

    return __getattr__


def flat_namespace_names(module: str, namespace: str, module_globals: dict, flat_module: str):
    """A ``__getattr__`` for a Keras sub-namespace (``keras.ops.numpy``) whose ops md.keras defines in other
    files: a name Keras 3 lists under ``namespace`` resolves to the same function of the flat namespace
    (``ops.numpy.sqrt is ops.sqrt``), resolved at first use because the flat package imports this module."""
    missing = missing_names(module, namespace, module_globals)

    def __getattr__(name: str):
        if not name.startswith("__") and name in NAMES.get(namespace, ()):
            flat = sys.modules.get(flat_module)
            value = vars(flat).get(name) if flat is not None else None
            if value is not None:
                return value
        return missing(name)

    return __getattr__
