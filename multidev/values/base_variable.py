"""``md.Variable``: a ``torch.nn.Parameter`` with TensorFlow's ``assign`` API, and the conversion of
initial values and assigned values to tensors (``_as_tensor``).

Separate from the distributed forms (``distributed_variable.py``, ``variables.py``) because a plain
variable knows nothing of replicas: outside a strategy this module is all ``md.Variable`` runs. Its
constructor only asks the scope's strategy (through ``values/context``) to create a distributed
variable instead. Import the public names from ``multidev.values.variables``.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch
from torch._C import DisableTorchFunctionSubclass

from multidev._core import name_scopes
from multidev._core.eager_tensor import readable_operator
from multidev._core.enums import VariableAggregation, VariableSynchronization
from multidev._core.errors import InvalidArgumentError
from multidev._core.python_numbers import with_tf_dtype
from multidev._core.variables_made import note_variable_made
from multidev.values.variable_inputs import check_python_value, check_shape_argument, variable_dtype
from multidev.values import context
from multidev.values.distributed import DistributedValues

_UPDATES: dict[str, Callable[[torch.Tensor, torch.Tensor], Any]] = {
    "assign": lambda t, v: t.copy_(v),
    "assign_add": lambda t, v: t.add_(v),
    "assign_sub": lambda t, v: t.sub_(v),
}


def _as_tensor(value: Any, dtype: torch.dtype | None = None, device: torch.device | None = None) -> torch.Tensor:
    if callable(value) and not isinstance(value, torch.Tensor):
        value = value()
    if isinstance(value, torch.Tensor):
        out = value.detach()
        if dtype is not None or device is not None:
            out = out.to(dtype=dtype or out.dtype, device=device or out.device)
        return out
    if isinstance(value, DistributedValues):
        raise TypeError(
            f"Cannot create a variable from a distributed value {type(value).__name__}; "
            "pass a tensor (e.g. one of strategy.experimental_local_results(value))."
        )
    try:
        array = np.asarray(value)
    except Exception as exc:  # pragma: no cover - numpy raises many types
        raise TypeError(
            f"Cannot convert {value!r} to a tensor for a variable (ragged or non-numeric values are not "
            "supported); pass a rectangular array or a tensor."
        ) from exc
    if array.dtype == object:
        raise TypeError(f"Cannot convert {value!r} (ragged or non-numeric) to a tensor for a variable.")
    array = check_python_value(value, array, dtype)
    out = torch.as_tensor(array)
    if dtype is None:
        out = with_tf_dtype(value, out)   # `tf.Variable(1)` is int32, as md.constant(1) (a numpy int64 stays int64)
        if out.dtype == torch.float64:
            out = out.to(torch.float32)   # numpy's float64 too: multidev's variables default to float32
    return out.to(dtype=dtype or out.dtype, device=device)


def _list_as_tensor(self, other):
    """A Python list or tuple operand as TensorFlow takes it (``x * [3., 4.]``, ``[[1., 2., 3.]] @ w``:
    converted to the variable's dtype); torch would refuse it, or read ``v * [..]`` as list repetition."""
    if isinstance(other, (list, tuple)):
        return torch.as_tensor(other, dtype=self.dtype, device=torch.Tensor.device.__get__(self))
    return other


def _default_name() -> str:
    """TensorFlow 2's eager default: every unnamed variable is ``Variable`` (``'Variable:0'``), not
    uniquified (the notebook of seed 004 prints ``'Variable:0'`` for each of its variables)."""
    return "Variable"


class Variable(torch.nn.Parameter):
    """A mutable tensor with TensorFlow's ``assign`` API (``tf.Variable``); a ``torch.nn.Parameter``.

    Example:
        >>> v = md.Variable(1.0)
        >>> v.assign_add(2.0).numpy()
        array(3., dtype=float32)
    """

    def __new__(
        cls,
        initial_value: Any = None,
        trainable: bool | None = None,
        name: str | None = None,
        dtype: torch.dtype | None = None,
        synchronization: VariableSynchronization | str | None = None,
        aggregation: VariableAggregation | str | None = None,
        shape: Any = None,
    ):
        note_variable_made()   # (md.function refuses variables made after its first trace)
        if initial_value is None:
            raise ValueError("md.Variable needs an initial_value (a tensor, array, number or a callable returning one).")
        dtype = variable_dtype(dtype)
        synchronization = VariableSynchronization.from_value(synchronization)
        aggregation = VariableAggregation.from_value(aggregation)
        if trainable is None:
            trainable = synchronization is not VariableSynchronization.ON_READ
        name = name_scopes.scoped(name, _default_name()) if name_scopes.current() else name   # md.name_scope
        strategy = context.current_scope_strategy() if cls is Variable else None
        if strategy is not None and strategy.extended.distributes_variables:
            return check_shape_argument(shape, strategy.extended.create_variable(
                initial_value, trainable=trainable, name=name, dtype=dtype,
                synchronization=synchronization, aggregation=aggregation,
            ))
        data = check_shape_argument(shape, _as_tensor(initial_value, dtype))
        if isinstance(initial_value, torch.Tensor) and data.untyped_storage().data_ptr() == \
                initial_value.untyped_storage().data_ptr():
            data = data.clone()   # a variable owns its value: `tf.Variable(a)` is a copy of a
        if strategy is not None:
            strategy.extended.place_value(data)   # OneDeviceStrategy('/GPU:0') keeps its variables there
        return cls._from_tensor(data, trainable=trainable, name=name,
                                synchronization=synchronization, aggregation=aggregation)

    def __init__(self, *args, **kwargs):  # __new__ did the work; Parameter has no __init__ of its own
        pass

    @classmethod
    def _from_tensor(cls, data: torch.Tensor, *, trainable: bool, name: str | None,
                     synchronization: VariableSynchronization, aggregation: VariableAggregation):
        requires_grad = bool(trainable) and (data.is_floating_point() or data.is_complex())
        self = torch.Tensor._make_subclass(cls, data, requires_grad)
        self._md_name = name or _default_name()
        self._md_trainable = bool(trainable)
        self.synchronization = synchronization
        self.aggregation = aggregation
        return self

    # --- TensorFlow's variable API ---------------------------------------------------------
    @property
    def name(self) -> str:
        """TensorFlow's ``'Dense.kernel:0'``, or the name a front end gave the variable (``_keras_name``: md.keras's
        ``add_weight`` gives Keras 3's ``'kernel'``, the same with and without a strategy)."""
        return self.__dict__.get("_keras_name") or self._tf_name

    @property
    def _tf_name(self) -> str:
        """TensorFlow's name (``'Dense.kernel:0'``), which reprs and error messages show whatever ``name`` is."""
        return f"{self._md_name}:0"

    @property
    def trainable(self) -> bool:
        return self._md_trainable

    @property
    def path(self) -> str:
        """Keras 3's ``variable.path`` of a layer's weight (``'dense/kernel'``), else the variable's name."""
        return self.__dict__.get("_keras_path") or self._md_name

    def read_value(self) -> torch.Tensor:
        """A snapshot of the value (the calling replica's copy inside ``strategy.run``)."""
        with torch.no_grad(), DisableTorchFunctionSubclass():
            return self._read().clone()

    @property
    def value(self) -> "Variable":
        """TensorFlow's ``v.value()`` (a snapshot: the variable is callable) and Keras 3's ``v.value``
        (the variable itself: a torch-style step reads ``v.value.grad``, the calling replica's) in one."""
        return self

    def __call__(self) -> torch.Tensor:
        return self.read_value()

    def numpy(self) -> np.ndarray:
        return self.read_value().cpu().numpy()

    def __float__(self) -> float:  # like tf.Variable: a value, with no autograd warning
        return float(self.read_value())

    def __int__(self) -> int:
        return int(self.read_value())

    def assign(self, value: Any, use_locking: bool | None = None, name: str | None = None, read_value: bool = True):
        """Set the value; returns the variable (TensorFlow returns the updated variable)."""
        return self._update("assign", value)

    def assign_add(self, delta: Any, use_locking: bool | None = None, name: str | None = None, read_value: bool = True):
        return self._update("assign_add", delta)

    def assign_sub(self, delta: Any, use_locking: bool | None = None, name: str | None = None, read_value: bool = True):
        return self._update("assign_sub", delta)

    # The result reads with ``.numpy()`` while it requires grad (``(v * 3).numpy()``, as TensorFlow's).
    __add__, __radd__, __sub__, __rsub__, __mul__, __rmul__ = (readable_operator(m, _list_as_tensor) for m in (
        "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__"))
    __truediv__, __rtruediv__, __matmul__, __rmatmul__, __pow__ = (readable_operator(m, _list_as_tensor) for m in (
        "__truediv__", "__rtruediv__", "__matmul__", "__rmatmul__", "__pow__"))
    __neg__ = readable_operator("__neg__")
    __getitem__ = readable_operator("__getitem__")   # the time_series tutorial's `kernel[:,0].numpy()`

    # ``v += 1`` on a trainable variable: torch refuses an in-place op on a leaf that requires grad;
    # say it as TensorFlow does (it refuses ``+=`` on every tf.Variable) and name the fixes.
    def __iadd__(self, other):
        self._check_in_place("+=", "assign_add(value)")
        return super().__iadd__(other)

    def __isub__(self, other):
        self._check_in_place("-=", "assign_sub(value)")
        return super().__isub__(other)

    def _check_in_place(self, op: str, method: str) -> None:
        if self.requires_grad and torch.is_grad_enabled():
            raise RuntimeError(
                f"`variable {op} value` with md.Variables is not supported (TensorFlow refuses it too): use "
                f"`variable.{method}` to modify the variable, or `out = variable {op[0]} value` for a new "
                "tensor (a PyTorch-style in-place update goes under `with torch.no_grad():`).")

    # --- implementation ---------------------------------------------------------------------
    def _read(self) -> torch.Tensor:
        return self

    def _update(self, op: str, value: Any):
        with torch.no_grad(), DisableTorchFunctionSubclass():
            _UPDATES[op](self, self._coerce(value, self, op))
        return self

    def _coerce(self, value: Any, like: torch.Tensor, op: str = "assign") -> torch.Tensor:
        """``value`` as a tensor of ``like``'s dtype, device and shape (or one that broadcasts to it);
        a wrong shape is TF's ValueError for ``assign``, its InvalidArgumentError for ``assign_add/sub``;
        a Python number into a bool variable TF's TypeError."""
        if like.dtype == torch.bool and isinstance(value, (int, float)) and not isinstance(value, bool):
            raise TypeError(f"Cannot convert {value!r} to EagerTensor of dtype {str(like.dtype).replace('torch.', '')}"
                            f" (in {op} of variable {self._tf_name!r}). Pass a value of the variable's dtype.")
        # The storage's torch device (a parameter-server variable's ``device`` is TF's name of its ps).
        tensor = _as_tensor(value, like.dtype, torch.Tensor.device.__get__(like))
        try:
            fits = tensor.shape == like.shape or torch.broadcast_shapes(tensor.shape, like.shape) == like.shape
        except RuntimeError:   # torch's "cannot broadcast": TF's is a ValueError naming both shapes
            fits = False
        if not fits:
            raise (ValueError if op == "assign" else InvalidArgumentError)(
                f"Cannot {op} a value of shape {tuple(tensor.shape)} to variable {self._tf_name!r} "
                f"of shape {tuple(like.shape)}."
            )
        return tensor

    def __repr__(self) -> str:
        with torch.no_grad(), DisableTorchFunctionSubclass():
            return _variable_repr(self._tf_name, self._read())

    def __reduce_ex__(self, protocol):
        raise TypeError(
            "multidev variables are not picklable: save them with md.keras checkpoints "
            "(safetensors) or take .numpy() / .read_value()."
        )


def _variable_repr(name: str, tensor: torch.Tensor) -> str:
    dtype = str(tensor.dtype).replace("torch.", "")
    return f"<md.Variable {name!r} shape={tuple(tensor.shape)} dtype={dtype}, numpy={tensor.detach().cpu().numpy()!r}>"
