"""Optimizer: Keras's optimizer API over a lazily created ``torch.optim`` optimizer.

Path of one update (each step a small method a strategy can wrap): ``apply_gradients(grads_and_vars)``
makes this replica's ``LocalGrads``; with clipping, ``_aggregate_gradients`` sums them first (Keras sums,
then clips; ``SummedGrads``) and ``_clip`` clips the sums; ``_apply`` hands them to the update plan
(``distribute/replica_update.py``: identity without a strategy; it sums ``LocalGrads`` as its plan does,
a split update only where each gradient is applied), which runs the update rule at the learning rate
read at the start of ``apply_gradients`` and publishes; then ``_increment_iterations``.
``skip_gradients_aggregation=True`` applies each replica's own gradients to its own copies
(``_apply_own``). The update rule is a ``torch.optim`` optimizer implementing Keras's formulas
(``rules.py``); on distributed variables each local replica steps its own one over its own copies
(``replica_rules.py``: plain torch optimizers, no per-thread views, no global step hook);
checkpoints see one canonical state.

``learning_rate`` is a variable as in Keras (``.numpy()``, ``.assign(x)``, ``float(...)``): a plain
float32 ``md.Variable`` on the host, never a distributed one (every replica reads the same rate).

Example:
    opt = md.keras.optimizers.Adam(learning_rate=1e-3, clipnorm=1.0)
    opt.apply_gradients(zip(grads, model.trainable_variables))
"""

from __future__ import annotations

import functools
import re
import threading

import torch

from multidev.keras.optimizers import cross_replica, schedules
from multidev.keras.optimizers.learning_rate import _float_lr, _is_schedule, _lr_value
from multidev.keras.optimizers.ema import MovingAverages
from multidev.keras.optimizers.replica_rules import ReplicaRules
from multidev.keras.optimizers.rules import KerasRule, slot_names
from multidev.values.context import current_replica_id
from multidev.values.gradients import LocalGrads, SummedGrads
from multidev.values.variables import Variable, local_view, variable_of


class Optimizer:
    """Base class; subclasses define ``_torch_class`` (an update rule) and ``_torch_kwargs()``."""

    _torch_class: type = None

    def __init__(self, learning_rate=0.001, weight_decay=None, clipnorm=None, clipvalue=None, global_clipnorm=None,
                 use_ema=False, ema_momentum=0.99, ema_overwrite_frequency=None, name=None, **kwargs):
        kwargs.pop("jit_compile", None)
        _check_options(kwargs, clipnorm, clipvalue, global_clipnorm)
        self.use_ema, self.ema_momentum, self.ema_overwrite_frequency = bool(use_ema), ema_momentum, ema_overwrite_frequency
        self._ema = MovingAverages(ema_momentum, ema_overwrite_frequency) if use_ema else None
        self.name = name or type(self).__name__
        self._learning_rate = _lr_value(learning_rate)
        self.weight_decay = weight_decay
        self.clipnorm, self.clipvalue, self.global_clipnorm = clipnorm, clipvalue, global_clipnorm
        self.iterations = torch.zeros((), dtype=torch.int64, device="cpu")   # host scalars: read every step
        self._build_lock = threading.Lock()               # replicas may reach the first update together
        self._rules = ReplicaRules()                      # the update rule: one torch optimizer per replica

    # ----- learning rate ----------------------------------------------------------------------
    @property
    def learning_rate(self):
        """The learning-rate variable (``.numpy()``, ``.assign(0.01)``); with a schedule, its value
        at ``iterations`` as a float32 scalar tensor, as Keras returns."""
        lr = self._learning_rate
        if isinstance(lr, Variable):
            return lr
        return torch.tensor(self._current_lr(), dtype=torch.float32)

    @learning_rate.setter
    def learning_rate(self, value):
        if _is_schedule(value):
            self._learning_rate = value
        elif isinstance(self._learning_rate, schedules.LearningRateSchedule):
            raise TypeError(f"This optimizer was created with a `LearningRateSchedule` object as its `learning_rate` "
                            f"constructor argument, hence its learning rate is not settable (received {value!r}). "
                            "If you need the learning rate to be settable, create the optimizer with a float "
                            "`learning_rate`.")
        elif isinstance(self._learning_rate, Variable):
            self._learning_rate.assign(_float_lr(value))
        else:
            self._learning_rate = _lr_value(value)

    def _current_lr(self) -> float:
        """This step's learning rate as a Python float (what the update rule reads)."""
        lr = self._learning_rate
        if isinstance(lr, Variable):
            return torch.Tensor.item(lr)
        if isinstance(lr, schedules.LearningRateSchedule):
            return float(lr(int(self.iterations)))
        return float(lr())

    lr = learning_rate

    # ----- public API -------------------------------------------------------------------------
    def minimize(self, loss, var_list, tape=None):
        """Compute gradients of ``loss`` w.r.t. ``var_list`` (autograd) and apply them."""
        var_list = list(var_list() if callable(var_list) else var_list)
        if callable(loss) and not isinstance(loss, torch.Tensor):
            loss = loss()
        # Under a strategy, differentiate with respect to this replica's copies of the variables.
        targets = [local_view(v) for v in var_list]
        grads = torch.autograd.grad(loss, targets, allow_unused=True)
        for target, g in zip(targets, grads):
            target.grad = g   # made here, used once: as the copies' own .grad the step may sum into them in place
        self.apply_gradients(zip(grads, var_list))

    def apply(self, grads, trainable_variables=None):
        """Keras 3's form of ``apply_gradients``: the gradients and the variables as two lists
        (``trainable_variables`` None: the variables the optimizer was built with, in order).

        Example (a torch-style ``train_step``):
            loss.backward()
            self.optimizer.apply([v.grad for v in self.trainable_weights], self.trainable_weights)
        """
        grads = list(grads)
        if trainable_variables is None:
            trainable_variables = self._rules.variables
            if not trainable_variables:
                raise ValueError(f"{type(self).__name__}.apply(grads) without `trainable_variables` needs a built "
                                 "optimizer: call optimizer.build(model.trainable_variables) first, or pass "
                                 "apply(grads, model.trainable_variables).")
        trainable_variables = list(trainable_variables)
        if len(grads) != len(trainable_variables):
            raise ValueError(f"{type(self).__name__}.apply() got {len(grads)} gradients for "
                             f"{len(trainable_variables)} variables; pass one gradient (or None) per variable.")
        return self._apply_pairs(zip(grads, trainable_variables))

    def apply_gradients(self, grads_and_vars, name=None, skip_gradients_aggregation=False):
        """Apply ``(gradient, variable)`` pairs (None gradients skipped); as in Keras 3, through a subclass's own
        ``apply(grads, trainable_variables)`` (keras.io's gradient centralization overrides it)."""
        if type(self).apply is not Optimizer.apply and not skip_gradients_aggregation:
            pairs = list(grads_and_vars)
            return self.apply([g for g, _ in pairs], [v for _, v in pairs])
        return self._apply_pairs(grads_and_vars, skip_gradients_aggregation)

    def _apply_pairs(self, grads_and_vars, skip_gradients_aggregation=False):
        """The update of ``(gradient, variable)`` pairs (None gradients skipped)."""
        # a replica's copy (`self.w` read in a replica's train_step: a plain tensor, or a KerasReplicaWeight)
        # stands for its variable
        pairs = [(g, variable_of(v) if isinstance(v, torch.Tensor) and not isinstance(v, Variable) else v) for g, v in grads_and_vars if g is not None]
        if not pairs:
            raise ValueError("No gradients provided for any variable. Check that the loss depends on the "
                             "variables passed (and that they require grad).")
        lr = self._current_lr()    # read before aggregation, so every replica uses this step's rate
        if skip_gradients_aggregation:   # TensorFlow's: each replica applies its own to its own copies
            self._apply_own(_grads(pairs, LocalGrads), [v for _, v in pairs], lr)
        elif self._clips():              # Keras sums, then clips
            pairs = self._clip(self._aggregate_gradients(pairs))
            self._apply(_grads(pairs, SummedGrads), [v for _, v in pairs], lr)
        else:                            # the plan sums (a split update where each gradient is applied)
            self._apply(_grads(pairs, LocalGrads), [v for _, v in pairs], lr)
        return self.iterations

    def _clips(self) -> bool:
        return self.clipvalue is not None or self.clipnorm is not None or self.global_clipnorm is not None

    def _update_plan(self, variables: list):
        """The update plan of these variables (``replica_update.UpdatePlan``), chosen once for the update
        rule and its variables."""
        self._ensure_built(variables)
        return self._rules.plan

    def _ensure_built(self, variables: list) -> None:
        if not self._rules.tracks(variables):
            self.build(variables)

    def _slot_key(self):
        """Which replica's update rule (slot set) this call steps: the replica id (None: replica 0's)."""
        return current_replica_id()

    @property
    def _torch_opt(self):
        """The calling replica's update rule (a plain ``torch.optim`` optimizer), None before ``build``."""
        return self._rules.rule_for(self._slot_key()) if self._rules.rules else None

    def build(self, var_list):
        """Create the torch optimizer (its slots are created lazily by torch) over ``var_list``."""
        with self._build_lock:
            self._build(list(var_list))

    def _build(self, params: list) -> None:
        known = {id(v) for v in self._rules.variables}
        self._building = self._rules.variables + [v for v in params if id(v) not in known]   # the rules' order
        self._rules = self._rules.with_variables(params, self._new_rule)   # published whole

    def _new_rule(self, params: list) -> torch.optim.Optimizer:
        """One replica's update rule over its tensors, with this optimizer's hyperparameters."""
        rule = self._torch_class(params, lr=self._current_lr(), **self._torch_kwargs())
        if self._no_decay is not None and isinstance(rule, KerasRule):
            rule.no_decay = {id(p) for p, v in zip(params, self._building) if self._no_decay(v)}
        return rule

    _no_decay = None    # exclude_from_weight_decay's test of a variable

    def exclude_from_weight_decay(self, var_list=None, var_names=None):
        """Keras 3's: no weight decay for the variables of ``var_list`` and those whose name matches one
        of ``var_names`` (regular expressions searched in the name). Call it before the first update."""
        if self._rules.rules:
            raise ValueError("`exclude_from_weight_decay()` can only be configured before the optimizer is built.")
        ids = {id(v) for v in var_list or ()}
        pattern = re.compile("|".join(set(var_names))) if var_names else None
        self._no_decay = lambda v: id(v) in ids or (pattern is not None and pattern.search(_name(v)) is not None)

    @property
    def variables(self) -> list:
        """Optimizer state tensors: ``iterations``, the learning-rate variable (unless a schedule
        sets the rate), then the update rule's per-parameter slots."""
        out = [self.iterations] + ([self._learning_rate] if isinstance(self._learning_rate, Variable) else [])
        for _, entry in self._rules.canonical_state():
            out += [t for t in entry.values() if isinstance(t, torch.Tensor)]
        return out

    # ----- the update path (strategy hook points) ---------------------------------------------
    def _aggregate_gradients(self, grads_and_vars):
        """Sum gradients across replicas (the update plan's ``sum_all``); identity without a strategy.
        Returns ``(summed gradient, variable)`` pairs."""
        variables = [v for _, v in grads_and_vars]
        plan = self._update_plan(variables)
        summed = plan.sum_all(current_replica_id(), _grads(grads_and_vars, LocalGrads), variables)
        return [(summed.tensors[self._rules.position(v)], v) for v in variables]

    def _clip(self, grads_and_vars):
        """Keras clipping (one kind at most), in TensorFlow's order: ``g * clipnorm / max(|g|, clipnorm)``;
        ``g * (c * min(1 / global_norm, 1 / c))`` with the global norm the root of the summed squares."""
        if self.clipnorm:
            return [(g * self.clipnorm / torch.sqrt(torch.square(g).sum()).clamp_min(self.clipnorm), v)
                    for g, v in grads_and_vars]
        if self.global_clipnorm:
            c = self.global_clipnorm
            norm = torch.sqrt(torch.stack([torch.square(g).sum() for g, _ in grads_and_vars]).sum())
            scale = c * torch.minimum(1.0 / norm, torch.tensor(1.0 / c, dtype=norm.dtype))
            return [(g * scale, v) for g, v in grads_and_vars]
        if self.clipvalue:
            return [(g.clamp(-self.clipvalue, self.clipvalue), v) for g, v in grads_and_vars]
        return grads_and_vars

    def _apply(self, grads, variables, lr=None):
        """One step of the update plan with ``grads`` (``LocalGrads``: the plan sums them; ``SummedGrads``:
        summed already) of ``variables`` at rate ``lr`` (Keras's weight decay first, inside the rule), then
        count the iteration."""
        self._step(grads, variables, lr, own=False)

    def _apply_own(self, grads, variables, lr=None):
        """Each replica applies its own ``LocalGrads`` to its own copies (``skip_gradients_aggregation``)."""
        self._step(grads, variables, lr, own=True)

    def _step(self, grads, variables, lr, own: bool):
        plan = self._update_plan(variables)
        rules, replica = self._rules, current_replica_id()
        if replica is None and rules.strategy is not None:   # a custom loop without strategy.run
            cross_replica.apply_on_every_replica(self, rules.strategy, grads, variables, lr)
            return
        lr = self._current_lr() if lr is None else float(lr)   # a caller may hand the rate variable
        run = functools.partial(rules.run_rule, replica, lr, self.weight_decay or 0.0)
        iteration = None if self._ema is None else int(self.iterations)   # use_ema's 0-based step
        if own:
            plan.apply_own(replica, grads, run, variables)
        else:
            plan.step(replica, grads, run, variables)
        if self._ema is not None:
            self._ema.update(variables, iteration)
        self._increment_iterations()

    def finalize_variable_values(self, var_list):
        """With ``use_ema``, give the variables their moving averages (Keras calls this at the end of ``fit``)."""
        if self._ema is not None:
            self._ema.overwrite(list(var_list))

    def _increment_iterations(self):
        """Count one applied step: once per step, not once per replica (replica 0 counts)."""
        if current_replica_id() in (None, 0):
            self.iterations.add_(1)

    def _torch_kwargs(self) -> dict:
        return {}

    # ----- config and state ---------------------------------------------------------------------
    def get_config(self) -> dict:
        lr = self._learning_rate
        return {"name": self.name,
                "learning_rate": schedules.serialize(lr) if isinstance(lr, schedules.LearningRateSchedule)
                else self._current_lr(),
                "weight_decay": self.weight_decay, "clipnorm": self.clipnorm, "clipvalue": self.clipvalue,
                "global_clipnorm": self.global_clipnorm, "use_ema": self.use_ema, "ema_momentum": self.ema_momentum,
                "ema_overwrite_frequency": self.ema_overwrite_frequency}

    @classmethod
    def from_config(cls, config, custom_objects=None):
        """Keras 3's: a schedule in the config is rebuilt, a custom one from ``custom_objects`` (name -> class)
        or the registered ones."""
        config = dict(config)
        if isinstance(config.get("learning_rate"), dict):
            config["learning_rate"] = schedules.deserialize(config["learning_rate"], custom_objects)
        return cls(**config)

    def state_tensors(self, var_names: dict[int, str]) -> dict[str, torch.Tensor]:
        """Flat ``{name: tensor}`` of the optimizer state, slots keyed by their variable's name."""
        out = {"iterations": self.iterations.clone()}
        for p, entry in self._rules.canonical_state():   # each variable's owner's (replica 0's) slots
            for slot, t in entry.items():
                if isinstance(t, torch.Tensor) and id(p) in var_names:
                    out[f"{var_names[id(p)]}/{slot}"] = t.detach().clone()
        return out

    def slot_names(self) -> frozenset | None:
        """The state this optimizer keeps per variable (``{'momentum', 'velocity', 'step'}`` for Adam), so
        a checkpoint tells its slots from another optimizer's; None when the rule cannot say."""
        return slot_names(self._torch_class, self._current_lr(), self._torch_kwargs())

    def load_state_tensors(self, tensors: dict[str, torch.Tensor], variables: dict[str, torch.Tensor]) -> None:
        """Restore ``state_tensors`` output onto ``variables`` (name -> parameter)."""
        referenced = {key.rsplit("/", 1)[0] for key in tensors if key != "iterations"}
        unknown = sorted(referenced - set(variables))
        if unknown:
            raise ValueError(f"Optimizer state refers to unknown variables {unknown}; it was saved for another model.")
        if referenced:
            self.build([variables[k] for k in sorted(referenced)])
        self.iterations.copy_(tensors["iterations"])
        entries: dict = {}
        for key, t in tensors.items():
            if key == "iterations":
                continue
            var_name, slot = key.rsplit("/", 1)
            p = variables[var_name]
            if id(p) not in entries:
                entries[id(p)] = (p, dict(self._rules.entry(p)))
            value = t.clone() if t.dim() == 0 else t.to(p.device).clone()   # scalar counters stay on the host
            entries[id(p)][1][slot] = value
        for p, entry in entries.values():   # every replica's copy (its owner's alone under a split update)
            self._rules.load(p, entry)


_NOT_IMPLEMENTED = ("gradient_accumulation_steps", "loss_scale_factor")


def _check_options(kwargs: dict, clipnorm, clipvalue, global_clipnorm) -> None:
    """Keras 3's refusals: unknown arguments (ValueError) and more than one kind of clipping."""
    missing = sorted(k for k in kwargs if k in _NOT_IMPLEMENTED and kwargs[k] is not None)
    if missing:
        raise NotImplementedError(f"Keras 3 optimizers take {missing}; md.keras's do not (run the program with "
                                  "Keras 3 on multidev, or accumulate gradients in a custom train_step).")
    unknown = {k: v for k, v in kwargs.items() if k not in _NOT_IMPLEMENTED}
    if unknown:
        hint = (" Call optimizer.exclude_from_weight_decay(var_names=[...]) instead."
                if "exclude_from_weight_decay" in unknown else "")
        if "lr" in unknown:   # tf.keras 2 logged a warning and trained at the default rate, ignoring it
            hint += " `lr` is the old name of `learning_rate`: pass learning_rate=..."
        if "decay" in unknown:
            hint += (" `decay` (the legacy optimizers' per-step decay) is gone: pass a schedule, e.g. "
                     "learning_rate=md.keras.optimizers.schedules.InverseTimeDecay(lr, decay_steps=1, "
                     "decay_rate=decay).")
        raise ValueError(f"Argument(s) not recognized: {unknown}.{hint}")
    if clipnorm is not None and global_clipnorm is not None:
        raise ValueError("Cannot accept both `clipnorm` and `global_clipnorm`. Pass only one.")
    if sum(a is not None for a in (clipnorm, clipvalue, global_clipnorm)) > 1:
        raise ValueError(f"Only one of `clipnorm`, `clipvalue` and `global_clipnorm` can be set. Received: "
                         f"clipnorm={clipnorm!r}, clipvalue={clipvalue!r}, global_clipnorm={global_clipnorm!r}")


def _name(variable) -> str:
    """A variable's name as Keras matches it: ``kernel`` (a layer weight's ``name`` is already, on one device and
    under a strategy; another variable's ``Dense.kernel:0`` loses its prefix and suffix)."""
    name = str(getattr(variable, "_keras_name", None) or getattr(variable, "name", None) or "")
    name = name[:-2] if name.endswith(":0") else name
    return re.split(r"[./]", name)[-1] if hasattr(variable, "_keras_name") or "." in name else name


def _grads(pairs, kind):
    """The gradients of ``(gradient, variable)`` pairs as ``kind`` (``LocalGrads`` or ``SummedGrads``)."""
    return kind(tuple(g for g, _ in pairs))
