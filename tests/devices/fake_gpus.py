"""Code that makes a fresh interpreter believe it has GPUs (for configuration tests without one).

It replaces the two seams of ``multidev.devices.physical``: the CUDA device count, and the torch
device a GPU runs on ('cpu' keeps real storages for memory accounting; 'meta' is a torch device
distinct from the CPU, to exercise copies, device policies and missing kernels).
"""


import textwrap


def fake_gpus(count: int, code: str, torch_device: str = "cpu") -> str:
    """``code`` (dedented) preceded by source that fakes ``count`` GPUs on ``torch_device``."""
    return _PREAMBLE.format(count=count, torch_device=torch_device) + textwrap.dedent(code)


_PREAMBLE = """
import torch
from multidev.devices import physical
physical._cuda_device_count = lambda: {count}
physical.discover.cache_clear()
physical.torch_device_for = (
    lambda device_type, index: torch.device("{torch_device}") if device_type == "GPU" else torch.device("cpu"))
"""


def meta_replicas(code: str) -> str:
    """``code`` (dedented) on one stand-in GPU on torch's ``meta`` device, where reading a number back or copying
    host data to the "GPU" can be seen: strategies may run replicas there (logical GPUs of it), and ``HOST_TRAFFIC``
    counts, by call site, the copies host -> "GPU", the ``torch.tensor`` calls made on it and the "GPU" tensors
    indexed with host index tensors (torch copies the index over) while
    ``WATCH[0]`` is true; a read back raises (meta tensors have no data).

    Stand-ins for what meta lacks: the per-replica random streams of a device (the CPU's generator), autocast
    (off), and the first runs' checks that every replica's copies agree (which
    read the copies back once per step function, by design)."""
    return _PREAMBLE.format(count=1, torch_device="meta") + _META_REPLICAS + textwrap.dedent(code)


_META_REPLICAS = '''
import collections, contextlib, traceback
from multidev.distribute import first_run_agreement as _fra, reduced_grads as _rg
from multidev.placement import replica_random as _rr
from multidev.placement.scope import current_device as _current_device

_generator = _rr._default_generator
_rr._default_generator = lambda d: torch.default_generator if d.type == "meta" else _generator(d)
_autocast, _autocast_enabled = torch.autocast, torch.is_autocast_enabled


class _Autocast:   # torch has no autocast for meta: off there
    def __new__(cls, device_type, *args, **kwargs):
        return contextlib.nullcontext() if device_type == "meta" else _autocast(device_type, *args, **kwargs)


torch.autocast = _Autocast
torch.is_autocast_enabled = lambda *a: False if a and a[0] == "meta" else _autocast_enabled(*a)
_fra_same, _rg_same = _fra.same, _rg._same
_fra.same = lambda a, b: True if a.device.type == "meta" else _fra_same(a, b)
_rg._same = lambda a, b, n: True if a is not None and a.device.type == "meta" else _rg_same(a, b, n)

HOST_TRAFFIC, WATCH = collections.Counter(), [False]


def _site(kind):
    frames = [f for f in traceback.extract_stack()[:-2] if "/multidev/" in f.filename]
    HOST_TRAFFIC[kind + " " + " <- ".join(f"{f.filename.split('/multidev/')[-1]}:{f.lineno}" for f in frames[-3:][::-1])] += 1


_tensor, _to, _copy = torch.tensor, torch.Tensor.to, torch.Tensor.copy_


def _watched_tensor(*args, **kwargs):
    device = kwargs.get("device")
    if device is None:
        scope = _current_device()
        device = scope.torch_device if scope is not None else "cpu"
    if WATCH[0] and torch.device(device).type == "meta":
        _site("torch.tensor")
    return _tensor(*args, **kwargs)


def _watched_to(self, *args, **kwargs):
    target = None
    for a in list(args) + [kwargs.get("device")]:
        if isinstance(a, (str, torch.device)):
            target = torch.device(a)
        elif isinstance(a, torch.Tensor):
            target = a.device
    if WATCH[0] and target is not None and target.type == "meta" and self.device.type == "cpu":
        _site("host->GPU to")
    return _to(self, *args, **kwargs)


def _watched_copy(self, src, *args, **kwargs):
    if WATCH[0] and self.device.type == "meta" and isinstance(src, torch.Tensor) and src.device.type == "cpu":
        _site("host->GPU copy_")
    return _copy(self, src, *args, **kwargs)


_getitem = torch.Tensor.__getitem__


def _watched_getitem(self, index):
    host = [i for i in (index if isinstance(index, tuple) else (index,)) if isinstance(i, torch.Tensor)]
    if WATCH[0] and self.device.type == "meta" and any(i.device.type == "cpu" and i.dim() > 0 for i in host):
        _site("host index")
    return _getitem(self, index)


torch.tensor, torch.Tensor.to, torch.Tensor.copy_ = _watched_tensor, _watched_to, _watched_copy
torch.Tensor.__getitem__ = _watched_getitem
'''
