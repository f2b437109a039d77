"""Symbolic tensors of the functional API: a shape, a dtype and the layer call that made them.

``layers.Input(shape=(8,))`` returns a KerasTensor; calling a layer on KerasTensors builds the layer,
infers its output shape by running it on small zero tensors, and records a ``Node`` in the graph.
"""

from __future__ import annotations

import math
import re
import threading

import torch

from multidev.devices import registry
from multidev.keras.layers import layer_state
from multidev.values import context
from multidev.keras.layers.tensor_operators import TensorOperators

_DUMMY_BATCH = 2
_DUMMY_SIZES = (24, 25)   # two sizes for unknown non-batch dims, to tell which output dims are unknown
# Smaller sizes, tried in turn when a layer refuses 24 (a position Embedding(input_dim=sequence_length) over
# ops.arange(length): TensorFlow infers such a layer symbolically, Keras 3 on torch on the meta device,
# where no index is checked; multidev runs real zeros, so it tries a length the layer accepts).
_FALLBACK_SIZES = ((8, 9), (4, 5), (2, 3), (1, 2))


class KerasTensor(TensorOperators):
    """Placeholder for a batch of values: ``shape`` has ``None`` for the batch (and unknown) dims."""

    def __init__(self, shape, dtype=torch.float32, history=None, name=None):
        self.shape = tuple(shape)
        self.dtype = dtype
        self._keras_history = history   # (layer, node_index, tensor_index)
        self.name = name

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self):
        layer = self._keras_history[0].name if self._keras_history else None
        return f"<KerasTensor: shape={self.shape} dtype={str(self.dtype).replace('torch.', '')} (created by layer '{layer}')>"

    def __iter__(self):
        raise TypeError("Iterating over a symbolic KerasTensor is not supported; call a layer on it instead.")


class Node:
    """One call of a layer in a functional graph: its input and output KerasTensors."""

    def __init__(self, layer, inputs, outputs, kwargs):
        self.layer = layer
        self.inputs = inputs            # structure (tensor, list, dict) of KerasTensors
        self.outputs = outputs          # list of KerasTensors
        self.kwargs = kwargs

    @property
    def input_tensors(self) -> list:
        """The KerasTensors this call reads: its inputs, then those of keyword arguments (``initial_state=``)."""
        return flatten(self.inputs) + [t for t in flatten(list(self.kwargs.values())) if isinstance(t, KerasTensor)]


def flatten(structure) -> list:
    """Flatten nested lists/tuples/dicts into a list of leaves (dicts in key order)."""
    if isinstance(structure, (list, tuple)):
        return [leaf for item in structure for leaf in flatten(item)]
    if isinstance(structure, dict):
        return [leaf for key in sorted(structure) for leaf in flatten(structure[key])]
    return [structure]


def map_structure(fn, structure):
    """Apply ``fn`` to every leaf, keeping lists/tuples/dicts."""
    if isinstance(structure, (list, tuple)):
        return type(structure)(map_structure(fn, s) for s in structure)
    if isinstance(structure, dict):
        return {k: map_structure(fn, v) for k, v in structure.items()}
    return fn(structure)


def is_symbolic(structure) -> bool:
    """Whether any leaf is a KerasTensor."""
    return any(isinstance(leaf, KerasTensor) for leaf in flatten(structure))


def _dummy(kt: KerasTensor, size: int, device) -> torch.Tensor:
    """Zeros shaped like ``kt``; an all-true mask if the layer that made it gave a mask (a masked layer
    that needs ``mask`` in ``call``, as the masking guide's TemporalSoftmax, sees one symbolically too)."""
    batch = getattr(_INFERRING, "batch", None) or _DUMMY_BATCH
    shape = [batch if i == 0 else (size if d is None else d) for i, d in enumerate(kt.shape)]
    out = torch.zeros(shape, dtype=kt.dtype, device=device)
    mask_rank = getattr(kt, "_mask_rank", None)
    if mask_rank is not None:
        out._keras_mask = torch.ones(shape[:mask_rank], dtype=torch.bool, device=device)
    return out


def _layer_device(layer):
    """Where the layer computes: its weights' device; for an unbuilt layer in a strategy's scope, where the weights
    its build makes will be read (GPU:0 of a MirroredStrategy on GPUs: a CPU dummy met a CUDA kernel there)."""
    for p in layer.parameters():
        return p.device
    strategy = context.current_scope_strategy()
    if strategy is None:
        return None
    extended = strategy.extended
    central = extended.parameter_devices
    if len(central) == 1 and central != extended.worker_devices:   # one copy (CentralStorageStrategy): read there
        try:
            return registry.resolve(central[0]).torch_device
        except (ValueError, RuntimeError, LookupError):   # another task's device (a parameter server)
            pass
    return extended.torch_devices[0] if extended.torch_devices else None


_INFERRING = threading.local()


def inferring() -> bool:
    """Whether this thread is running a layer on zeros to infer shapes (no state may change then)."""
    return getattr(_INFERRING, "depth", 0) > 0


def _run_dummy(layer, inputs, kwargs, size):
    _INFERRING.depth = getattr(_INFERRING, "depth", 0) + 1
    try:
        return _run_dummy_inner(layer, inputs, kwargs, size)
    finally:
        _INFERRING.depth -= 1


def _run_dummy_inner(layer, inputs, kwargs, size):
    device = _layer_device(layer)
    concrete = map_structure(lambda t: _dummy(t, size, device) if isinstance(t, KerasTensor) else t, inputs)
    kwargs = map_structure(lambda t: _dummy(t, size, device) if isinstance(t, KerasTensor) else t, kwargs)
    with torch.no_grad(), layer_state.untouched_by_inference(layer):
        return layer(concrete, **{**kwargs, "training": False} if layer._call_accepts_training() else kwargs)


def _has_unknown_dims(inputs) -> bool:
    return any(None in kt.shape[1:] for kt in flatten(inputs) if isinstance(kt, KerasTensor))


def _run_sizes(layer, inputs, kwargs, sizes):
    """The layer's outputs on zeros of the two unknown-dim ``sizes`` (one run when every dim is known)."""
    out_a = _run_dummy(layer, inputs, kwargs, sizes[0])
    return out_a, (_run_dummy(layer, inputs, kwargs, sizes[1]) if _has_unknown_dims(inputs) else out_a)


def _run_dummies(layer, inputs, kwargs):
    """``_run_sizes`` at the first sizes the layer accepts; a layer that refuses them all raises its first error
    (a user's bug independent of the length then reads as it always did)."""
    try:
        return _run_sizes(layer, inputs, kwargs, _DUMMY_SIZES)
    except (ValueError, IndexError, RuntimeError) as first:
        batch = _batch_of_reshape(first)
        if batch is not None:
            return _run_at_batch(layer, inputs, kwargs, batch, first)
        if not _has_unknown_dims(inputs):
            raise
        for sizes in _FALLBACK_SIZES:
            try:
                return _run_sizes(layer, inputs, kwargs, sizes)
            except (ValueError, IndexError, RuntimeError):
                continue
        raise first


_RESHAPE_ERROR = re.compile(r"shape '\[([-0-9, ]*)\]' is invalid for input of size (\d+)")


def _batch_of_reshape(error) -> int | None:
    """The batch size a refused reshape asks for: keras.io's switch transformer reshapes its tokens to
    ``[batch_size * tokens, dim]``, a constant; TensorFlow infers it with an unknown batch, multidev runs zeros
    of ``_DUMMY_BATCH`` examples, so it runs them again at the batch that constant names (None: another error)."""
    match = _RESHAPE_ERROR.search(str(error)) if isinstance(error, RuntimeError) else None
    if match is None or "-1" in match.group(1) or getattr(_INFERRING, "batch", None) is not None:
        return None
    wanted, per_example = math.prod(int(d) for d in match.group(1).split(",")), int(match.group(2)) // _DUMMY_BATCH
    if not per_example or wanted % per_example or wanted // per_example == _DUMMY_BATCH:
        return None
    return wanted // per_example


def _run_at_batch(layer, inputs, kwargs, batch, first):
    """``_run_sizes`` on zeros of ``batch`` examples; the first error if the layer refuses those too."""
    _INFERRING.batch = batch
    try:
        return _run_sizes(layer, inputs, kwargs, _DUMMY_SIZES)
    except (ValueError, IndexError, RuntimeError):
        raise first from None
    finally:
        _INFERRING.batch = None


def infer_output(layer, inputs, kwargs):
    """Run ``layer`` on zeros shaped like ``inputs``; return the output structure of KerasTensors."""
    out_a, out_b = _run_dummies(layer, inputs, kwargs)

    def to_kt(a, b):
        shape = tuple(None if i == 0 or a.shape[i] != b.shape[i] else a.shape[i] for i in range(a.ndim))
        out = KerasTensor(shape, a.dtype)
        mask = getattr(a, "_keras_mask", None)
        if isinstance(mask, torch.Tensor):
            out._mask_rank = mask.ndim
        return out

    if isinstance(out_a, (list, tuple)):
        return type(out_a)(to_kt(a, b) for a, b in zip(out_a, out_b))
    return to_kt(out_a, out_b)


def call_symbolic(layer, inputs, kwargs):
    """Call ``layer`` on KerasTensors: build it, infer output shapes, record the Node."""
    outputs = infer_output(layer, inputs, kwargs)
    flat_out = flatten(outputs)
    node_index = len(layer._inbound_nodes)
    for i, kt in enumerate(flat_out):
        kt._keras_history = (layer, node_index, i)
    layer._inbound_nodes.append(Node(layer, inputs, flat_out, kwargs))
    layer._record_output_shape(outputs)
    return outputs


def merged_shape(old, new):
    """``new`` with None where ``old`` (a shape, or a list of them) has another size."""
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [merged_shape(a, b) for a, b in zip(old, new)]
    if isinstance(old, tuple) and isinstance(new, tuple) and len(old) == len(new):
        return tuple(b if a == b else None for a, b in zip(old, new))
    return new
