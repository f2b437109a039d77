"""``md.saved_model.load``: the exported signatures as callables, without the class that built them."""

from __future__ import annotations

import json
import os
from typing import Any

import torch

from multidev._core import checked_safetensors
from multidev.data.spec import TensorSpec
from multidev.saved_model import serde
from multidev.saved_model.export import FORMAT, VERSION, example_input
from multidev.saved_model.load_inputs import bound_input, check_tags
from multidev.saved_model.options import LoadOptions
from multidev.saved_model.options import check as check_options


class ConcreteFunction:
    """One signature: call with its inputs (positionally or by name); returns ``{output_name: tensor}``."""

    def __init__(self, name: str, module: torch.nn.Module, inputs: list[dict], outputs: list[str]):
        self.name = name
        self._module = module
        self._by_device: dict[torch.device, torch.nn.Module] = {torch.device("cpu"): module}
        self.input_names = [i["name"] for i in inputs]
        self.structured_input_signature = tuple(TensorSpec(tuple(i["shape"]), getattr(torch, i["dtype"]), i["name"])
                                                for i in inputs)
        self.output_names = list(outputs)

    def _on(self, device: torch.device) -> torch.nn.Module:
        if device not in self._by_device:        # e.g. each GPU replica: its own copy of the weights
            import copy
            self._by_device[device] = copy.deepcopy(self._module).to(device)
        return self._by_device[device]

    def _arguments(self, args, kwargs) -> list:
        if len(args) > len(self.input_names):
            raise TypeError(f"Signature {self.name!r} takes {len(self.input_names)} input(s) {self.input_names}; "
                            f"received {len(args)} positional arguments.")
        values = list(args) + [None] * (len(self.input_names) - len(args))
        for key, value in kwargs.items():
            if key not in self.input_names:
                raise TypeError(f"Signature {self.name!r} got an unexpected keyword argument {key!r}. Valid: "
                                f"{self.input_names}.")
            values[self.input_names.index(key)] = value
        missing = [n for n, v in zip(self.input_names, values) if v is None]
        if missing:
            raise TypeError(f"Signature {self.name!r} is missing input(s) {missing}.")
        return [bound_input(self.name, v, spec) for v, spec in zip(values, self.structured_input_signature)]

    def __call__(self, *args, **kwargs) -> dict[str, torch.Tensor]:
        values = self._arguments(args, kwargs)
        outputs = self._on(values[0].device)(*values) if values else self._module()
        return dict(zip(self.output_names, outputs))


class Loaded:
    """What ``load`` returns: ``signatures[name]`` and, with a default signature, ``obj(x)`` -> its outputs."""

    def __init__(self, signatures: dict[str, ConcreteFunction], default: str | None,
                 call_functions: tuple = ()):
        self.signatures = signatures
        self._default = default
        self._call_functions = tuple(call_functions)

    def __call__(self, *args, **kwargs):
        if self._default is None and self._call_functions:
            return _call_matching(self._call_functions, args, kwargs)
        if self._default is None:
            raise TypeError(f"This SavedModel has no 'serving_default' signature to call; use .signatures "
                            f"{sorted(self.signatures)}.")
        outputs = self.signatures[self._default](*args, **kwargs)
        values = list(outputs.values())
        return values[0] if len(values) == 1 else values


def load(export_dir, tags=None, options=None) -> Any:
    """Load what ``md.saved_model.save`` wrote: an object with ``.signatures`` (and callable).

    Example:
        loaded = md.saved_model.load("/tmp/export")
        predictions = loaded.signatures["serving_default"](x)
    """
    check_options(options, LoadOptions, "md.saved_model.load")
    export_dir = os.fspath(export_dir)
    check_tags(tags, export_dir)
    meta_path = os.path.join(export_dir, "saved_model.json")
    if not os.path.isfile(meta_path):
        keras = os.path.isfile(os.path.join(export_dir, "config.json")) or export_dir.endswith(".keras")
        hint = (" It holds a Keras model written by model.save(): load it with md.keras.models.load_model, or "
                "write a SavedModel with model.export(path) or md.saved_model.save(model, path) (tf.keras 2's "
                "model.save(dir) wrote one; Keras 3's does not)." if keras and os.path.exists(export_dir)
                else " Write one with md.saved_model.save(obj, export_dir).")
        raise OSError(f"SavedModel file does not exist at: {export_dir!r} (no saved_model.json)." + hint)
    with open(meta_path) as f:
        meta = json.load(f)
    if not isinstance(meta, dict) or meta.get("format") != FORMAT or meta.get("version") != VERSION:
        raise ValueError(f"{meta_path!r} is not a multidev SavedModel of version {VERSION} (format "
                         f"{meta.get('format') if isinstance(meta, dict) else meta!r}).")
    signatures, calls = {}, {}
    for name, spec in [*meta["signatures"].items(), *meta.get("call_functions", {}).items()]:
        if not name.isidentifier():
            raise ValueError(f"{meta_path!r} names a signature {name!r}, which is not an identifier.")
        with open(os.path.join(export_dir, "programs", f"{name}.json"), "rb") as f:
            program_json = f.read()
        weights = os.path.join(export_dir, "variables", f"{name}.safetensors")
        with open(weights, "rb") as f:
            tensors, _ = checked_safetensors.loads(f.read(), weights)
        example = tuple(example_input(i["shape"], getattr(torch, i["dtype"])) for i in spec["inputs"])
        program = serde.from_json_and_tensors(program_json, tensors, example)
        function = ConcreteFunction(name, program.module(), spec["inputs"], spec["outputs"])
        (signatures if name in meta["signatures"] else calls)[name] = function
    loaded = Loaded(signatures, meta.get("default"), calls.values())
    for name in meta.get("endpoints", []):       # model.export's `serve`: called for its output, not a dict
        setattr(loaded, name, _Endpoint(signatures[name]))
    return loaded


def _call_matching(functions: tuple, args: tuple, kwargs: dict):
    """Call the traced function whose input shapes and dtypes these arguments have, as a loaded
    TensorFlow object's ``__call__`` picks among its concrete functions."""
    values = [torch.as_tensor(a) for a in args]

    def fits(v: torch.Tensor, s: TensorSpec) -> bool:
        return tuple(v.shape) == tuple(s.shape) and (v.dtype == s.dtype or v.is_floating_point()
                                                     and s.dtype.is_floating_point)

    for function in functions:
        specs = function.structured_input_signature
        if not kwargs and len(values) == len(specs) and all(fits(v, s) for v, s in zip(values, specs)):
            outputs = list(function(*values).values())
            return outputs[0] if len(outputs) == 1 else outputs

    def text(t) -> str:
        return f"{tuple(t.shape)} {str(t.dtype).replace('torch.', '')}"
    expected = [[text(s) for s in f.structured_input_signature] for f in functions]
    raise ValueError(f"Could not find a matching function to call loaded from the SavedModel. Got: "
                     f"{[text(v) for v in values]}{' and keyword arguments' if kwargs else ''}. Expected one of: "
                     f"{expected} (the shapes the function was called with before md.saved_model.save; give it "
                     "an input_signature to accept others).")


class _Endpoint:
    """An exported endpoint (``loaded.serve(x)``): the signature's single output, or a list of them."""

    def __init__(self, function: ConcreteFunction):
        self._function = function

    def __call__(self, *args, **kwargs):
        values = list(self._function(*args, **kwargs).values())
        return values[0] if len(values) == 1 else values
