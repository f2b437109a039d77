"""``md.saved_model.save``: trace each signature with torch.export; write JSON programs + safetensors weights.

Layout of ``export_dir``::

    saved_model.json            format, signatures (inputs: name/shape/dtype; outputs: names)
    programs/<name>.json        torch.export's serialized program (JSON)
    variables/<name>.safetensors   the tensors the program reads (weights), by the program's names

The weights a signature reads are traced as constants of its program, so a program is complete
without the Python object. The directory is written beside the target and renamed into place.
"""

from __future__ import annotations

import contextlib
import json
import os

import torch
from multidev._core import checked_safetensors
from multidev._core import write_errors
from multidev._core.atomic_files import atomic_directory, atomic_write, atomic_write_text

from multidev.saved_model import serde
from multidev.saved_model.options import SaveOptions
from multidev.saved_model.options import check as check_options
from multidev.saved_model.signatures import (DEFAULT_SERVING_SIGNATURE_DEF_KEY, Signature, is_keras,
                                             keras_serving_signature, resolve)

FORMAT = "multidev.saved_model"
VERSION = 1


def _flat_outputs(outputs) -> tuple:
    if isinstance(outputs, dict):
        return tuple(outputs.values())
    return tuple(outputs) if isinstance(outputs, (list, tuple)) else (outputs,)


class _Traced(torch.nn.Module):
    """The signature as a module for torch.export; the object is held outside torch's registration so
    its weights are captured as the program's constants (read by the program, saved with it). (A Keras
    model cannot be registered: its ``layers`` property shadows the submodule torch.export would look up.)"""

    def __init__(self, signature: Signature):
        super().__init__()
        self._signature = [signature]
        if signature.module is not None and not is_keras(signature.module):
            self.owner = signature.module   # e.g. an md.Module: its md.Variables become the program's parameters

    def forward(self, *inputs):
        return _flat_outputs(self._signature[0].fn(*inputs))


def example_input(shape, dtype) -> torch.Tensor:
    """Zeros of ``shape`` with 3 for unknown sizes (0 and 1 would be specialised by the trace)."""
    return torch.zeros([3 if d is None else d for d in shape], dtype=dtype)


def _trace(signature: Signature):
    auto = torch.export.Dim.AUTO
    example = tuple(example_input(s.shape, s.dtype) for s in signature.inputs)
    dynamic = tuple({i: auto for i, d in enumerate(s.shape) if d is None} or None for s in signature.inputs)
    with torch.no_grad():
        names = signature.output_names(signature.fn(*example))
        with _plain_parameters(signature.module):
            program = torch.export.export(_Traced(signature), example, dynamic_shapes=(dynamic,))  # forward(*inputs)
    return program, names


@contextlib.contextmanager
def _plain_parameters(owner):
    """While tracing, the owner's md.Variables (Parameter subclasses torch.export rejects) as plain Parameters
    sharing their storage; the owner's own objects are put back afterwards."""
    swapped = []
    try:
        for module in ([] if owner is None else owner.modules()):
            for name, p in list(module._parameters.items()):
                if p is not None and type(p) is not torch.nn.Parameter:
                    module._parameters[name] = torch.nn.Parameter(p.detach().as_subclass(torch.Tensor),
                                                                  requires_grad=p.requires_grad)
                    swapped.append((module, name, p))
        yield
    finally:
        for module, name, p in swapped:
            module._parameters[name] = p


def save(obj, export_dir, signatures=None, options=None, extra_files=None):
    """Export ``obj``'s signatures (a Keras model's inference call, or ``md.function``s with an
    ``input_signature``) to ``export_dir``, loadable by ``md.saved_model.load`` without ``obj``'s class.
    ``extra_files`` ({name: bytes}) are written into the same directory in the same atomic swap (a Keras
    model's own config and weights, which tf.keras 2's SavedModel carries for ``load_model``).

    Example:
        md.saved_model.save(model, "/tmp/export")
    """
    check_options(options, SaveOptions, "md.saved_model.save")
    _write(os.fspath(export_dir), resolve(obj, signatures), extra_files=extra_files or {})


def export_keras(model, export_dir, input_signature=None) -> None:
    """Keras 3's ``model.export(path)``: the inference call as the endpoint ``serve`` (``loaded.serve(x)``)
    and as the signature ``serving_default``, as TensorFlow 2.21 exports it."""
    signature = keras_serving_signature(model, input_signature)
    _write(os.fspath(export_dir), {"serve": signature, DEFAULT_SERVING_SIGNATURE_DEF_KEY: signature},
           endpoints=["serve"])


def _write(export_dir: str, resolved: dict, endpoints=(), extra_files=None) -> None:
    meta = {"format": FORMAT, "version": VERSION, "signatures": {},
            "default": DEFAULT_SERVING_SIGNATURE_DEF_KEY if DEFAULT_SERVING_SIGNATURE_DEF_KEY in resolved else None,
            "endpoints": list(endpoints), "call_functions": {}}
    by_id: dict = {}                      # a signature exported under two names is traced once
    traced = {}                           # (all before touching the disk)
    for name, signature in resolved.items():
        if id(signature) not in by_id:
            by_id[id(signature)] = _trace(signature)
        traced[name] = by_id[id(signature)]
    with write_errors.writing(export_dir, "write the SavedModel", "Pass a directory path whose parents are "
                              "directories this process may write; nothing was written."), \
            atomic_directory(export_dir) as staging:
        os.makedirs(os.path.join(staging, "programs"))
        os.makedirs(os.path.join(staging, "variables"))
        for name, (program, output_names) in traced.items():
            program_json, tensors = serde.to_json_and_tensors(program)
            atomic_write(os.path.join(staging, "programs", f"{name}.json"), program_json, fsync=False)
            atomic_write(os.path.join(staging, "variables", f"{name}.safetensors"), checked_safetensors.dumps(tensors),
                         fsync=False)
            signature = resolved[name]
            meta["call_functions" if signature.traced_call else "signatures"][name] = {
                "inputs": [{"name": n, "shape": list(s.shape), "dtype": str(s.dtype).replace("torch.", "")}
                           for n, s in zip(signature.input_names, signature.inputs)],
                "outputs": output_names}
        for name, data in (extra_files or {}).items():
            atomic_write(os.path.join(staging, name), data, fsync=False)
        atomic_write_text(os.path.join(staging, "saved_model.json"), json.dumps(meta, indent=1), fsync=False)


