"""``Dataset.from_generator``: elements from a Python generator, checked against a signature."""

from __future__ import annotations

from typing import Any, Callable

import torch

from multidev._core.errors import InvalidArgumentError
from multidev.data import cardinality as _card
from multidev.data import structure
from multidev.data.dataset import Dataset, peeking
from multidev.data.spec import TensorSpec, shapes_compatible


class GeneratorDataset(Dataset):
    """Calls ``generator(*args)`` at each iteration and converts/checks what it yields.

    ``output_signature`` (TensorSpecs) or ``output_types`` (+ ``output_shapes``) fix the
    element structure; without them (TF requires one) the first element's structure and
    dtypes are taken, with unknown dimensions, and later elements must match them.
    """

    def __init__(self, generator: Callable, output_types: Any = None, output_shapes: Any = None,
                 args: Any = None, output_signature: Any = None):
        if not callable(generator):
            raise TypeError(f"`generator` must be callable, got {generator!r}.")
        if output_signature is not None and (output_types is not None or output_shapes is not None):
            raise TypeError("from_generator: pass either output_signature or output_types/output_shapes, not both.")
        if output_shapes is not None and output_types is None:
            raise TypeError("from_generator: output_shapes requires output_types.")
        self._generator = generator
        self._args = tuple(args) if args is not None else ()
        self._signature = _signature(output_signature, output_types, output_shapes)

    def _iterate(self):
        signature = self._signature
        for i, value in enumerate(self._generator(*self._args)):
            if signature is None:
                signature = _inferred_signature(value)
            yield _conform(value, signature, i)

    def _cardinality(self) -> int:
        return _card.UNKNOWN_CARDINALITY

    def _compute_element_spec(self) -> Any:
        if self._signature is not None:
            return self._signature
        with peeking():
            for value in self._generator(*self._args):
                return _inferred_signature(value)
        raise ValueError("Cannot infer from_generator's element_spec: the generator yielded nothing; pass output_signature.")


def _signature(output_signature: Any, output_types: Any, output_shapes: Any) -> Any:
    if output_signature is not None:
        for leaf in structure.flatten(output_signature):
            if not isinstance(leaf, TensorSpec):
                raise TypeError(
                    f"from_generator: output_signature must be a (nested) structure of md.data.TensorSpec, "
                    f"got {leaf!r}."
                )
        return output_signature
    if output_types is None:
        return None
    if output_shapes is None:
        return structure.map_structure(lambda t: TensorSpec(None, t), output_types)
    return _pair_types_shapes(output_types, output_shapes)


def _pair_types_shapes(types: Any, shapes: Any) -> Any:
    """Specs from a types structure and a shapes structure whose leaves are dim sequences."""
    if isinstance(types, dict):
        return {k: _pair_types_shapes(types[k], shapes[k]) for k in types}
    if isinstance(types, tuple):
        if not isinstance(shapes, (tuple, list)) or len(shapes) != len(types):
            raise ValueError(f"from_generator: output_shapes {shapes!r} does not match output_types {types!r}.")
        return tuple(_pair_types_shapes(t, s) for t, s in zip(types, shapes))
    return TensorSpec(shapes, types)


def _inferred_signature(value: Any) -> Any:
    """Structure and dtypes of the first element, every dimension left unknown."""
    element = structure.to_element(_as_structure(value, value), "generator output")

    def spec(component: Any) -> TensorSpec:
        known = TensorSpec.from_value(component)
        return TensorSpec((None,) * len(known.shape), known.dtype)

    return structure.map_structure(spec, element)


class GeneratorStructureError(InvalidArgumentError, TypeError):
    """A generator's element whose structure is not the signature's: TF 2.21 raises InvalidArgumentError
    (the TypeError inside its py_func, converted); a TypeError too, as multidev raised before."""


def _conform(value: Any, signature: Any, index: int) -> Any:
    if not structure.same_structure(_as_structure(value, signature), signature):
        raise GeneratorStructureError(
            f"`generator` yielded an element that did not match the expected structure. The expected "
            f"structure was {signature}, but element {index} was {value!r}."
        )
    return structure.map_structure(
        lambda v, spec: _conform_component(v, spec, index), _as_structure(value, signature), signature
    )


def _as_structure(value: Any, signature: Any) -> Any:
    """Generators may yield lists where the signature has tuples (TF accepts that too)."""
    if isinstance(signature, tuple) and isinstance(value, list) and len(value) == len(signature):
        return tuple(value)
    return value


def _conform_component(value: Any, spec: TensorSpec, index: int) -> Any:
    try:
        if spec.dtype is str or isinstance(value, torch.Tensor):
            component = structure.to_component(value, f"element {index}")
        else:
            component = torch.as_tensor(structure.to_component(value, f"element {index}"), dtype=spec.dtype) \
                if _castable(value, spec.dtype) else structure.to_component(value, f"element {index}")
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"`generator` yielded an element that could not be converted to the expected type {spec.dtype}: "
            f"element {index} was {value!r}."
        ) from exc
    actual = TensorSpec.from_value(component)
    if actual.dtype != spec.dtype:
        raise TypeError(
            f"`generator` yielded an element of type {actual.dtype} where an element of type {spec.dtype} "
            f"was expected (element {index}: {value!r})."
        )
    if not shapes_compatible(actual.shape, spec.shape):
        raise InvalidArgumentError(
            f"`generator` yielded an element of shape {actual.shape} where an element of shape "
            f"{spec.shape} was expected (element {index})."
        )
    return component


def _castable(value: Any, dtype: Any) -> bool:
    """Python/numpy numbers convert to the signature's dtype unless that loses meaning (float->int)."""
    converted = structure.to_component(value, "value")
    if not isinstance(converted, torch.Tensor):
        return False
    if converted.dtype.is_floating_point and not (dtype.is_floating_point or dtype.is_complex):
        return False
    if converted.dtype == torch.bool and dtype != torch.bool:
        return False
    return True
