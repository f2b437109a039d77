"""TensorFlow's names for the values of a checkpoint, computed from its object graph.

TensorFlow names a value by its object's path and an attribute suffix:
``net/l1/kernel/.ATTRIBUTES/VARIABLE_VALUE``, ``save_counter/.ATTRIBUTES/VARIABLE_VALUE``,
``iterator/.ATTRIBUTES/ITERATOR_STATE``, an optimizer slot under its variable
``net/l1/kernel/.OPTIMIZER_SLOT/optimizer/m/.ATTRIBUTES/VARIABLE_VALUE``. multidev stores values
under its own keys (``net:l1.kernel``); this module maps the names a TensorFlow program types
(the checkpoint guide's ``key = 'net/l1/kernel/.ATTRIBUTES/VARIABLE_VALUE'``) to those keys, so
``md.train.load_variable`` and ``CheckpointReader`` accept either.

The names are tf.keras 2's (md.keras's layers name their weights ``kernel``/``bias``, its
optimizers ``iter`` and ``m``/``v``/``momentum``); Keras 3 on TensorFlow 2.21 names the same
kernel ``net/l1/_kernel/...`` and the optimizer's slots by position (``optimizer/_variables/2``).

Example:
    >>> tf_names(graph["objects"])["net/l1/kernel/.ATTRIBUTES/VARIABLE_VALUE"]
    'net:l1.kernel'
"""

from __future__ import annotations

from multidev.train import trackables as T

VALUE = "/.ATTRIBUTES/VARIABLE_VALUE"
ITERATOR_STATE = "/.ATTRIBUTES/ITERATOR_STATE"
#: md.keras slot names -> tf.keras 2's (Adam's ``m``/``v``); others keep their name (``momentum``).
_SLOT_NAMES = {"momentum": ("momentum", "m"), "velocity": ("velocity", "v")}


def _join(*parts: str) -> str:
    return "/".join(p for p in parts if p)


def _suffixed(path: str, suffix: str) -> str:
    return path + suffix if path else suffix[1:]


def tf_names(objects: dict) -> dict[str, str]:
    """``{TensorFlow name: storage key}`` for the values of a checkpoint's object graph."""
    names: dict[str, str] = {}
    var_names: dict[str, str] = {}      # storage key -> the variable's TF path (for slots)
    for path, saved in objects.items():
        kind, local = saved.get("kind"), saved.get("tensors", {})
        if kind == T.VARIABLE:
            var_names.setdefault(local["value"], path)
        elif kind in (T.MODULE, T.TENSORS):
            for name, key in local.items():
                var_names.setdefault(key, _join(path, name.replace(".", "/")))
        elif kind == T.ITERATOR:
            names[_suffixed(path, ITERATOR_STATE)] = local["position"]
    for key, path in var_names.items():
        names[_suffixed(path, VALUE)] = key
    for path, saved in objects.items():
        if saved.get("kind") == T.KERAS_OPTIMIZER:
            _optimizer_names(path, saved["tensors"], var_names, names)
        elif saved.get("kind") == T.TORCH_OPTIMIZER:
            _torch_optimizer_names(path, saved["tensors"], var_names, names)
    return names


def _optimizer_names(path: str, local: dict, var_names: dict, names: dict) -> None:
    """``optimizer/iter``, ``optimizer/learning_rate`` and each slot under its variable."""
    for name, key in local.items():
        if "/" not in name:
            for alias in (("iter", "iterations", "_iterations") if name == "iterations" else (name, "_" + name)):
                names.setdefault(_join(path, alias) + VALUE, key)
            continue
        var_key, slot = name.rsplit("/", 1)
        if var_key in var_names:
            for alias in _SLOT_NAMES.get(slot, (slot,)):
                names.setdefault(f"{var_names[var_key]}/.OPTIMIZER_SLOT/{path}/{alias}{VALUE}", key)


def _torch_optimizer_names(path: str, local: dict, var_names: dict, names: dict) -> None:
    """A torch.optim state entry (``state/<variable key>/exp_avg``) under its variable."""
    for name, key in local.items():
        var_key, slot = name[len("state/"):].rsplit("/", 1)
        if var_key in var_names:
            names.setdefault(f"{var_names[var_key]}/.OPTIMIZER_SLOT/{path}/{slot}{VALUE}", key)
