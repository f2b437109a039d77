"""``DistributedVariable``: a variable with one component (a leaf tensor) per replica, and ``local_view``, what autograd
sees of a variable in the calling replica.

This is the replica-aware machinery that both distributed forms share: the components, which one an op sees
(``__torch_function__``, ``_view_for``), the staleness check (``_sync_if_stale``, ``_mark_synced``), writes to chosen
replicas (``_apply_to``), ``grad``, ``deepcopy`` and the whole-variable ops (``requires_grad_``, ``.data = ...``). It
is separate from ``variables.py``, which holds the two synchronization policies (``MirroredVariable``,
``SyncOnReadVariable``) built on it, and from ``base_variable.py``, the plain ``md.Variable``. Import the public names
from ``multidev.values.variables``.
"""

from __future__ import annotations

import weakref
from typing import Any, Sequence

import torch
from torch._C import DisableTorchFunction, DisableTorchFunctionSubclass

from multidev._core.enums import VariableAggregation, VariableSynchronization
from multidev.values import context, cross_replica_grads, host_initializers
from multidev.values.base_variable import _UPDATES, Variable, _variable_repr
from multidev.values.distributed import AnyDistributedValue
from multidev.values.strategy_protocol import StrategyLike
from multidev.values.whole_variable_ops import WHOLE_VARIABLE


def _substitute(value: Any, replica_id: int | None, viewed: list | None = None) -> Any:
    """Replace distributed variables in torch-function arguments by what ``replica_id`` should see;
    ``viewed`` (if given) collects ``(variable, tensor)`` for each one (the variable itself where it
    is its own view: a mirrored variable in cross-replica context)."""
    if isinstance(value, DistributedVariable):
        tensor = value._view_for(replica_id)
        if viewed is not None:
            viewed.append((value, tensor))
        return tensor
    if isinstance(value, (list, tuple)):
        return type(value)(_substitute(v, replica_id, viewed) for v in value)
    if isinstance(value, dict):
        return {k: _substitute(v, replica_id, viewed) for k, v in value.items()}
    return value


def _cross_replica_call(func: Any, args: tuple, kwargs: dict) -> Any:
    """``func`` in cross-replica context. A sync-on-read variable is seen as its reduced value, a new
    tensor: an op that writes it in place (``bn.reset_running_stats()``, a batch-norm forward in
    training mode updating its running statistics, as ``swa_utils.update_bn`` runs it) writes the
    result into every copy, as a cross-replica ``assign`` does, instead of into a value thrown away.
    A mirrored variable written in place (its primary) is copied to every replica at once, so
    ``strategy.experimental_local_results`` and ``.values`` show the write before the next run."""
    viewed: list = []
    args, kwargs = _substitute(args, None, viewed), _substitute(kwargs, None, viewed)
    unversioned = func in _WRITES_WITHOUT_VERSION
    # (variable, the tensor the op got, its version before the op or a copy of it); a variable seen as
    # itself (mirrored) shares its primary copy's version counter
    seen = [(v, t, t.clone() if unversioned else t._version) for v, t in viewed if t is not v]
    itself = [(v, v._components[0]._version) for v, t in viewed if t is v] if _may_write(func, kwargs) else ()
    with DisableTorchFunctionSubclass():
        result = host_initializers.call(func, args, kwargs)   # (an initialiser draws on the host, as torch's)
    for variable, tensor, before in seen:
        if not torch.equal(tensor, before) if unversioned else tensor._version != before:
            variable._update("assign", tensor)
    for variable, before in itself:
        if variable._components[0]._version != before:   # written in place (a target network's
            variable._sync_if_stale()   # `p_t.lerp_(p, 1 - tau)` between steps): every copy now
    return result


def _may_write(func: Any, kwargs: dict) -> bool:
    """Whether ``func`` may write an argument in place (torch's ``name_`` convention, ``__iadd__``,
    ``__setitem__``, ``out=``): only then is a mirrored variable's version read before and after (a
    write this misses still reaches every copy, at the next run)."""
    name = getattr(func, "__name__", "")
    return (name.endswith("_") and not name.endswith("__")) or name.startswith("__i") or name == "__setitem__" \
        or "out" in kwargs


# Ops whose kernels update running statistics in place without bumping the tensor's version.
_WRITES_WITHOUT_VERSION = frozenset([torch.nn.functional.batch_norm, torch.nn.functional.instance_norm,
                                     torch.batch_norm, torch.instance_norm])


def local_view(tensor: Any) -> Any:
    """What autograd sees for ``tensor`` here: a distributed variable's component for the calling
    replica (its primary in cross-replica context); any other value unchanged."""
    if isinstance(tensor, DistributedVariable):
        return tensor._view_for(context.current_replica_id())
    return tensor


#: id(component) -> weak reference to its variable (``variable_of``). Entries of a dead variable are
#: dropped by its reference's callback; a lookup also checks identity, so a reused id never matches.
_OWNERS: dict[int, weakref.ref] = {}


def _register_components(variable: "DistributedVariable") -> None:
    keys = [id(c) for c in variable._components]

    def drop(ref, keys=keys):
        for key in keys:
            if _OWNERS.get(key) is ref:
                del _OWNERS[key]

    ref = weakref.ref(variable, drop)
    for key in keys:
        _OWNERS[key] = ref


def variable_of(tensor: Any) -> Any:
    """The distributed variable whose replica copy ``tensor`` is, else ``tensor`` itself. Inside
    ``strategy.run`` a Keras ``train_step``'s ``self.w`` (a module attribute: an ``add_weight`` weight, an
    ``md.Variable``) is the replica's copy; the optimizer must update the variable, every copy, as
    TensorFlow's ``apply_gradients(zip(grads, [self.w]))`` does."""
    ref = _OWNERS.get(id(tensor))
    owner = ref() if ref is not None else None
    if owner is not None and any(c is tensor for c in owner._components):
        return owner
    return tensor


class DistributedVariable(Variable):
    """A variable with one component per replica; abstract (Mirrored or SyncOnRead)."""

    _strategy: StrategyLike   # the strategy whose scope created it
    # Whether loss.backward() reduces this variable's gradients across replicas (distribute/backward_reduce.py):
    # mirrored trainable variables, except Keras 3's (Keras's optimizer.apply sums them); set once hooked.
    _reduce_in_backward = True
    _backward_hooked = False
    _data_handed_out = False   # p.data was read in cross-replica context: the next run copies the primary
    _shared_written_in_run = False   # one shared copy written in place in a replica before its p.data = t
    _data_set_in_run = False   # p.data = t in a replica: the run's end compares the copies (sticky: an
    # update's _mark_synced in another replica thread must not hide it, or workers would disagree)
    #: Inside ``strategy.run`` a module's replica-aware dict hands out the variable itself, not the
    #: replica's copy: a Keras layer's state weight (``self.total.assign_add(...)`` in ``call``) keeps
    #: the variable API and its aggregation in every replica, as TensorFlow's layers see the variable.
    _handed_whole = False
    _agree_despite_none = False   # a Keras layer's trainable weight (aggregation NONE): copies must still agree
    _module_buffer = False     # made from a module's buffer (distribute/module_hooks.py keeps it one)
    _module_value = False      # made from a torch module's parameter or buffer: pickles as torch's (__reduce_ex__)
    _running_statistic = False   # a norm layer's running statistic: each replica's own slice's by design
    _own_updates = False   # updated by each replica from its own gradients (skip_gradients_aggregation)

    @classmethod
    def _create(cls, data: torch.Tensor, devices: Sequence[torch.device], strategy: StrategyLike, *,
                trainable: bool, name: str | None, synchronization: VariableSynchronization,
                aggregation: VariableAggregation, share_storage: bool = False):
        """Make the variable with its storage on ``devices[0]`` and one component per device.

        ``share_storage`` makes every component alias the one storage (CentralStorageStrategy).
        """
        primary = data.detach().to(devices[0])
        self = cls._from_tensor(primary, trainable=trainable, name=name,
                                synchronization=synchronization, aggregation=aggregation)
        self._strategy = strategy
        with torch.no_grad(), DisableTorchFunctionSubclass():
            components = [self.detach()]
            for device in devices[1:]:
                components.append(self.detach() if share_storage else self.detach().to(device, copy=True))
            for c in components:
                c.requires_grad_(self.requires_grad)
        self._components = tuple(components)
        _register_components(self)
        self._share_storage = share_storage
        self._synced_version = components[0]._version
        return self

    def _retype_components(self, cls: type) -> None:
        """Each plain component becomes a ``cls`` in place (md.keras's ``KerasReplicaWeight``): the same objects, so
        what is keyed by them (optimizer slots a deferred restore loaded, replica dicts) stays theirs."""
        for c in self._components:
            if type(c) is torch.Tensor:
                c.__class__ = cls   # as torch's UninitializedParameter.materialize becomes a Parameter

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        whole = WHOLE_VARIABLE.get(func) if args and isinstance(args[0], DistributedVariable) else None
        if whole is not None:   # a property of the variable, not of one replica's copy
            return whole(*args, **(kwargs or {}))
        replica_id = context.current_replica_id()
        if replica_id is None:
            return _cross_replica_call(func, args, kwargs or {})
        args = _substitute(args, replica_id)
        kwargs = _substitute(kwargs, replica_id) if kwargs else {}
        with DisableTorchFunctionSubclass():
            return func(*args, **kwargs)

    @property
    def values(self) -> tuple:
        """The per-replica components, in replica order (a write through ``p.data`` in cross-replica context reaches
        them here, or at the next run)."""
        if self._data_handed_out and context.current_replica_id() is None:
            self._sync_if_stale()
        return self._components

    @property
    def distribute_strategy(self) -> StrategyLike:
        """The strategy whose scope created the variable (``tf.distribute.DistributedValues``'s)."""
        return self._strategy

    def _copy_variable(self, replica_id: int, trainable: bool = False) -> Variable:
        """Replica ``replica_id``'s copy as an ``md.Variable`` sharing its storage (what
        ``extended.update`` hands its function, as TensorFlow hands it the component variable)."""
        with torch.no_grad(), DisableTorchFunctionSubclass():
            storage = self._components[replica_id].detach()
        name = self._md_name if replica_id == 0 else f"{self._md_name}/replica_{replica_id}"
        return Variable._from_tensor(storage, trainable=trainable, name=name, synchronization=self.synchronization,
                                     aggregation=self.aggregation)

    def _local_variables(self) -> tuple:
        """``strategy.experimental_local_results(v)``: TensorFlow's component variables, one per replica, each an
        ``md.Variable`` sharing its copy's storage (``.numpy()``, ``float``, ``print``, ``assign`` to that replica's
        copy only, ``name`` ``'v/replica_1:0'``), not the autograd leaves (whose ``numpy()`` torch refuses). ``p.grad``
        of a replica stays on the variable (``v.grad`` there)."""
        if context.current_replica_id() is None:   # a cross-replica write (load_state_dict, p.data.add_) reaches
            self._sync_if_stale()                   # every copy first, as the next run would copy it
        return tuple(self._copy_variable(r, self._md_trainable) for r in range(len(self._components)))

    def _replica_result(self, replica_id: int) -> torch.Tensor:
        """What a write in replica context returns: the replica's copy, read when used (TensorFlow returns a per-replica
        value, so ``strategy.run(lambda: v.assign_add(1.))`` is a PerReplica)."""
        return self._components[replica_id].detach()

    @property
    def grad(self):
        replica_id = context.current_replica_id()
        if replica_id is None:
            cross_replica_grads.fold(self)   # a backward outside runs (EWC's Fisher pass): every copy's
        with DisableTorchFunction():   # a plain copy's .grad: no replica random mode to pass (~1 us a read)
            return self._components[0 if replica_id is None else replica_id].grad

    @grad.setter
    def grad(self, value):
        replica_id = context.current_replica_id()
        if replica_id is not None:
            with DisableTorchFunction():
                self._components[replica_id].grad = value
            return
        cross_replica_grads.discard(self)
        for c in self._components:
            c.grad = None if value is None else value.to(c.device, copy=c is not self._components[0])

    def _local(self, replica_id: int) -> torch.Tensor:
        return self._components[replica_id]

    def _reduce_parts(self) -> list | None:
        """What ``strategy.reduce`` combines: every replica's copy (None: reduce it as a plain tensor)."""
        return list(self._components)

    def _view_for(self, replica_id: int | None) -> torch.Tensor:
        """What an op sees: the replica's component, or in cross-replica context the primary."""
        if replica_id is None:
            return self
        return self._components[replica_id]

    def _read(self) -> torch.Tensor:
        return self._view_for(context.current_replica_id())

    def _sync_if_stale(self) -> None:
        """Copy the primary into the other components if it was written outside our update paths (``load_state_dict``,
        in-place edits in cross-replica context, initialisers)."""
        version = self._components[0]._version
        if version == self._synced_version and not self._data_handed_out:
            return
        self._data_handed_out = False
        if not self._share_storage:
            with torch.no_grad():
                for c in self._components[1:]:
                    c.copy_(self._components[0], non_blocking=True)
        self._synced_version = version

    def _mark_synced(self) -> None:
        self._synced_version = self._components[0]._version

    def _copies_must_agree(self) -> bool:
        """Whether copies written in the replicas outside the update paths must stay equal (not with one shared storage;
        aggregation NONE lets replicas drift by design, except a Keras layer's trainable weight's
        (``_agree_despite_none``: its ``assign`` in a replica writes that copy, as TensorFlow's, while a torch in-place
        write that leaves the copies apart still raises); ONLY_FIRST_REPLICA takes replica 0's value at the next
        run)."""
        return not self._share_storage and (self._agree_despite_none or self.aggregation not in (
            VariableAggregation.NONE, VariableAggregation.ONLY_FIRST_REPLICA))

    def _check_replica_writes(self, unversioned: bool = False) -> None:
        """After ``strategy.run``: replica 0's copy was written in the replicas outside the update paths (a torch in-
        place op on a replica's tensor: ``p -= lr * g``, ``p.sub_(g)`` under ``no_grad``), or (``unversioned``) may have
        been through ``p.data``, which torch's version counter does not see. Equal copies are fine (every replica
        applied the same reduced gradient); copies that differ would train each replica on its own data, silently, so
        they raise (``_drifted``). Copies of other workers are compared by ``distribute/copy_agreement.py``."""
        components = self._components
        if not unversioned and components[0]._version == self._synced_version:
            return
        if self._shared_copy_written(unversioned):
            raise self._written_by_every_replica()
        if not self._copies_must_agree():
            return
        with torch.no_grad(), DisableTorchFunctionSubclass():
            first = components[0]
            differ = [r for r, c in enumerate(components[1:], 1) if not torch.equal(c.to(first.device), first)]
        if differ:
            raise self._drifted(differ[0])
        self._mark_synced()

    def _shared_copy_written(self, unversioned: bool = False) -> bool:
        """Whether the one copy the replicas share (CentralStorageStrategy) was written in place in this run (its
        version moved, or ``p.data = t`` came after such a write: ``_shared_written_in_run``, which this clears)."""
        if not (self._share_storage and len(self._components) > 1):
            return False
        written = self._shared_written_in_run or (not unversioned and self._components[0]._version != self._synced_version)
        self._shared_written_in_run = False
        return written

    def _written_by_every_replica(self) -> ValueError:
        """One copy shared by the replicas (CentralStorageStrategy) written in place in them outside the
        update paths: each replica applied its write to it (``p.add_(1)`` added 2 with 2 replicas)."""
        self._mark_synced()
        return ValueError(
            f"Variable {self._tf_name!r} was written in place inside strategy.run outside an optimizer step (such "
            f"as `p.add_(e)`, `p.sub_(lr * p.grad)`), but {type(self._strategy).__name__} keeps one copy that all "
            f"{len(self._components)} replicas share, so every replica applied its write to it. Update it with a "
            "torch.optim optimizer, write it outside strategy.run (or in "
            "md.distribute.get_replica_context().merge_call), or use MirroredStrategy, where each replica writes its "
            "own copy.")

    def _drifted(self, replica: int) -> ValueError:
        """The error for copies written outside the update paths where replica ``replica``'s (global id) differs from
        replica 0's."""
        return ValueError(
            f"Variable {self._tf_name!r} was written inside strategy.run outside an optimizer step (an in-place op "
            f"on a replica's tensor, such as `p -= lr * g`, `p.sub_(g)` or `p.data.sub_(g)`, or `p.data = t`), and "
            f"replica {replica}'s copy now differs from replica 0's: each replica applied its own gradient, so the "
            "copies drifted apart (DDP ranks drift alike). torch.autograd.grad returns each replica's own "
            "gradient, not the reduced one. Reduce it first: `grads = "
            "md.distribute.get_replica_context().all_reduce('MEAN', grads)`, or call loss.backward() (it "
            "reduces p.grad across replicas, as DDP does) and update from p.grad, or use a torch.optim optimizer.")

    def assign_component(self, replica_id: int, value: Any) -> None:
        """Write ``value`` into replica ``replica_id``'s copy only (an update rule that runs on every replica, such as
        Keras 3's, each on its own copy). A tensor of the copy's dtype and shape, as Keras's ``assign`` hands over, is
        copied as it is; anything else is converted as ``assign`` does."""
        target = self._components[replica_id]
        with torch.no_grad(), DisableTorchFunctionSubclass():
            if not (isinstance(value, torch.Tensor) and value.dtype == target.dtype and value.shape == target.shape):
                value = self._coerce(value, target)
            target.copy_(value)
        if replica_id == 0:
            self._mark_synced()

    def _apply_to(self, replica_ids: Sequence[int], op: str, value: Any) -> None:
        with torch.no_grad(), DisableTorchFunctionSubclass():
            targets = [self._components[r] for r in replica_ids]
            if self._share_storage:
                targets = targets[:1]
            for target in targets:
                _UPDATES[op](target, self._coerce(value, target, op))
        if 0 in replica_ids:
            self._mark_synced()

    def __repr__(self) -> str:
        with torch.no_grad(), DisableTorchFunctionSubclass():
            parts = []
            for i, c in enumerate(self._components):
                name = self._tf_name if i == 0 else f"{self._md_name}/replica_{i}:0"
                parts.append(f"  {i}: {_variable_repr(name, c)}")
        body = ",\n".join(parts)
        return f"{type(self).__name__}:{{\n{body}\n}}"

    def __reduce_ex__(self, protocol):
        """``torch.save(model, path)`` of a module built in the scope (super_resolution's checkpoint): a parameter or
        buffer of a torch module pickles as the plain tensor ``state_dict()`` gives (the one set of weights; a buffer's
        cross-replica read), a ``Parameter`` where it is one, so the file loads as DDP's ``torch.save(model.module,
        path)`` does, without multidev. Pickle's memo keeps tied weights one object. Other variables are refused, as
        ``md.Variable``'s."""
        if not self._module_value:
            return super().__reduce_ex__(protocol)
        value = self.detach().clone()   # (through __torch_function__: the cross-replica read)
        if not self._module_buffer:
            value = torch.nn.Parameter(value, requires_grad=self.requires_grad)
        return value.__reduce_ex__(protocol)

    def __deepcopy__(self, memo):
        """A new variable of the same strategy holding copies of every component (``nn.TransformerEncoder``'s)."""
        if id(self) in memo:
            return memo[id(self)]
        self._sync_if_stale()
        with torch.no_grad(), DisableTorchFunctionSubclass():
            new = self._strategy.extended.create_distributed_variable(
                self._components[0].detach().clone(), trainable=self._md_trainable, name=self._md_name,
                synchronization=self.synchronization, aggregation=self.aggregation)
            for mine, theirs in zip(new._components, self._components):
                if mine.data_ptr() != new._components[0].data_ptr() or mine is new._components[0]:
                    mine.copy_(theirs)
        new._mark_synced()
        for attr in ("_keras_name", "_keras_path"):   # a front end's name for it (md.keras's 'kernel')
            if attr in self.__dict__:
                setattr(new, attr, self.__dict__[attr])
        memo[id(self)] = new
        return new


AnyDistributedValue.register(DistributedVariable)   # isinstance(v, md.distribute.DistributedValues), as TF
