"""What a ``Checkpoint`` can track, and how each kind of object is found in the object graph.

Kinds: nested ``Checkpoint`` (children by attribute name; lists, dicts and tuples assigned to
one are wrapped (``containers``) and are of this kind, children by index or key), ``torch.nn.Module`` (md.keras models
and layers included: its ``state_dict``; a compiled model's optimizer is its child ``optimizer``), md.keras optimizers, ``torch.optim`` optimizers,
variables (``md.Variable``, distributed variables, any ``torch.nn.Parameter``), md.data /
distributed iterators and torch objects saved by their ``state_dict`` (LR schedulers, ``GradScaler``,
``torch.Generator``: ``torch_states``). ``walk`` lists the graph breadth-first from the root; an object reachable
twice is stored once, under the first path (later paths are aliases), as TensorFlow does.

Example:
    nodes = walk(md.train.Checkpoint(model=model, optimizer=opt))
    [n.path for n in nodes]          # ['', 'model', 'optimizer']
"""

from __future__ import annotations

import dataclasses

import torch

from multidev.data.iterator import Iterator
from multidev.keras.models.model import Model as KerasModel
from multidev.keras.optimizers.base import Optimizer as KerasOptimizer
from multidev.keras.saving.weights_io import variable_dict
from multidev.train import torch_states

CHECKPOINT, MODULE, KERAS_OPTIMIZER, TORCH_OPTIMIZER, VARIABLE, ITERATOR, TENSORS, TORCH_STATE = (
    "checkpoint", "module", "keras_optimizer", "torch_optimizer", "variable", "iterator", "tensors", torch_states.KIND)
ACCEPTED = ("md.train.Checkpoint, lists/dicts/tuples of trackables, torch.nn.Module (md.keras models and "
            "layers), md.keras optimizers, "
            "torch.optim optimizers and LR schedulers, torch.amp.GradScaler, torch.Generator, "
            "md.Variable / torch.nn.Parameter, md.data and distributed iterators, "
            "Keras 3 models, layers and optimizers")
_TENSOR_SOURCES: list = []  # (accepts(obj) -> bool, tensors(obj) -> {name: tensor}), registered by front ends


def register_tensor_source(accepts, tensors) -> None:
    """Let a front end's objects be checkpointed as named tensors (``integrations/keras3`` registers
    Keras 3 models and optimizers: their variables by position, which no auto-generated name changes)."""
    if (accepts, tensors) not in _TENSOR_SOURCES:
        _TENSOR_SOURCES.append((accepts, tensors))


def named_tensors(obj) -> dict[str, torch.Tensor]:
    """``{name: tensor}`` of an object of kind ``TENSORS``."""
    return next(tensors(obj) for accepts, tensors in _TENSOR_SOURCES if accepts(obj))


def kind_of(obj) -> str | None:
    """The trackable kind of ``obj``; None when a checkpoint cannot track it."""
    from multidev.train.checkpoint import Checkpoint
    from multidev.train.containers import DictWrapper, ListWrapper, TupleWrapper

    if isinstance(obj, (Checkpoint, ListWrapper, DictWrapper, TupleWrapper)):
        return CHECKPOINT
    if any(accepts(obj) for accepts, _ in _TENSOR_SOURCES):
        return TENSORS
    if isinstance(obj, torch.nn.Module):
        return MODULE
    if isinstance(obj, KerasOptimizer):
        return KERAS_OPTIMIZER
    if isinstance(obj, torch.optim.Optimizer):
        return TORCH_OPTIMIZER
    if torch_states.accepts(obj):
        return TORCH_STATE
    if isinstance(obj, torch.nn.Parameter):
        return VARIABLE
    if isinstance(obj, Iterator):
        return ITERATOR
    return None


def check_trackable(name: str, obj) -> str:
    """The kind of ``obj``; ValueError naming the attribute when it cannot be tracked (as TF)."""
    kind = kind_of(obj)
    if kind is None:
        hint = (" Wrap a plain tensor in md.Variable(...) to checkpoint it." if isinstance(obj, torch.Tensor)
                else "")
        raise ValueError(f"`Checkpoint` was expecting {name} to be a trackable object ({ACCEPTED}), got "
                         f"{obj!r} of type {type(obj).__name__}.{hint}")
    return kind


@dataclasses.dataclass
class Node:
    """One object of the graph: its path from the root ('' for the root, 'a/b' below)."""

    path: str
    obj: object
    kind: str
    alias_of: str | None = None      # set when the object was reached earlier under another path
    parent: object = None            # the Checkpoint holding it (None for the root)
    name: str = ""                   # its attribute name in the parent
    extra: dict = dataclasses.field(default_factory=dict)   # a Checkpoint(root=obj)'s attributes, on obj


def child_path(parent: str, name: str) -> str:
    return name if not parent else f"{parent}/{name}"


def walk(root, base_path: str = "") -> list[Node]:
    """Breadth-first list of the objects reachable from ``root`` (children in attribute order).

    ``Checkpoint(root=obj, **kwargs)`` is TensorFlow's: ``obj`` is the graph's root and the keyword
    arguments (and ``save_counter``) are attached to it as children.
    """
    nodes, first_path = [], {}
    extra = {}
    root_object = getattr(root, "_root_object", None) if kind_of(root) == CHECKPOINT else None
    if root_object is not None:
        root, extra = root_object, root._trackable_children()
    queue = [Node(base_path, root, kind_of(root), extra=extra)]
    while queue:
        node = queue.pop(0)
        if id(node.obj) in first_path:
            node.alias_of = first_path[id(node.obj)]
            nodes.append(node)
            continue
        first_path[id(node.obj)] = node.path
        nodes.append(node)
        for name, child in _children(node).items():
            queue.append(Node(child_path(node.path, name), child, kind_of(child), parent=node.obj, name=name))
    return nodes


def _children(node: Node) -> dict:
    """A Checkpoint's attributes; a compiled md.keras model's optimizer (Keras tracks it, as TF does);
    attributes a ``Checkpoint(root=...)`` attaches to its root."""
    if node.kind == CHECKPOINT:
        return dict(node.obj._trackable_children(), **node.extra)
    if isinstance(node.obj, KerasModel) and isinstance(node.obj.optimizer, KerasOptimizer):
        return dict({"optimizer": node.obj.optimizer}, **node.extra)
    return dict(node.extra)


def module_tensors(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """``{state_dict name: tensor}`` of a module's parameters and persistent buffers, shared ones once
    (the names ``model.save_weights`` uses)."""
    return {name: t for name, t in variable_dict(module).items() if isinstance(t, torch.Tensor)}


def storage_key(path: str, local: str) -> str:
    """The safetensors key of tensor ``local`` of the object at ``path`` (``model:layers.0.kernel``)."""
    return f"{path}:{local}"
