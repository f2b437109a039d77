"""The placement torch function mode: what ``with md.device(...)`` does to each torch op.

Modelled on PyTorch's ``torch/utils/_device.py``: factory functions get ``device=`` filled in.
In addition the mode copies inputs that live on another torch device to the scope's device
(as the thread's device policy allows), logs the op when placement logging is on, falls back to
the CPU under soft placement when the device has no kernel for the op, and counts memory on
logical GPUs that have a memory limit.

Only the innermost mode of a thread acts; outer ones pass calls through, so nested scopes do
not copy twice or log twice.
"""

from __future__ import annotations

import functools

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._device import _device_constructors

from multidev._core.errors import InvalidArgumentError, ResourceExhaustedError
from multidev.devices import context, memory, options, registry
from multidev.devices.registry import Device
from multidev.placement import log

_LIKE_FACTORIES = {
    torch.zeros_like,
    torch.ones_like,
    torch.empty_like,
    torch.full_like,
    torch.rand_like,
    torch.randn_like,
    torch.randint_like,
}
# Tensor methods that read metadata, convert, or move explicitly: never copied, never logged.
_PASS_THROUGH = {
    "__get__", "__set__", "__delete__", "size", "dim", "numel", "stride", "storage_offset",
    "is_contiguous", "data_ptr", "element_size", "untyped_storage", "get_device", "__len__",
    "__repr__", "__str__", "__format__", "__hash__", "__reduce_ex__", "__setstate__",
    "__deepcopy__", "__dlpack__", "__dlpack_device__", "__array__", "numpy", "tolist", "item",
    "to", "cpu", "cuda", "type", "copy_", "backward", "register_hook", "retain_grad",
    "is_floating_point", "is_complex", "_make_subclass", "__bool__", "__index__", "__int__", "__float__",
}
_INPLACE_DUNDERS = {
    "__setitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__", "__imod__",
    "__ipow__", "__iand__", "__ior__", "__ixor__", "__ilshift__", "__irshift__", "__imatmul__",
}


@functools.lru_cache(maxsize=None)
def _factories() -> frozenset:
    return frozenset(_device_constructors()) | frozenset(_LIKE_FACTORIES)


def _name(func: object) -> str:
    return getattr(func, "__name__", "")


_KINDS: dict = {}   # func -> "pass", "factory", "inplace" or "op": one dict read an op instead of four tests


def _kind(func: object) -> str:
    """What the mode does with ``func``: let it through, fill in its device, run it where it writes, or place it."""
    kind = _KINDS.get(func)
    if kind is None:
        name = _name(func)
        if name in _PASS_THROUGH:
            kind = "pass"
        elif func in _factories():
            kind = "factory"
        elif (name.endswith("_") and not name.endswith("__")) or name in _INPLACE_DUNDERS:
            kind = "inplace"
        else:
            kind = "op"
        if len(_KINDS) < 8192:     # torch's functions and methods; never grows with per-call objects
            _KINDS[func] = kind
    return kind


def _map_tensors(fn, obj):
    """Apply ``fn`` to the tensors in nested lists, tuples and dicts; unchanged parts stay the same objects."""
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, (list, tuple)):
        mapped = [_map_tensors(fn, x) for x in obj]
        if all(a is b for a, b in zip(mapped, obj)):
            return obj
        return type(obj)(mapped) if type(obj) in (list, tuple) else type(obj)(*mapped)
    if isinstance(obj, dict):
        mapped = {k: _map_tensors(fn, v) for k, v in obj.items()}
        return obj if all(mapped[k] is v for k, v in obj.items()) else mapped
    return obj


def _first_tensor(obj: object) -> torch.Tensor | None:
    if isinstance(obj, torch.Tensor):
        return obj
    values = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, (list, tuple)) else ()
    for x in values:
        found = _first_tensor(x)
        if found is not None:
            return found
    return None


def _policy_allows(func: object, tensor: torch.Tensor, source: str, target: Device) -> None:
    """Apply this thread's device policy to copying ``tensor`` from ``source`` to ``target``."""
    policy = options.get_device_policy()
    if policy == "silent" or (policy == "silent_for_int32" and tensor.dtype == torch.int32):
        return
    if policy == "warn":
        log.copied(func, source, target.name)
        return
    raise InvalidArgumentError(
        f"Tensors on conflicting devices: cannot run op {log.op_name(func)!r} on {target.name} because an "
        f"input lives on {source} (device policy {policy!r}). Copy it explicitly with "
        f"tensor.to({str(target.torch_device)!r}), or md.config.experimental.set_device_policy('silent')."
    )


def elsewhere(obj: object, dest: torch.device) -> bool:
    """Whether a tensor in ``obj`` (nested lists, tuples, dicts) is not on ``dest``: a scan that allocates nothing,
    so an op whose inputs are already in place (nearly every op in a replica) costs no rebuilt argument tree."""
    if isinstance(obj, torch.Tensor):
        return obj.device != dest
    if isinstance(obj, (list, tuple)):
        for x in obj:
            if elsewhere(x, dest):
                return True
        return False
    if isinstance(obj, dict):
        for x in obj.values():
            if elsewhere(x, dest):
                return True
    return False


def _move(func: object, tree: object, target: Device) -> object:
    """Copy every tensor in ``tree`` that is not on ``target``'s torch device to it."""
    dest = target.torch_device
    if not elsewhere(tree, dest):
        return tree

    def move(x: object) -> object:
        if isinstance(x, torch.Tensor) and x.device != dest:
            _policy_allows(func, x, str(x.device), target)
            return x.to(dest)
        return x

    return _map_tensors(move, tree)


def _to_cpu(tree: object) -> object:
    return _map_tensors(lambda x: x.cpu(), tree)


class PlacementMode(TorchFunctionMode):
    """Runs torch ops on ``device`` (a scope's mode), or only logs them (``device=None``)."""

    def __init__(self, device: Device | None) -> None:
        super().__init__()
        self.device = device

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        kind = _kind(func)
        if kind == "pass" or not self._is_active():
            return func(*args, **kwargs)
        if self.device is None:
            return self._log_only(func, args, kwargs)
        if kind == "factory":
            placed = kwargs if kwargs.get("device") is not None else dict(kwargs, device=self.device.torch_device)
            return self._run(func, (args, placed), (args, kwargs), self.device)
        target = self.device
        if kind == "inplace" or kwargs.get("out") is not None:
            target = self._inplace_target(args, kwargs)
        return self._run(func, _move(func, (args, kwargs), target), (args, kwargs), target)

    def _is_active(self) -> bool:
        innermost = context.innermost_mode()
        if self.device is None:
            return innermost is None and log.enabled()
        return innermost is self

    def _log_only(self, func, args, kwargs):
        out = func(*args, **kwargs)
        tensor = _first_tensor(out)
        if tensor is None:
            tensor = _first_tensor((args, kwargs))
        device = registry.device_for_tensor(tensor) if tensor is not None else registry.resolve(None)
        log.executed(func, device.name)
        return out

    def _inplace_target(self, args, kwargs) -> Device:
        """An in-place op writes into its first tensor (or ``out=``): it runs where that lives."""
        out = kwargs.get("out")
        written = out if isinstance(out, torch.Tensor) else _first_tensor(args if out is None else out)
        return self.device if written is None else registry.device_for_tensor(written)

    def _run(self, func, placed, original, device: Device):
        """Run ``func`` on ``placed`` (args, kwargs); fall back to the CPU with ``original`` ones."""
        args, kwargs = placed
        try:
            out = func(*args, **kwargs)
        except NotImplementedError as error:
            if device.device_type == "CPU" or not options.get_soft_device_placement():
                raise
            return self._fall_back(func, original, device, error)
        except torch.OutOfMemoryError as error:
            raise ResourceExhaustedError(
                f"OOM when running op {log.op_name(func)!r} on {device.name}: {str(error).splitlines()[0]}"
            ) from error
        if device.memory_limit is not None:
            memory.track(device, out)
        if log.enabled():
            log.executed(func, device.name)
        return out

    def _fall_back(self, func, original, device: Device, error: NotImplementedError):
        """Soft placement: the device has no kernel for ``func``, so run it on the CPU."""
        cpu = registry.logical_devices("CPU")[0]
        args, kwargs = _to_cpu(original)
        if kwargs.get("device") is not None:
            kwargs = dict(kwargs, device=cpu.torch_device)
        out = func(*args, **kwargs)
        if log.enabled():
            log.fell_back(func, device.name, cpu.name, error)
        return out


__all__ = ["PlacementMode", "elsewhere"]
