"""Keras 3 (``KERAS_BACKEND=torch``) models under multidev's mirrored strategies.

Keras 3 on torch keeps each weight in its own variable (``variable._value``, a
``torch.nn.Parameter``) and registers that tensor in ``layer._torch_params`` (a ParameterDict);
its forward reads the variable, not the dict. So the seam is the variable: a Keras variable
created in the scope gets a multidev distributed variable as its ``_value``.
Every op Keras runs on it inside ``strategy.run`` then sees the calling replica's copy (the
distributed variable's ``__torch_function__``), ``model.parameters()`` yields the distributed
variables (so ``torch.optim`` works as for any module), and Keras optimizers sum the gradients
across replicas before applying them, as TensorFlow's do (on replicas sharing one CPU each variable's
owner sums and updates it once: ``keras3_split``). Custom loops and Keras's own
``fit``/``evaluate``/``predict`` and ``*_on_batch`` work on ``MirroredStrategy`` and ``MultiWorkerMirroredStrategy``
(step functions in ``keras3_fit``; across workers, shuffled ``fit`` starts each epoch from the
chief's RNG state so every worker reads the same global batches).

Refused with a clear error (never trained wrong): Keras 3 on another backend, Keras versions
outside the checked range, other distributing strategies, Keras variables created inside
``strategy.run`` or outside the scope of a model built in it.

A model's own ``train_step``/``test_step`` runs on every replica (``keras3_custom_step``); losses added in
``call`` are kept per replica and layers or optimizers built after leaving their scope still use its strategy
(``keras3_layers``); ``md.train.Checkpoint`` tracks Keras 3 models and optimizers (``keras3_checkpoint``).

Private Keras names are checked at first use (``_keras_names``, against Keras 3.15.1; ``variable._value`` and
``Layer._losses`` are read in ``keras3_*``); keras is never imported here, only found in ``sys.modules``.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
from typing import Any, Callable

import torch
from torch.nn.modules import module as torch_module

from multidev import autodiff
from multidev._core.enums import VariableAggregation, VariableSynchronization
from multidev.distribute import front_end, replica_update
from multidev.distribute.mirrored_strategy import MirroredStrategy
from multidev.distribute.multi_worker_mirrored_strategy import MultiWorkerMirroredStrategy
from multidev.integrations import (keras3_batch_norm, keras3_checkpoint, keras3_custom_step, keras3_datasets,
                                   keras3_dropout, keras3_layers, keras3_loss_scale, keras3_random, keras3_rnn_dropout,
                                   keras3_split, keras3_tape, keras3_torch_modules)
from multidev.train import trackables
from multidev.values import context
from multidev.values.gradients import LocalGrads
from multidev.values.variables import DistributedVariable

_replica_env = context.replica_env   # the ContextVar's own get: read ~50 times a step

CHECKED_VERSIONS = ("3.15.1",)
SUPPORTED_RANGE = ((3, 15), (3, 16))  # >=3.15, <3.16: pyproject's multidev[keras3]
_state = {"checked": False, "patched": False}


def _keras3() -> Any | None:
    """The imported ``keras`` package if it is Keras 3 (None when keras was not imported or is Keras 2)."""
    keras = sys.modules.get("keras")
    version = str(getattr(keras, "__version__", ""))
    if keras is None or not version.startswith("3."):
        return None
    return keras


def _check_keras(keras: Any, strategy: Any) -> None:
    """Refuse Keras 3 on another backend or outside the checked version range."""
    backend = keras.backend.backend()
    where = f"entering {type(strategy).__name__}.scope()"
    if backend != "torch":
        raise ValueError(
            f"Keras 3 is imported with backend {backend!r}, which multidev strategies cannot distribute "
            f"({where}). Set KERAS_BACKEND=torch before importing keras "
            "(e.g. os.environ['KERAS_BACKEND'] = 'torch' at the top of the program), or use md.keras."
        )
    version = tuple(int(p) for p in keras.__version__.split(".")[:2] if p.isdigit())
    low, high = SUPPORTED_RANGE
    if not low <= version < high:
        raise NotImplementedError(
            f"Keras {keras.__version__!r} is not supported by multidev ({where}): supported "
            f"keras>={low[0]}.{low[1]},<{high[0]}.{high[1]} (checked: {', '.join(CHECKED_VERSIONS)}). "
            "Install a supported version: pip install 'multidev[keras3]'."
        )


def _on_scope_entry(strategy: Any) -> None:
    """Scope-entry hook: check the imported Keras 3 once and install the variable seam."""
    if _state["checked"]:
        return
    keras = _keras3()
    if keras is None:
        return
    _check_keras(keras, strategy)
    _patch(keras)
    _state["checked"] = True


# --- the seam: Keras variables created in a MirroredStrategy's scope are distributed ---------------

def _distributing_strategy() -> Any | None:
    strategy = context.current_scope_strategy()
    return strategy if strategy is not None and strategy.extended.distributes_variables else None


_UNSUPPORTED_WHY = {
    "CentralStorageStrategy": "its variables are stored once while Keras 3's optimizers update every replica's "
                              "copy (each replica would apply the update to the one storage)",
    "ParameterServerStrategy": "its variables live on parameter servers and its steps are scheduled with "
                               "ClusterCoordinator, which Keras 3's fit and optimizers do not know",
}


def _require_supported(strategy: Any, what: str) -> None:
    if type(strategy) not in (MirroredStrategy, MultiWorkerMirroredStrategy):
        why = _UNSUPPORTED_WHY.get(type(strategy).__name__, "it is not a mirrored strategy")
        raise NotImplementedError(
            f"{what} in the scope of {type(strategy).__name__}: {why}. multidev distributes Keras 3 models only "
            "under md.distribute.MirroredStrategy and MultiWorkerMirroredStrategy (fit/evaluate/predict and "
            "custom training loops; docs/keras3_parity.md). Use one of those, or md.keras (which supports "
            f"{type(strategy).__name__})."
        )


def _keras_aggregation(name: str) -> VariableAggregation:
    return VariableAggregation[name.upper()]   # "none", "mean", "sum", "only_first_replica"


def _distribute_value(variable: Any, strategy: Any) -> DistributedVariable:
    """The distributed variable holding ``variable``'s value: trainable weights are mirrored (kept equal,
    gradients summed); other state (statistics, metrics, optimizer slots, counters) is kept per replica
    and reduced when read outside ``strategy.run``, as TensorFlow's ON_READ variables."""
    param = variable._value
    aggregation = _keras_aggregation(variable.aggregation)
    if variable.trainable:
        sync, aggregation = VariableSynchronization.ON_WRITE, VariableAggregation.SUM
    else:
        sync = VariableSynchronization.ON_READ
        floating = param.is_floating_point()
        if aggregation is VariableAggregation.NONE or (not floating and aggregation is VariableAggregation.MEAN):
            aggregation = VariableAggregation.MEAN if floating else VariableAggregation.ONLY_FIRST_REPLICA
    var = strategy.extended.create_distributed_variable(param.detach(), trainable=variable.trainable, name=variable.path,
                                                        synchronization=sync, aggregation=aggregation)
    var.requires_grad_(variable.trainable)
    var._reduce_in_backward = False   # Keras's optimizer.apply sums the gradients, not loss.backward()
    if sync is VariableSynchronization.ON_READ and aggregation is VariableAggregation.SUM:
        for i in range(strategy.extended.replica_offset == 0, len(var.values)):   # all but the chief's: read once
            var.assign_component(i, torch.zeros_like(param))
    return var


def _initialize(original: Any, variable: Any, value: Any) -> None:
    """``Variable._initialize``: in a distributing scope, replace the new Parameter by a distributed variable."""
    strategy = _distributing_strategy()
    in_replica = context.current_replica_id() is not None
    if strategy is not None and in_replica and strategy.extended.num_local_replicas > 1:
        if variable.name == "seed_generator_state" and not variable.trainable:
            return original(variable, value)  # keras.random's per-thread global seed generator: replica-local
        raise ValueError(
            f"Keras 3 variable {variable.path!r} created inside strategy.run (replica context) by a layer made "
            "there or outside a strategy's scope: create the model and its layers in strategy.scope() (they may "
            "be built later, even by their first call inside strategy.run), or build it there (optimizer.build "
            "for variables an optimizer adds itself)."
        )
    original(variable, value)
    if strategy is None and not in_replica:  # made by a layer created in a scope, initialized after it
        strategy = keras3_layers.variable_strategy(variable)
    if strategy is not None and not in_replica:
        _require_supported(strategy, f"Keras 3 variable {variable.path!r} created")
        variable._value = _distribute_value(variable, strategy)


def _direct_assign(original: Any, variable: Any, value: Any) -> None:
    """``Variable._direct_assign``: outside ``strategy.run`` write every copy; inside, the replica's own."""
    dv = variable._value
    if not isinstance(dv, DistributedVariable):
        return original(variable, value)
    env = _replica_env()
    if env is None:
        dv.assign(value)
    else:
        dv.assign_component(env.replica_id, value)


def _replica_value(variable_cls: type, in_stateless_scope: Any) -> None:
    """``Variable.value`` inside ``strategy.run`` is the calling replica's copy itself (a plain leaf tensor),
    so the ops Keras runs on it pay nothing per op; elsewhere Keras's own property runs."""
    prop = variable_cls.value

    def fget(variable: Any) -> Any:  # read ~50 times a step: the cheapest test first
        dv = variable._value
        if isinstance(dv, DistributedVariable):
            env = _replica_env()
            if env is not None and not in_stateless_scope():
                return variable._maybe_autocast(dv._view_for(env.replica_id))
        return prop.fget(variable)

    variable_cls.value = property(fget, prop.fset, doc=prop.__doc__)


def _set_trainable(variable_cls: type) -> None:
    """``Variable.trainable = flag`` also sets ``requires_grad`` on every replica's copy (Keras sets it on
    ``_value`` only, which for a distributed variable is replica 0's storage, not what replicas differentiate)."""
    prop = variable_cls.trainable

    def fset(variable: Any, value: bool) -> None:
        prop.fset(variable, value)
        if isinstance(variable._value, DistributedVariable):
            for component in variable._value.values:
                component.requires_grad_(bool(value))

    variable_cls.trainable = property(prop.fget, fset, doc=prop.__doc__)


def _apply(original: Any, optimizer: Any, grads: Any, trainable_variables: Any = None) -> Any:
    """``Optimizer.apply`` inside ``strategy.run``: the update engine (``replica_update``, plan from
    ``keras3_split``) sums the gradients across replicas (TensorFlow's ``apply_gradients`` in replica context
    does the same) and runs Keras's own ``apply`` with the sums: each variable's owner on replicas sharing one
    CPU (it then copies values and slots out), elsewhere every replica on its own copies."""
    env = context.replica_env()
    if env is None or env.num_replicas_in_sync == 1:
        return original(optimizer, grads, trainable_variables)
    ctx = env.replica_context
    if not optimizer.built:  # Keras builds it on the first apply: once, in cross-replica context
        ctx.merge_call(keras3_split.build_optimizer, args=(optimizer, list(trainable_variables or ())))
    if type(env.step) is keras3_custom_step.StepState:   # a model's own train_step on a replica's slice
        grads = [None if g is None else g * env.step.shares[env.replica_id] for g in grads]
    elif not keras3_loss_scale.IN_KERAS_STEP.get():   # a custom loop's own .grad tensors: the engine sums in place
        grads = [None if g is None else g.clone() for g in grads]
    grads = list(grads)
    variables = optimizer._trainable_variables if trainable_variables is None else list(trainable_variables)
    plain = [v.path for v in variables if not isinstance(v._value, DistributedVariable)]
    if plain:  # one copy shared by every replica: each would apply the (summed) update to it
        raise ValueError(
            f"Keras optimizer {optimizer.name!r} applied inside {type(env.strategy).__name__}.run to variables "
            f"that are not distributed ({plain[:3]}): the model was created outside the strategy's scope. "
            "Create the model (and optimizer) in strategy.scope()."
        )
    if len(grads) != len(variables):
        raise ValueError(f"Keras optimizer {optimizer.name!r}.apply() got {len(grads)} gradients for {len(variables)} "
                         "variables inside strategy.run; pass one gradient (or None) per variable.")
    plan = keras3_split.plan_for(optimizer, variables, env.strategy, adopt=_distribute_for)
    plan.step(env.replica_id, LocalGrads(tuple(grads)),
              functools.partial(keras3_split.apply_sums, original, optimizer, variables))
    return None


def _distribute_for(strategy: Any, variable: Any) -> DistributedVariable:
    """A variable made outside the scope of ``strategy`` distributed in it (``keras3_split.adopt_optimizer``)."""
    _require_supported(strategy, f"Keras 3 optimizer variable {variable.path!r} distributed")
    return _distribute_value(variable, strategy)


def loss_tracker(model: Any) -> Any:
    """The ``Mean`` metric Keras's train/test steps feed the loss to (private ``_loss_tracker``)."""
    try:
        return model._loss_tracker
    except AttributeError as exc:
        raise RuntimeError(
            f"keras.Model._loss_tracker is missing in Keras {sys.modules['keras'].__version__!r}; multidev's "
            f"Keras 3 fit was checked against Keras {', '.join(CHECKED_VERSIONS)}."
        ) from exc


def _wrap_method(owner: type, name: str, wrapper: Any) -> None:
    original = getattr(owner, name)

    @functools.wraps(original)
    def method(self, *args, **kwargs):
        return wrapper(original, self, *args, **kwargs)

    method.__signature__ = inspect.signature(original)  # Keras reads Layer.__init__'s (getfullargspec)
    setattr(owner, name, method)


def _keras_names(keras: Any) -> tuple:
    """The Keras classes the seam patches; a missing one fails loudly (the seam was checked on 3.15.1)."""
    try:
        from keras.src.backend.torch.core import Variable  # private: the torch backend's variable
        from keras.src.backend.common.stateless_scope import in_stateless_scope
        for attr in ("_initialize", "_direct_assign", "_maybe_autocast"):
            getattr(Variable, attr)
        getattr(keras.layers.Layer, "_maybe_build")  # keras3_layers.maybe_build
        getattr(keras.Model, "_compute_loss")  # keras3_fit: an override of compute_loss without `training`
        getattr(keras.layers.Layer, "_flatten_layers")  # keras3_batch_norm
        getattr(keras.layers.BatchNormalization, "_moments")  # keras3_batch_norm.moments
        getattr(keras3_rnn_dropout.dropout_rnn_cell(), "_create_dropout_mask")
        torch_random = importlib.import_module("keras.src.backend.torch.random")   # keras3_random
        for name in (*keras3_random.DRAWS, "dropout"):   # keras3_dropout too
            getattr(torch_random, name)
        for name in ("scale_loss_for_distribution", "reduce_values"):   # keras3_loss_scale
            getattr(importlib.import_module("keras.src.losses.loss"), name)
        if not isinstance(Variable.__dict__.get("value"), property):
            raise AttributeError("keras.src.backend.torch.core.Variable.value is not a property")
        if not isinstance(Variable.__dict__.get("trainable"), property):
            raise AttributeError("keras.src.backend.torch.core.Variable.trainable is not a property")
        optimizers = (keras.optimizers.Optimizer, keras.optimizers.LossScaleOptimizer)
        getattr(optimizers[1], "check_finite")
        for name in keras3_split.SPLIT_OPTIMIZERS:   # the torch backend's classes of Keras's built-in optimizers
            replica_update.register_elementwise(getattr(
                importlib.import_module(f"keras.src.backend.torch.optimizers.torch_{name.lower()}"), name))
        return Variable, in_stateless_scope, optimizers, keras.Model
    except (ImportError, AttributeError) as exc:
        raise RuntimeError(
            f"Keras {keras.__version__!r} lacks a name multidev's Keras 3 seam needs ({exc}); it was checked "
            f"against Keras {', '.join(CHECKED_VERSIONS)}: pip install 'multidev[keras3]'."
        ) from exc


def _patch(keras: Any) -> None:
    if _state["patched"]:
        return
    from multidev.integrations import keras3_trainer  # (it imports this module)

    variable_cls, in_stateless_scope, optimizer_classes, model_cls = _keras_names(keras)
    _wrap_method(variable_cls, "_initialize", _initialize)
    keras3_torch_modules.install(_wrap_method, variable_cls)   # around _initialize
    _wrap_method(variable_cls, "_direct_assign", _direct_assign)
    _set_trainable(variable_cls)
    _replica_value(variable_cls, in_stateless_scope)
    _wrap_method(optimizer_classes[0], "apply", _apply)
    _wrap_method(optimizer_classes[1], "apply", functools.partial(keras3_split.apply_loss_scaled, _distribute_for))
    _wrap_method(optimizer_classes[1], "check_finite", keras3_split.finite_everywhere)
    _wrap_method(optimizer_classes[0], "add_variable_from_reference", keras3_split.add_variable_from_reference)
    for reduction in (keras.metrics.Mean, keras.metrics.Sum):
        _wrap_method(reduction, "update_state", keras3_loss_scale.weighted_mean_update)
    _wrap_method(keras.random.SeedGenerator, "next", keras3_random.replica_seed)
    remember = functools.partial(keras3_layers.init, _distributing_strategy)
    create_in_scope = functools.partial(keras3_layers.add_weight, _distributing_strategy)
    for owner, creates in ((keras.layers.Layer, "add_weight"), (optimizer_classes[0], "add_variable")):
        _wrap_method(owner, "__init__", remember)
        _wrap_method(owner, creates, create_in_scope)
    _wrap_method(keras.layers.Layer, "_maybe_build", keras3_layers.maybe_build)
    _wrap_method(keras.layers.BatchNormalization, "__init__", keras3_batch_norm.init)
    _wrap_method(keras.layers.BatchNormalization, "_moments", keras3_batch_norm.moments)
    keras3_dropout.install(importlib.import_module("keras.src.backend.torch.random"))
    keras3_rnn_dropout.install(_wrap_method)
    keras3_random.install(importlib.import_module("keras.src.backend.torch.random"), keras.random.SeedGenerator)
    keras3_loss_scale.install(importlib.import_module("keras.src.losses.loss"))
    keras3_layers.per_replica_losses(keras.layers.Layer)
    keras3_datasets.install(keras)
    for name in ("fit", "evaluate", "predict", "train_on_batch", "test_on_batch", "predict_on_batch"):
        _wrap_method(model_cls, name, functools.partial(keras3_trainer.trainer, name))
    _state["patched"] = True


# --- safety net: a Keras layer registering weights that are not distributed -------------------------

def _on_module(module: torch.nn.Module, name: str, submodule: Any) -> None:
    """Global module-registration hook: refuse a Keras 3 layer whose weights this seam did not distribute
    (created outside the scope, or before keras was checked) when it registers them in a distributing scope."""
    if name != "_torch_params":  # keras.src.backend.torch.layer.TorchLayer._track_variables
        return None
    keras = _keras3()
    if keras is None or not isinstance(module, keras.layers.Layer):
        return None
    strategy = _distributing_strategy()
    if strategy is None:
        return None
    _on_scope_entry(strategy)
    _require_supported(strategy, f"Keras 3 layer {module.name!r} built")
    plain = [v.path for v in module.variables if not isinstance(v._value, DistributedVariable)]
    if plain:
        where = ("built inside strategy.run" if context.current_replica_id() is not None
                 else f"uses variables created outside {type(strategy).__name__}'s scope")
        raise NotImplementedError(
            f"Keras 3 layer {module.name!r} ({type(module).__name__}) {where} ({plain[:3]}): they cannot be "
            "distributed, and training them would update one copy while the replicas read others. Create and "
            "build all layers and the model inside strategy.scope() (after importing keras)."
        )
    return None


class _Keras3FrontEnd:
    """Keras 3 as a ``front_end.FrontEnd``: checks and patches Keras at scope entry; while strategies live,
    the module-registration safety net above (the refusal of torch.optim steps inside a Keras model's own
    step lives only while that step runs: ``keras3_custom_step.step_function``)."""

    name = "keras3"

    def on_scope_entry(self, strategy: Any) -> None:
        _on_scope_entry(strategy)

    def install(self) -> Callable[[], None]:
        handle = torch_module.register_module_module_registration_hook(_on_module)
        return handle.remove


FRONT_END = _Keras3FrontEnd()


def register() -> None:
    """Join strategies as a front end and let checkpoints read Keras 3 variables (idempotent); registers
    nothing in torch (strategies install ``FRONT_END``'s hooks while they live)."""
    front_end.register(FRONT_END)
    trackables.register_tensor_source(keras3_checkpoint.accepts, keras3_checkpoint.tensors)
    autodiff.register_variable_source(keras3_tape.accepts, keras3_tape.tensor_of)
    if _keras3() is not None:   # imported before multidev: md.data datasets feed its fit at once (if they can)
        keras3_datasets.install(_keras3(), quiet=True)
