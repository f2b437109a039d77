"""Process-wide torch hooks owned by live objects: installed when the first owner appears, removed
when the last one is freed, so ``import multidev`` registers nothing in torch and a program that
drops its strategies gets torch back as it was.

``STRATEGY_HOOKS`` is what strategies need (``Strategy.__init__`` acquires it; the strategy is
freed with its distributed variables, which hold it): module parameter/buffer registration hooks
(``module_hooks``), optimizer step pre/post hooks (``optimizer_hooks``),
``add_param_group`` / ``load_state_dict`` once per step (``optimizer_calls``), the scheduler ``step``
wrappers (``scheduler_hooks``), torch's module transforms (``module_transforms``), ``GradScaler``'s
step methods (``grad_scaler_hooks``), ``AveragedModel.update_parameters`` (``swa_hooks``),
torch.distributed's functions, refused inside replicas (``torch_distributed_hooks``), DDP's wrapper,
``ZeroRedundancyOptimizer`` and ``Join`` where they cannot serve the replicas (``ddp_feature_hooks``), torch's random-state
functions (``random_state_hooks``), ``torch.nn.init``'s random
initialisers, drawing on the host (``initializer_hooks``), Python's and numpy's random functions (``host_random``),
``torch.autograd.backward`` (``shared_leaves``: one tensor several replicas' backward reach), recurrent modules'
weight lists (``rnn_hooks``), torch's attention fast-path check (``attention_fast_path``), ``Module.load_state_dict`` of a DDP
checkpoint's ``module.`` keys (``state_dict_prefix``), tensors modules keep on themselves, per replica
(``replica_attributes``), and the hooks
of each registered front end (``front_end.register``). Other owners:
``parameter_server.gradient_push`` (a connected cluster or server), ``train.deferred`` (a pending
restore).

torch calls a registry's hooks while iterating it, and an ``OrderedDict`` changed during iteration
raises in torch's loop; an owner freed by a garbage collection that ran inside such a loop (in any
thread) therefore leaves its hooks installed, inert without owners, until a later release or
``sweep`` finds no loop running.
"""

from __future__ import annotations

import importlib
import sys
import threading
import weakref
from typing import Any, Callable

from torch.nn.modules import module as _torch_module
from torch.optim import optimizer as _torch_optimizer

#: Installs hooks, returns the function that removes them.
Installer = Callable[[], Callable[[], None]]

# torch's functions that iterate a global hook registry while calling its hooks.
_ITERATING = frozenset(
    [(_torch_module.__file__, n) for n in ("register_parameter", "register_buffer", "register_module",
                                           "add_module", "__setattr__")]
    + [(_torch_optimizer.__file__, "wrapper")])   # Optimizer.profile_hook_step's wrapper of step
_ALL: "weakref.WeakSet[OwnedHooks]" = weakref.WeakSet()
_LOCK = threading.RLock()   # one for all: a finalizer may run in a collection inside acquire, in any thread


def _torch_iterating_hooks() -> bool:
    """Whether any thread is inside a torch loop over a hook registry (where removing one breaks it)."""
    for frame in sys._current_frames().values():
        while frame is not None:
            if (frame.f_code.co_filename, frame.f_code.co_name) in _ITERATING:
                return True
            frame = frame.f_back
    return False


class OwnedHooks:
    """Hooks installed while at least one owner lives: reference counted, thread-safe, idempotent.

    Example:
        hooks = OwnedHooks("ps gradients", [install])   # install() -> remove
        lease = hooks.acquire(cluster)                   # installed; released when cluster is freed
        lease()                                          # or now (a second call does nothing)
    """

    def __init__(self, name: str, installers: list[Installer] = ()):
        self.name = name
        self._installers = list(installers)
        self._owners = 0
        self._removers: list[Callable[[], None]] = []   # non-empty while installed
        _ALL.add(self)

    @property
    def installed(self) -> bool:
        return bool(self._removers)

    @property
    def owners(self) -> int:
        return self._owners

    def add(self, installer: Installer) -> None:
        """Install ``installer``'s hooks with the others (at once while owners live)."""
        with _LOCK:
            if installer in self._installers:
                return
            self._installers.append(installer)
            if self._removers:
                self._removers.append(installer())

    def acquire(self, owner: Any) -> weakref.finalize:
        """Count ``owner`` live until it is freed or the returned finalizer is called."""
        with _LOCK:
            if not self._removers:
                self._install()
            self._owners += 1
        lease = weakref.finalize(owner, self._release)
        lease.atexit = False   # the interpreter is going away: torch's registries with it
        return lease

    def _install(self) -> None:
        try:
            for installer in self._installers:
                self._removers.append(installer())
        except BaseException:
            self._remove()
            raise

    def _release(self) -> None:
        with _LOCK:
            self._owners -= 1
        sweep()

    def _sweep(self) -> None:
        with _LOCK:
            if self._owners == 0 and self._removers and not _torch_iterating_hooks():
                self._remove()

    def _remove(self) -> None:
        while self._removers:
            self._removers.pop()()


def sweep() -> None:
    """Remove the hooks of every ``OwnedHooks`` left without owners (a release inside a torch hook
    loop leaves them in place)."""
    for hooks in list(_ALL):
        hooks._sweep()


def _lazy(module: str) -> Installer:
    """``multidev.distribute.<module>.install``, imported when first installed (those modules sit below
    ``strategy.py``, which acquires these hooks)."""
    return lambda: importlib.import_module(f"multidev.distribute.{module}").install()


#: What every strategy needs while it lives; front ends add theirs (``front_end.register``).
STRATEGY_HOOKS = OwnedHooks("strategies", [_lazy(m) for m in ("module_hooks", "optimizer_hooks", "optimizer_calls",
                                                               "scheduler_hooks", "distributed_queries",
                                                               "module_transforms", "grad_scaler_hooks", "swa_hooks",
                                                               "torch_distributed_hooks", "random_state_hooks",
                                                               "host_random", "shared_leaves", "rnn_hooks",
                                                               "replica_attributes", "ddp_feature_hooks",
                                                               "functional_calls", "scripted_modules",
                                                               "attention_fast_path", "state_dict_prefix",
                                                               "parametrize_cache", "hook_state",
                                                               "initializer_hooks")])
