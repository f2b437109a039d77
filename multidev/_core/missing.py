"""The AttributeError for a TensorFlow name multidev does not provide: it says which torch function
to call instead, where torch has one under the same name."""

from __future__ import annotations

import importlib

#: Where torch keeps the functions that TensorFlow has at top level or in tf.math / tf.nn / tf.linalg.
_TORCH_HOMES = ("torch", "torch.special", "torch.linalg", "torch.nn.functional")


def torch_equivalent(name: str) -> str | None:
    """``"torch.einsum"`` for ``"einsum"``: the first torch namespace holding a callable of that name."""
    for home in _TORCH_HOMES:
        module = importlib.import_module(home)
        if callable(getattr(module, name, None)):
            return f"{home}.{name}"
    return None


def missing_attribute(module: str, name: str, tf_name: str) -> AttributeError:
    """The error for ``module.name``: what multidev covers and, where torch has it, what to call."""
    if name.startswith("__"):
        return AttributeError(f"module {module!r} has no attribute {name!r}")
    torch_name = torch_equivalent(name)
    hint = (f"Tensors are torch tensors: call {torch_name} (or the tensor method) instead."
            if torch_name else "multidev implements TensorFlow's multi-device system and the tensor ops its "
            "distributed-training docs use; for other ops use torch's equivalent.")
    return AttributeError(f"module {module!r} has no attribute {name!r} (TensorFlow's {tf_name} is not part of "
                          f"multidev). {hint}")
