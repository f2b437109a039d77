"""Results a TensorFlow program reads with ``.numpy()`` while they still carry gradients.

torch records every op on a tensor that requires grad, and its ``numpy()`` refuses such a tensor
("Can't call numpy() on Tensor that requires grad"). TensorFlow records only under a
``GradientTape`` and reads any eager tensor: its first tutorial does ``model(x_train[:1]).numpy()``
and its guides print ``loss.numpy()`` and ``f"{loss:1.5f}"``. So what multidev hands a TF program at
the top level (a Keras layer's or model's outermost call, a Keras loss, ``md.reduce_mean`` and the
other ``md.*`` ops) is an ``EagerTensor`` when it requires grad: the same tensor, still in the
autograd graph (``loss.backward()`` and ``tape.gradient`` work), whose ``numpy``, ``item``,
``float()`` and ``format`` read a detached snapshot, as TensorFlow's do.

torch functions on it give plain tensors (torch function dispatch is off, as for ``nn.Parameter``), so
the torch ops of a model's loss and of the layers inside it cost nothing more. What a TF program
writes on such a result is Python's operators (``(model(x) * 2).numpy()``, ``logits - m``, ``-loss``)
and ``md.*`` ops (``md.nn.softmax(predictions)``, ``md.argmax(model(x), axis=1)``, themselves
``readable_results``): the operators below, already Python methods here (they convert numpy operands),
hand their result on ``readable`` too, so a chain of them stays readable; that is one ``as_subclass``
per operator on an eager result, and none on the torch calls of the training hot path.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from multidev._core import symbolic


class EagerTensor(torch.Tensor):
    """A tensor whose host reads (``numpy``, ``item``, ``tolist``, ``float``, ``format``) detach first."""

    __torch_function__ = torch._C._disabled_torch_function_impl

    def numpy(self, *, force: bool = False) -> np.ndarray:
        """The snapshot; a scalar's is a numpy scalar (``np.int64(2)``), as TensorFlow's ``.numpy()`` gives
        (keras.io's DQN lists ``keras.ops.argmax(q[0]).numpy()`` actions with ``np.random.choice`` ones)."""
        out = self.detach().cpu().numpy(force=force)
        return out[()] if out.ndim == 0 else out

    def item(self):
        return self.detach().item()

    def tolist(self):
        return self.detach().tolist()

    def __float__(self) -> float:
        return float(self.detach())

    def __int__(self) -> int:
        return int(self.detach())

    def __bool__(self) -> bool:
        return bool(self.detach())

    def __getitem__(self, index):
        """A row or slice stays readable (``model(x)[0].numpy()``, TensorFlow's tutorials' idiom)."""
        return eager(torch.Tensor.__getitem__(self, index))

    def __format__(self, spec: str) -> str:
        return self.detach().__format__(spec)

    def set_shape(self, shape) -> None:
        """TensorFlow's eager ``set_shape``: a check that ``shape`` (``None`` for a dim or the whole shape:
        any) is compatible with the tensor's, nothing else (the time_series tutorial's ``split_window``
        calls ``inputs.set_shape([None, self.input_width, None])`` in a ``Dataset.map``)."""
        dims = None if shape is None else [getattr(d, "value", d) for d in (getattr(shape, "dims", None) or shape)] \
            if getattr(shape, "rank", 0) is not None else None
        if dims is not None and (len(dims) != self.dim() or any(d is not None and int(d) != n
                                                                for d, n in zip(dims, self.shape))):
            raise ValueError(f"Tensor's shape {tuple(self.shape)} is not compatible with supplied shape "
                             f"{list(dims)}.")

    def __array_function__(self, func, types, args, kwargs):
        """numpy's functions read the snapshot, as on TensorFlow's eager tensors: ``np.squeeze(probs)`` (keras.io's
        actor-critic) called torch's ``squeeze`` and handed numpy a tensor that requires grad."""
        return func(*_snapshots(args), **_snapshots(kwargs))

    def __repr__(self, *, tensor_contents=None) -> str:
        """torch's text of the tensor, naming the op that made it (not the alias this class adds)."""
        text = torch.Tensor.__repr__(self.detach(), tensor_contents=tensor_contents)
        made_by = self.grad_fn.next_functions[0][0] if self.grad_fn is not None else None
        return f"{text[:-1]}, grad_fn=<{type(made_by).__name__}>)" if made_by is not None else text

    def __reduce_ex__(self, proto):
        return torch.Tensor.__reduce_ex__(self.as_subclass(torch.Tensor), proto)


def _snapshots(value):
    """``value`` with every ``EagerTensor`` in it (nested lists, tuples, dicts) read as a numpy array."""
    if isinstance(value, EagerTensor):
        return value.numpy()
    if type(value) in (list, tuple):
        return type(value)(_snapshots(v) for v in value)
    if type(value) is dict:
        return {k: _snapshots(v) for k, v in value.items()}
    return value


def readable_operator(name: str, convert=None, wrap=None):
    """``torch.Tensor.<name>`` (a Python operator) whose operand, if any, passes through ``convert(self,
    other)`` and whose result stays readable: ``(model(x) * 2).numpy()``, ``-loss``, ``(v * [3., 4.])``
    (``wrap``: how the result is handed on, ``readable`` by default)."""
    op = getattr(torch.Tensor, name)
    wrap = wrap or readable

    def method(self, *other):
        if convert is not None:
            other = tuple(convert(self, o) for o in other)
        return wrap(op(self, *other))

    method.__name__ = name
    return method


def _array_as_tensor(self, other):
    """A numpy or Python-list operand as a tensor, as TensorFlow converts it: torch's own operator returns
    NotImplemented for an ndarray, so numpy computed ``model(x) - y`` from the detached snapshot ``numpy()``
    gives: a result with no gradient, training nothing, silently; and a list it refuses (keras.io's DQN adds
    its list of sampled rewards to ``gamma * keras.ops.amax(...)``). A list of numbers takes the tensor's
    dtype where that loses nothing (ints, or any numbers beside a float tensor), as TensorFlow's conversion."""
    if isinstance(other, np.ndarray):
        return torch.as_tensor(other, device=self.device)
    if type(other) in (list, tuple):
        converted = torch.as_tensor(other, device=self.device)
        return converted.to(self.dtype) if self.is_floating_point() or not converted.is_floating_point() \
            else converted
    return other


def eager(value):
    """``value`` as an ``EagerTensor`` when it is a plain tensor, gradient or not (what a TF program's own code
    gets from an op: ``list + tensor`` and ``.numpy()`` work on it); else unchanged. Not while tracing."""
    if type(value) is torch.Tensor and not torch.compiler.is_compiling():
        result = value.as_subclass(EagerTensor)
        if value.__dict__:
            result.__dict__.update(value.__dict__)
        return result
    return value


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul"):
    for _dunder in (f"__{_name}__", f"__r{_name}__"):
        if hasattr(torch.Tensor, _dunder):
            setattr(EagerTensor, _dunder, readable_operator(_dunder, _array_as_tensor, eager))
for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor"):
    # TensorFlow's tensors are immutable: ``x /= 255`` binds x to a new tensor (the tutorials' ``scale`` map),
    # where torch's in-place operator would write the tensor every other name for it sees.
    if hasattr(torch.Tensor, f"__{_name}__"):
        setattr(EagerTensor, f"__i{_name}__", readable_operator(f"__{_name}__", _array_as_tensor, eager))
for _dunder in ("__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__"):
    setattr(EagerTensor, _dunder, readable_operator(_dunder, _array_as_tensor, eager))
EagerTensor.__hash__ = torch.Tensor.__hash__   # defining __eq__ above would drop it
for _dunder in ("__neg__", "__pos__", "__abs__"):
    setattr(EagerTensor, _dunder, readable_operator(_dunder, wrap=eager))


def readable(value):
    """``value`` as an ``EagerTensor`` when it is a plain tensor that requires grad, else unchanged.

    Python attributes set on the tensor (Keras's ``_keras_mask`` and ``_keras_logits``) carry over.
    Not while torch.compile or torch.export traces (they would have to trace the subclass)."""
    if type(value) is torch.Tensor and value.requires_grad and not torch.compiler.is_compiling():
        result = value.as_subclass(EagerTensor)
        if value.__dict__:
            result.__dict__.update(value.__dict__)
        return result
    return value


def _readable_parts(value):
    """``readable(value)``, or each tensor of a list/tuple result (``mean, logvar = md.split(...)``: the CVAE
    tutorial reads ``mean.numpy()``)."""
    if type(value) is list or type(value) is tuple:
        return type(value)(readable(v) for v in value)
    return readable(value)


def readable_results(fn, name=None):
    """Decorate a TF-named op so that its tensor result is ``readable``; called on a symbolic front end's
    placeholders (functional KerasTensors) it builds that front end's node (``_core/symbolic.py``)."""
    public = name or fn.__name__

    @functools.wraps(fn)
    def op(*args, **kwargs):
        handler = symbolic.handler_for(args, kwargs) if symbolic._HANDLERS else None
        if handler is not None:
            return handler(fn, public, args, kwargs)
        return _readable_parts(fn(*args, **kwargs))
    op._md_public_name = public
    return op


def gradient_input(value):
    """What ``tape.gradient`` differentiates for a source: for a readable result, the graph edge of the tensor
    it aliases. A model's outputs are handed on readable at the end of its call, but its later layers read the
    tensor before that: Grad-CAM's ``grad_model`` returns the last conv layer's activations AND the predictions
    computed from them, and the gradient with respect to the alias was None (TensorFlow's is the same tensor)."""
    grad_fn = value.grad_fn if isinstance(value, EagerTensor) else None
    if grad_fn is not None and type(grad_fn).__name__ == "AliasBackward0" and grad_fn.next_functions[0][0] is not None:
        return torch.autograd.graph.GradientEdge(*grad_fn.next_functions[0])
    return value
