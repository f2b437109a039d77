"""``LossScaleOptimizer``: Keras's dynamic loss scaling for float16 training, around any md.keras optimizer.

The loss is multiplied by ``loss_scale`` before differentiation so small float16 gradients do not
flush to zero; the gradients are divided by it again before the update. With ``dynamic=True`` a
step whose (summed) gradients hold an inf or NaN is skipped and the scale halved (never below 1);
after ``dynamic_growth_steps`` finite steps in a row the scale doubles. A skipped step still counts
in ``iterations``, as in TensorFlow.

Under a strategy the decision is the same on every replica: it is taken on the gradients after
they were summed across replicas (identical everywhere; a non-finite value on any replica makes
the sum non-finite), or, when the caller skips that aggregation, on a "finite" flag all-reduced
through the replica context. Replica 0 alone updates the scale, once per step.

Example (custom loop):
    opt = md.keras.mixed_precision.LossScaleOptimizer(md.keras.optimizers.SGD(0.1))
    loss = loss_fn(y, model(x))
    scaled = opt.get_scaled_loss(loss)
    grads = torch.autograd.grad(scaled, model.trainable_variables)
    opt.apply_gradients(zip(opt.get_unscaled_gradients(grads), model.trainable_variables))
"""

from __future__ import annotations

from typing import Any, Iterable

import torch

from multidev.keras.optimizers.base import Optimizer
from multidev.values.gradients import LocalGrads, SummedGrads
from multidev.values.context import current_replica_context, current_replica_id
from multidev.values.variables import local_view


def _check_arguments(inner_optimizer: Any, dynamic: Any, initial_scale: Any, dynamic_growth_steps: Any) -> None:
    if not isinstance(inner_optimizer, Optimizer):
        raise TypeError(f'"inner_optimizer" must be an instance of md.keras.optimizers.Optimizer, but got: '
                        f"{inner_optimizer!r}. For a plain torch.optim optimizer use torch.amp.GradScaler.")
    if isinstance(inner_optimizer, LossScaleOptimizer):
        raise TypeError(f"LossScaleOptimizer cannot wrap another LossScaleOptimizer, but got: {inner_optimizer!r}")
    if not isinstance(dynamic, bool):
        raise TypeError(f'"dynamic" argument to LossScaleOptimizer.__init__ must be a bool, but got: {dynamic!r}')
    if initial_scale is not None and not float(initial_scale) >= 1:
        raise ValueError(f'"initial_scale" must be at least 1, but got: {initial_scale!r}')
    if dynamic and (not isinstance(dynamic_growth_steps, int) or dynamic_growth_steps < 1):
        raise ValueError(f'"dynamic_growth_steps" must be a positive int, but got: {dynamic_growth_steps!r}')
    if not dynamic and initial_scale is None:
        raise ValueError('"initial_scale" must be specified if "dynamic" is False')


class LossScaleOptimizer(Optimizer):
    """Wraps ``inner_optimizer`` with (dynamic) loss scaling.

    Args:
        inner_optimizer: the md.keras optimizer that applies the updates.
        dynamic: adjust the scale as training goes (True), or keep ``initial_scale`` fixed.
        initial_scale: the first scale (default 2**15).
        dynamic_growth_steps: finite steps in a row after which the scale doubles (default 2000).
    """

    def __init__(self, inner_optimizer: Optimizer, dynamic: bool = True, initial_scale: float | None = 2 ** 15,
                 dynamic_growth_steps: int = 2000, name: str | None = None):
        _check_arguments(inner_optimizer, dynamic, initial_scale, dynamic_growth_steps)
        self.inner_optimizer = inner_optimizer
        self.dynamic = dynamic
        self.initial_scale = float(initial_scale if initial_scale is not None else 2 ** 15)
        self.dynamic_growth_steps = dynamic_growth_steps
        self.name = name or "LossScaleOptimizer"
        self._loss_scale = torch.tensor(self.initial_scale, dtype=torch.float32, device="cpu")   # read as a float
        self._counter = torch.zeros((), dtype=torch.int64, device="cpu")  # finite steps since the last change
        self._unscales_in_apply = False   # Keras 3's contract: scale_loss, then apply_gradients unscales

    # ----- Keras's loss-scaling API -------------------------------------------------------------
    @property
    def loss_scale(self) -> torch.Tensor:
        """The current loss scale (a float32 scalar tensor)."""
        return self._loss_scale

    @property
    def dynamic_counter(self) -> torch.Tensor:
        """Finite steps since the scale last changed (dynamic scaling only)."""
        return self._counter

    def get_scaled_loss(self, loss: Any) -> Any:
        """``loss * loss_scale`` (a callable loss is wrapped, as Keras does)."""
        if callable(loss) and not isinstance(loss, torch.Tensor):
            return lambda: loss() * float(self._loss_scale)
        return loss * float(self._loss_scale)

    def scale_loss(self, loss: Any) -> Any:
        """Keras 3's ``loss * loss_scale``: the gradients of the scaled loss then go to ``apply_gradients``
        as they are, which unscales them (tf.keras 2's ``get_scaled_loss`` leaves that to
        ``get_unscaled_gradients``)."""
        self._unscales_in_apply = True
        return loss * float(self._loss_scale)

    def get_unscaled_gradients(self, grads: Iterable[Any]) -> list:
        """Gradients divided by ``loss_scale`` (None entries stay None)."""
        self._unscales_in_apply = False
        scale = float(self._loss_scale)
        return [None if g is None else g / scale for g in grads]

    def minimize(self, loss, var_list, tape=None):
        """Scale ``loss``, differentiate, unscale, then ``apply_gradients``."""
        var_list = list(var_list() if callable(var_list) else var_list)
        if callable(loss) and not isinstance(loss, torch.Tensor):
            loss = loss()
        grads = torch.autograd.grad(self.get_scaled_loss(loss), [local_view(v) for v in var_list], allow_unused=True)
        self.apply_gradients(zip(self.get_unscaled_gradients(grads), var_list))

    # ----- the update --------------------------------------------------------------------------
    def apply(self, grads, trainable_variables=None):
        """Keras 3's two-list form: the same update as ``apply_gradients`` (the scale's check included)."""
        grads = list(grads)
        variables = self.inner_optimizer._rules.variables if trainable_variables is None else trainable_variables
        return self.apply_gradients(zip(grads, list(variables)))

    def apply_gradients(self, grads_and_vars, name=None, skip_gradients_aggregation=False):
        """Apply (unscaled) gradients, unless dynamic scaling finds a non-finite one: then skip and halve."""
        inner = self.inner_optimizer
        if self._unscales_in_apply:   # gradients of scale_loss's loss (Keras 3)
            scale = float(self._loss_scale)
            grads_and_vars = [(None if g is None else g / scale, v) for g, v in grads_and_vars]
        if not self.dynamic:
            return inner.apply_gradients(grads_and_vars, name, skip_gradients_aggregation)
        pairs = [(g, v) for g, v in grads_and_vars if g is not None]
        if not pairs:
            raise ValueError("No gradients provided for any variable. Check that the loss depends on the "
                             "variables passed (and that they require grad).")
        lr = inner._current_lr()  # a float, read before any replica can count this step
        if not skip_gradients_aggregation:
            pairs = inner._aggregate_gradients(pairs)
        finite = self._all_finite([g for g, _ in pairs], already_consistent=not skip_gradients_aggregation)
        if finite:
            pairs = inner._clip(pairs)
            grads, variables = tuple(g for g, _ in pairs), [v for _, v in pairs]
            if skip_gradients_aggregation:
                inner._apply_own(LocalGrads(grads), variables, lr)
            else:
                inner._apply(SummedGrads(grads), variables, lr)
        else:
            inner._increment_iterations()
        self._update_scale(finite)
        return inner.iterations

    @staticmethod
    def _all_finite(grads: list, already_consistent: bool) -> bool:
        """Whether every gradient is finite, decided identically on every replica."""
        device = grads[0].device
        finite = torch.stack([torch.isfinite(g).all().to(device) for g in grads]).all().to(torch.float32)
        ctx = current_replica_context()
        if not already_consistent and ctx is not None and ctx.num_replicas_in_sync > 1:
            # One scalar all-reduce: the step is finite only if it is finite on every replica.
            return bool(ctx.all_reduce("SUM", finite) >= ctx.num_replicas_in_sync)
        return bool(finite >= 1)

    def _update_scale(self, finite: bool) -> None:
        """TensorFlow's dynamic rule, applied once per step (replica 0 or no replica)."""
        if current_replica_id() not in (None, 0):
            return
        if not finite:
            self._loss_scale.copy_(torch.clamp(self._loss_scale / 2, min=1.0))
            self._counter.zero_()
            return
        self._counter.add_(1)
        if int(self._counter) >= self.dynamic_growth_steps:
            doubled = self._loss_scale * 2
            if torch.isfinite(doubled):
                self._loss_scale.copy_(doubled)
            self._counter.zero_()

    # ----- everything else is the inner optimizer's ---------------------------------------------
    @property
    def iterations(self) -> torch.Tensor:
        return self.inner_optimizer.iterations

    @property
    def learning_rate(self) -> float:
        return self.inner_optimizer.learning_rate

    @learning_rate.setter
    def learning_rate(self, value) -> None:
        self.inner_optimizer.learning_rate = value

    lr = learning_rate

    @property
    def variables(self) -> list:
        """The inner optimizer's variables, then the loss scale and the growth counter."""
        return self.inner_optimizer.variables + ([self._loss_scale, self._counter] if self.dynamic else [])

    @property
    def _torch_opt(self):
        return self.inner_optimizer._torch_opt

    def build(self, var_list):
        self.inner_optimizer.build(var_list)

    def _aggregate_gradients(self, grads_and_vars):
        return self.inner_optimizer._aggregate_gradients(grads_and_vars)

    def slot_names(self):
        return self.inner_optimizer.slot_names()

    def state_tensors(self, var_names: dict[int, str]) -> dict[str, torch.Tensor]:
        out = self.inner_optimizer.state_tensors(var_names)
        if self.dynamic:
            out["loss_scale"], out["loss_scale_counter"] = self._loss_scale.clone(), self._counter.clone()
        return out

    def load_state_tensors(self, tensors: dict[str, torch.Tensor], variables: dict[str, torch.Tensor]) -> None:
        tensors = dict(tensors)
        scale, counter = tensors.pop("loss_scale", None), tensors.pop("loss_scale_counter", None)
        self.inner_optimizer.load_state_tensors(tensors, variables)
        if scale is not None:
            self._loss_scale.copy_(scale)
        if counter is not None:
            self._counter.copy_(counter)

    def get_config(self) -> dict:
        from multidev.keras import optimizers

        return {"name": self.name, "inner_optimizer": optimizers.serialize(self.inner_optimizer),
                "dynamic": self.dynamic, "initial_scale": self.initial_scale,
                "dynamic_growth_steps": self.dynamic_growth_steps}

    @classmethod
    def from_config(cls, config, custom_objects=None):
        from multidev.keras import optimizers

        config = dict(config)
        config["inner_optimizer"] = optimizers.deserialize(config["inner_optimizer"])
        return cls(**config)

    def __getattr__(self, name: str) -> Any:
        # Hyperparameters (beta_1, momentum, clipnorm, ...) read through to the inner optimizer.
        if name.startswith("__") or name == "inner_optimizer":
            raise AttributeError(name)
        return getattr(self.inner_optimizer, name)

    def __repr__(self) -> str:
        return f"<LossScaleOptimizer inner={type(self.inner_optimizer).__name__} loss_scale={float(self._loss_scale):g}>"


def wrap_for_policy(optimizer: Optimizer, policy: Any) -> Optimizer:
    """What ``compile`` does under a ``mixed_float16`` policy: wrap the optimizer in a LossScaleOptimizer."""
    if getattr(policy, "name", policy) == "mixed_float16" and not isinstance(optimizer, LossScaleOptimizer):
        return LossScaleOptimizer(optimizer)
    return optimizer
