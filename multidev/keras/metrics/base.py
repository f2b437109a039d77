"""Metric base class and the reducing metrics Mean, Sum and MeanMetricWrapper.

All state lives in tensors (``variables``) that only ever accumulate sums, so per-replica or
per-worker states combine exactly with ``merge_state`` (no averaging of averages).

On a strategy: in a replica running a Keras step (``StepInputs`` with ``metric_states``, see
``keras/step_inputs.py``) every metric reads and writes its state in that replica's store,
``store[metric]`` (created fresh on first use), instead of its own, so replicas never share state;
afterwards ``metric.merge_state([store[metric] for store in stores])`` sums them in exactly.

In a custom loop (``strategy.run`` without a Keras step) a metric created in the scope of a strategy
with several replicas or workers keeps one state per replica, as TensorFlow's sync-on-read metric
variables do: inside a replica ``result()`` reads that replica's own state, and the first read in
cross-replica context (``result()``, ``variables``) folds every replica's state in, summed across
the workers of a ``MultiWorkerMirroredStrategy`` (a collective: every worker reads, as in
TensorFlow). Replica threads thus never update one tensor concurrently.

Example:
    m = md.keras.metrics.Mean()
    m.update_state([1.0, 3.0]); m.result()      # tensor(2.)
"""

from __future__ import annotations

import torch

from multidev._core.eager_tensor import EagerTensor
from multidev.keras import backend, initializers, loss_masks, step_inputs
from multidev.keras.layers import keras_tensor
from multidev.keras.metrics import state_device
from multidev.keras.state_variable import StateVariable
from multidev.keras.step_inputs import metric_store
from multidev.values import context


def _placed(value: torch.Tensor, name: str):
    """``value``, or under a strategy that stores metric state remotely (ParameterServerStrategy's
    scope, on the coordinator) a variable there, so updates in scheduled functions reach it."""
    strategy = context.current_scope_strategy()
    create = getattr(getattr(strategy, "extended", None), "create_metric_variable", None)
    return value if create is None else create(value, name)


def _replicated_strategy():
    """The strategy in scope if its replicas (several, in threads or worker processes) must keep
    their own metric state, else None."""
    strategy = context.current_scope_strategy()
    extended = getattr(strategy, "extended", None)
    if extended is None or not getattr(extended, "distributes_variables", False):
        return None
    return strategy if extended.num_local_replicas > 1 or extended.num_workers > 1 else None


def _tagging_result(result):
    """``result`` that, inside a Keras step on a strategy, tags the tensor it returns with its metric: a custom
    ``train_step`` returning ``{"loss": self.total_loss_tracker.result()}`` (keras.io's VAE) names it otherwise,
    and the step's logs read that metric once merged (``replica_logs.step_logs``), not the replica's own part."""
    def tagged(self, *args, **kwargs):
        out = result(self, *args, **kwargs)
        if type(out) is torch.Tensor and out.device.type != "cpu":   # state on the replicas' GPU after fit:
            out = out.as_subclass(EagerTensor)   # `.numpy()` reads it back, as TensorFlow's result does
        if isinstance(out, torch.Tensor) and metric_store() is not None:
            out._md_result_of = self
        return out

    tagged.__doc__, tagged.__name__, tagged.__qualname__ = result.__doc__, result.__name__, result.__qualname__
    return tagged


def result_of(value):
    """The metric whose ``result()`` (in a Keras step on a strategy) ``value`` is, or None."""
    return getattr(value, "_md_result_of", None)


def sum_states_across_workers(extended, states: list[dict]) -> None:
    """Replace every tensor of ``states`` by its sum over the workers: one flat all-reduce
    (float64, so counts stay exact). Every worker must call it with the same structure."""
    leaves = [v for state in states for v in state.values()]
    if not leaves or extended.num_workers == 1:
        return
    flat = extended.worker_collective.sum(torch.cat([v.reshape(-1).double() for v in leaves]))
    offset = 0
    for v in leaves:
        v.copy_(flat[offset:offset + v.numel()].view(v.shape).to(v.device, v.dtype))
        offset += v.numel()


class Metric:
    """Base class: ``update_state`` accumulates, ``result`` reads, ``reset_state`` zeroes, ``merge_state`` sums."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "result" in cls.__dict__:
            cls.result = _tagging_result(cls.__dict__["result"])

    def __init__(self, name=None, dtype=None):
        self.name = name or backend.to_snake_case(type(self).__name__)
        self.dtype = backend.as_dtype(dtype or "float32")
        self._var_names: list[str] = []
        self._initial: dict[str, torch.Tensor] = {}
        self._own: dict[str, torch.Tensor] = {}
        # Custom loops on a strategy with several replicas: one state per local replica id.
        self._strategy = _replicated_strategy()
        self._replica_states: dict[int, dict[str, torch.Tensor]] = {}

    def _state(self) -> dict:
        """The state dict in use: the running replica's store in a Keras step, the replica's own in a
        custom loop on this metric's strategy, else the metric's own (replicas' states folded in)."""
        if keras_tensor.inferring():   # a functional model's shape inference on zeros updates nothing
            return self._fresh_state()
        store = metric_store()
        if store is not None:
            state = store.get(self)
            if state is None:
                state = store[self] = self._fresh_state()
            return state
        if self._strategy is not None:
            env = context.replica_env()
            if env is not None and env.strategy is self._strategy:
                state = self._replica_states.get(env.replica_id)
                if state is None:
                    state = self._replica_states[env.replica_id] = self._fresh_state()
                return state
            if self._replica_states and env is None:
                self._fold_replica_states()
        return self._own

    def _fresh_state(self) -> dict:
        device = state_device.scope_device()    # a replica's on a GPU: no copy from host memory each step
        if device is not None and device.type != "cpu":
            return state_device.initial_on(self, device)
        return {n: v.clone() for n, v in self._initial.items()}

    def _fold_replica_states(self) -> None:
        """Cross-replica read after a custom loop: add every replica's state (and every worker's) in."""
        summed = self.summed_state([self._replica_states.pop(r) for r in sorted(self._replica_states)])
        sum_states_across_workers(self._strategy.extended, [summed])
        self.merge_state([summed])

    def summed_state(self, states: list[dict]) -> dict:
        """``{name: sum over states}`` (zeros for none), on the devices and dtypes of this metric's own state."""
        summed = {n: torch.zeros_like(v) for n, v in self._own.items()}
        for state in states:
            for n, v in state.items():
                summed[n] += v.to(summed[n].device, summed[n].dtype)
        return summed

    def __getattr__(self, name):
        if name in self.__dict__.get("_var_names", ()):
            return self._state()[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def add_variable(self, name=None, shape=(), initializer=0.0, dtype=None, aggregation="sum"):
        """Create a state tensor ``name`` (read as ``self.<name>``) filled with ``initializer``.

        Keras 3's form, ``add_variable(shape=..., initializer="zeros", name=...)`` (shape first, initializer
        by name), returns a :class:`StateVariable` (``assign_add``, ``assign``, ``value``) to keep instead."""
        keras3 = name is None or not isinstance(name, str) or isinstance(initializer, str)
        if name is not None and not isinstance(name, str):  # the shape given first, positionally
            name, shape = None, name
        name = name or f"variable_{len(self._var_names)}"
        shape = tuple(shape) if isinstance(shape, (list, tuple)) else (() if shape is None else (shape,))
        dtype = backend.as_dtype(dtype) if dtype is not None else self.dtype
        if isinstance(initializer, str) or callable(initializer):
            value = initializers.get(initializer)(shape, dtype)
        else:
            value = torch.full(shape, float(initializer), dtype=dtype)
        self._var_names.append(name)
        self._initial[name] = value.clone()
        self._own[name] = _placed(value, f"{self.name}/{name}")
        if keras3:
            return StateVariable(name, lambda: self._state()[name])
        return self._own[name]

    add_weight = add_variable

    def _shape_state(self, names, shape) -> None:
        """Give the state tensors ``names`` the shape ``shape`` (zeros) where they have another: a state
        sized by the first update's data (Keras builds it then), in every replica's store as it arrives."""
        shape = tuple(shape)
        if tuple(self._initial[names[0]].shape) != shape:
            for n in names:
                self._initial[n] = torch.zeros(shape, dtype=self._initial[n].dtype)
                self._own[n] = torch.zeros(shape, dtype=self._initial[n].dtype)
        state = self._state()
        for n in names:
            if tuple(state[n].shape) != shape:
                state[n] = torch.zeros(shape, dtype=self._initial[n].dtype)

    @property
    def variables(self) -> list:
        """The state tensors, in creation order."""
        state = self._state()
        return [state[n] for n in self._var_names]

    def _to_device(self, device):
        """Move the state to ``device`` (first update on a new device)."""
        state = self._state()
        for n in self._var_names:
            if state[n].device != device:
                state[n] = state[n].to(device)

    def update_state(self, *args, **kwargs):
        raise NotImplementedError

    def result(self):
        raise NotImplementedError

    def reset_state(self):
        """Return every state tensor to its initial value (in place)."""
        if context.replica_env() is None:
            self._replica_states.clear()      # every replica's, as TensorFlow's reset assigns them all
        with torch.no_grad():
            for n in self._var_names:
                getattr(self, n).copy_(self._initial[n])

    reset_states = reset_state

    def merge_state(self, metrics) -> None:
        """Add the states of ``metrics`` (same class and config, or state dicts from ``StepInputs.metric_states``)
        into this one: exact aggregation."""
        for other in metrics:
            if isinstance(other, dict):
                theirs_list = [other[n] for n in self._var_names]
            elif type(other) is type(self) and len(other.variables) == len(self.variables):
                theirs_list = other.variables
            else:
                raise ValueError(f"Metric {self.name!r} ({type(self).__name__}) cannot merge state from "
                                 f"{getattr(other, 'name', other)!r} ({type(other).__name__}).")
            for n, mine, theirs in zip(self._var_names, self.variables, theirs_list):
                if mine.shape != theirs.shape and not bool(mine.any()):   # sized at its first update (Keras's build)
                    self._shape_state([n], theirs.shape)
            if self._state() is self._own:
                state_device.follow_replicas(self.variables, list(theirs_list))
            with torch.no_grad():
                for mine, theirs in zip(self.variables, theirs_list):
                    mine.add_(theirs.to(mine.device, mine.dtype))

    def __call__(self, *args, **kwargs):
        """Update with one batch and return the new result."""
        self.update_state(*args, **kwargs)
        return self.result()

    def get_config(self) -> dict:
        return {"name": self.name, "dtype": str(self.dtype).replace("torch.", "")}

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def __repr__(self):
        return f"<{type(self).__name__} name={self.name!r}>"


def as_tensor(x, device=None):
    """numpy / list / tensor -> tensor on ``device``; a list of tensors is stacked, as TensorFlow converts it
    (keras.io Forward-Forward's ``loss_metric.update_state([mean_loss])``)."""
    if isinstance(x, (list, tuple)) and any(isinstance(v, torch.Tensor) for v in x):
        x = torch.stack([as_tensor(v).detach().as_subclass(torch.Tensor) for v in x])
    t = x if isinstance(x, torch.Tensor) else torch.as_tensor(x)
    return t.to(device) if device is not None and t.device != device else t


def broadcast_weights(sample_weight, values):
    """Sample weights shaped to multiply ``values`` (trailing axes added or size-1 axes squeezed)."""
    sw = as_tensor(sample_weight, values.device).to(values.dtype)
    while sw.ndim > values.ndim and sw.shape[-1] == 1:
        sw = sw.squeeze(-1)
    while sw.ndim < values.ndim:
        sw = sw.unsqueeze(-1)
    try:
        return torch.broadcast_to(sw, values.shape)
    except RuntimeError as e:
        from multidev._core.errors import InvalidArgumentError

        raise InvalidArgumentError(f"Incompatible shapes: sample_weight {list(sw.shape)} does not broadcast to "
                                   f"the metric's values {list(values.shape)}: give one weight per sample "
                                   "(or per timestep for sequence outputs).") from e


class Reduce(Metric):
    """Weighted sum of values and of weights; ``Sum`` reports the first, ``Mean`` their ratio."""

    def __init__(self, name=None, dtype=None):
        super().__init__(name, dtype)
        self.add_variable("total")
        self.add_variable("count")

    def update_state(self, values, sample_weight=None):
        state = self._state()
        values = as_tensor(values)
        if state["total"].device != values.device:
            self._to_device(values.device)
        values = values.detach().to(self.dtype)
        with torch.no_grad():
            if sample_weight is None:
                state["total"].add_(values.sum())
                state["count"].add_(values.numel())
            else:
                sw = broadcast_weights(sample_weight, values)
                state["total"].add_((values * sw).sum())
                state["count"].add_(sw.sum())

    def add_without_count(self, value) -> None:
        """Add ``value`` to the running total and nothing to the count: the part of a step's loss that a replica
        without examples holds (its share of the model's penalties, when a batch of 1 leaves one of 2 replicas
        empty), which the replicas' merged mean must include, as one device's step includes the whole penalty."""
        state = self._state()
        value = as_tensor(value)
        if state["total"].device != value.device:
            self._to_device(value.device)
        with torch.no_grad():
            state["total"].add_(value.detach().to(self.dtype).sum())


class Sum(Reduce):
    """Running (weighted) sum."""

    def result(self):
        return self.total.clone()


class Mean(Reduce):
    """Running (weighted) mean: sum(values * w) / sum(w)."""

    def update_state(self, values, sample_weight=None):
        # A replica's loss over the global batch (step_inputs.mark_share) counts as its part of one
        # global mean: the replicas' parts of a step add up to that step's one-device value.
        share = step_inputs.share_of(values) if sample_weight is None else None
        if share is not None:
            values = values.detach()
            if share:
                super().update_state(values / share, sample_weight=share)
            else:
                self.add_without_count(values)
            return
        super().update_state(values, sample_weight)

    def result(self):
        state = self._state()
        return state["total"] / state["count"].clamp_min(1e-30)    # 0 / tiny = 0 before any update


class MeanMetricWrapper(Mean):
    """Mean of a per-sample function ``fn(y_true, y_pred)`` (accuracy, mse, ...)."""

    def __init__(self, fn, name=None, dtype=None, **fn_kwargs):
        super().__init__(name=name or fn.__name__, dtype=dtype)
        self._fn, self._fn_kwargs = fn, fn_kwargs

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_pred = as_tensor(y_pred)
        y_true = as_tensor(y_true, y_pred.device)
        with torch.no_grad():     # y_pred itself, not a detached copy: it may carry its logits (sigmoid)
            values = self._fn(y_true, y_pred, **self._fn_kwargs)
        super().update_state(values, loss_masks.metric_weight(loss_masks.mask_of(y_pred), values, sample_weight))

    def get_config(self):
        return {**super().get_config(), **self._fn_kwargs}
