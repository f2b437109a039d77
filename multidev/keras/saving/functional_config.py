"""Rebuild a functional graph from ``Functional.get_config()``: create layers, replay their calls."""

from __future__ import annotations

from multidev.keras.saving.serialization import deserialize_layer


def _is_key(x) -> bool:
    return isinstance(x, list) and len(x) == 3 and isinstance(x[0], str) and isinstance(x[1], int)


def _map_keys(fn, structure):
    if _is_key(structure):
        return fn(structure)
    if isinstance(structure, list):
        return [_map_keys(fn, s) for s in structure]
    if isinstance(structure, dict):
        return {k: _map_keys(fn, v) for k, v in structure.items()}
    return structure


def _keys(structure) -> list:
    if _is_key(structure):
        return [structure]
    if isinstance(structure, list):
        return [k for s in structure for k in _keys(s)]
    if isinstance(structure, dict):
        return [k for v in structure.values() for k in _keys(v)]
    return []


def _kwarg_keys(kwargs, tag) -> list:
    """The keys of the graph's tensors among a call's keyword arguments (``{tag: key}`` entries)."""
    if isinstance(kwargs, dict):
        if set(kwargs) == {tag}:
            return [kwargs[tag]]
        return [k for v in kwargs.values() for k in _kwarg_keys(v, tag)]
    if isinstance(kwargs, list):
        return [k for v in kwargs for k in _kwarg_keys(v, tag)]
    return []


def _map_kwargs(fn, kwargs, tag):
    if isinstance(kwargs, dict):
        if set(kwargs) == {tag}:
            return fn(kwargs[tag])
        return {k: _map_kwargs(fn, v, tag) for k, v in kwargs.items()}
    if isinstance(kwargs, list):
        return [_map_kwargs(fn, v, tag) for v in kwargs]
    return kwargs


def rebuild(config: dict, custom_objects=None):
    """Return ``(inputs, outputs)`` KerasTensor structures for ``config``."""
    from multidev.keras.layers.input_layer import InputLayer
    from multidev.keras.models.functional import KWARG_TENSOR
    layers, tensors, pending = {}, {}, []
    for entry in config["layers"]:
        layer = deserialize_layer(entry, custom_objects)
        layers[entry["name"]] = layer
        if isinstance(layer, InputLayer):
            tensors[(entry["name"], 0, 0)] = layer.output
        pending += [(entry["name"], node) for node in entry.get("inbound_nodes", [])]
    while pending:
        progressed = False
        for item in list(pending):
            name, node = item
            kwargs = node.get("kwargs", {})
            needed = [tuple(k) for k in _keys(node["args"]) + _kwarg_keys(kwargs, KWARG_TENSOR)]
            if all(k in tensors for k in needed):
                args = _map_keys(lambda k: tensors[tuple(k)], node["args"])
                out = layers[name](args, **_map_kwargs(lambda k: tensors[tuple(k)], kwargs, KWARG_TENSOR))
                index = len([k for k in tensors if k[0] == name and k[2] == 0])
                flat = out if isinstance(out, (list, tuple)) else [out]
                for i, kt in enumerate(flat):
                    tensors[(name, index, i)] = kt
                pending.remove(item)
                progressed = True
        if not progressed:
            raise ValueError(f"Corrupt model config: cannot connect layer calls {[n for n, _ in pending]}; "
                             "their inputs are never produced.")
    def lookup(k):
        if tuple(k) not in tensors:
            raise ValueError(f"Corrupt model config: tensor {k} is not produced by any layer.")
        return tensors[tuple(k)]
    return _map_keys(lookup, config["input_layers"]), _map_keys(lookup, config["output_layers"])
