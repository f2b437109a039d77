"""The one place that uses torch.export's serializer (private ``torch._export.serde``; checked with torch
2.13): programs as JSON, their tensors handed over as dicts, never through torch.save/torch.load."""

from __future__ import annotations

import torch

def _require():
    """torch.export's serializer, imported on first use (it takes a second to import)."""
    try:
        from torch._export.serde import serialize
    except ImportError as exc:  # pragma: no cover - depends on the installed torch
        raise RuntimeError(f"md.saved_model needs torch.export's serializer (torch._export.serde), which this torch "
                           f"{torch.__version__} lacks: {exc}. Use model.save()/md.train.Checkpoint instead.") from exc
    return serialize


def to_json_and_tensors(program) -> tuple[bytes, dict[str, torch.Tensor]]:
    """The program's JSON and every tensor it reads (parameters, buffers, constants), by its own names."""
    _serialize = _require()
    artifact = _serialize.serialize(program, serialize_state_dict=False, serialize_constants=False,
                                    serialize_example_inputs=False)
    tensors = {}
    parameters = set(program.graph_signature.parameters)
    state = {("param" if name in parameters else "buffer", name): v for name, v in program.state_dict.items()}
    constants = {("const", name): v for name, v in program.constants.items()}
    for (kind, name), value in {**state, **constants}.items():
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"Cannot export {name!r}: a {type(value).__name__} captured by the traced function "
                            "is not a tensor, and only tensors are saved (no pickle).")
        tensors[f"{kind}/{name}"] = value.detach().as_subclass(torch.Tensor).contiguous().clone()
    return artifact.exported_program, tensors


def from_json_and_tensors(program_json: bytes, tensors: dict[str, torch.Tensor], example_inputs: tuple):
    """The ExportedProgram back, with its tensors from ``tensors`` (as written by ``to_json_and_tensors``)."""
    _serialize = _require()
    state = {k.split("/", 1)[1]: torch.nn.Parameter(v, requires_grad=False) for k, v in tensors.items()
             if k.startswith("param/")}
    state.update({k.split("/", 1)[1]: v for k, v in tensors.items() if k.startswith("buffer/")})
    constants = {k.split("/", 1)[1]: v for k, v in tensors.items() if k.startswith("const/")}
    artifact = _serialize.SerializedArtifact(program_json, state, constants, (example_inputs, {}))
    return _serialize.deserialize(artifact)
