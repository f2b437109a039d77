"""What a loaded SavedModel accepts, checked as TensorFlow checks it: the ``tags`` of ``load`` and
each signature's inputs (a tensor of another shape or kind is TF's TypeError, never a silent cast)."""

from __future__ import annotations

from typing import Any

import torch

from multidev.data.spec import TensorSpec

SERVE = "serve"   # the one MetaGraph tag md.saved_model.save writes (TF's tag_constants.SERVING)


def check_tags(tags: Any, export_dir: str) -> None:
    """``tags`` must name the one MetaGraph a SavedModel has: None, 'serve' or ['serve'] (TF's ValueError)."""
    if tags is None:
        return
    given = [tags] if isinstance(tags, str) else list(tags) if isinstance(tags, (list, tuple, set, frozenset)) else None
    if given is None or set(given) != {SERVE}:
        raise ValueError(f"Got an incompatible argument to `tags`: {tags!r}. The SavedModel at {export_dir!r} has one "
                         f"MetaGraph with tags [{SERVE!r}]. You may omit the argument, pass None, or pass matching tags.")


def _kind(dtype: torch.dtype) -> str:
    return "bool" if dtype == torch.bool else "float" if dtype.is_floating_point or dtype.is_complex else "int"


def _spec_text(spec: TensorSpec) -> str:
    return f"TensorSpec(shape={tuple(spec.shape)}, dtype={str(spec.dtype).replace('torch.', '')})"


def bound_input(signature: str, value: Any, spec: TensorSpec) -> torch.Tensor:
    """``value`` as a tensor of ``spec``'s dtype, if its shape fits ``spec`` (None dimensions match any
    size) and, for a tensor, its kind (bool, integer, floating) is the spec's; else TF's TypeError.

    Python and numpy values are converted to the spec's dtype, as TensorFlow converts them."""
    tensor = value if isinstance(value, torch.Tensor) else torch.as_tensor(value)
    wanted = tuple(spec.shape)
    fits = len(wanted) == tensor.dim() and all(w is None or w == d for w, d in zip(wanted, tensor.shape))
    same_kind = not isinstance(value, torch.Tensor) or _kind(value.dtype) == _kind(spec.dtype)
    if not (fits and same_kind):
        got = f"shape={tuple(tensor.shape)}, dtype={str(tensor.dtype).replace('torch.', '')}"
        raise TypeError(f"Binding inputs to the loaded function {signature!r} failed: can not cast TensorSpec({got}) "
                        f"to {_spec_text(spec)} for input {spec.name!r}. Received: {value!r}. Pass a value of the "
                        "signature's shape (None dimensions take any size) and dtype.")
    return tensor.to(spec.dtype) if tensor.dtype != spec.dtype else tensor
