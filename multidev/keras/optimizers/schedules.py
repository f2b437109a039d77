"""Learning-rate schedules: callables from the step (``optimizer.iterations``) to a learning rate.

Example:
    lr = md.keras.optimizers.schedules.ExponentialDecay(0.1, decay_steps=1000, decay_rate=0.96)
    opt = md.keras.optimizers.SGD(learning_rate=lr)
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch

f32 = np.float32     # Keras computes a schedule in the initial rate's dtype: float32


def _out(value) -> float:
    """The rate as a Python float holding the float32 value TensorFlow computes."""
    return float(f32(value))


class LearningRateSchedule:
    """Base class: ``schedule(step) -> float``."""

    def __call__(self, step) -> float:
        raise NotImplementedError

    def get_config(self) -> dict:
        return dict(vars(self))

    @classmethod
    def from_config(cls, config):
        return cls(**config)


class ExponentialDecay(LearningRateSchedule):
    """``initial * decay_rate ** (step / decay_steps)`` (floored exponent when ``staircase``)."""

    def __init__(self, initial_learning_rate, decay_steps, decay_rate, staircase=False, name=None):
        if decay_steps <= 0:
            raise ValueError(f"Argument `decay_steps` must be > 0. Received: decay_steps={decay_steps}")
        self.initial_learning_rate, self.decay_steps, self.decay_rate = initial_learning_rate, decay_steps, decay_rate
        self.staircase, self.name = staircase, name

    def __call__(self, step):
        p = f32(float(step)) / f32(self.decay_steps)
        p = np.floor(p) if self.staircase else p
        return _out(f32(self.initial_learning_rate) * f32(self.decay_rate) ** p)


class PiecewiseConstantDecay(LearningRateSchedule):
    """``values[i]`` for ``boundaries[i-1] < step <= boundaries[i]``."""

    def __init__(self, boundaries, values, name=None):
        if len(values) != len(boundaries) + 1:
            raise ValueError(f"The length of boundaries should be 1 less than the length of values. "
                             f"Received: boundaries={boundaries!r}, values={values!r}")
        self.boundaries, self.values, self.name = list(boundaries), list(values), name

    def __call__(self, step):
        for b, v in zip(self.boundaries, self.values):
            if step <= b:
                return v
        return self.values[-1]


class PolynomialDecay(LearningRateSchedule):
    """Polynomial decay from ``initial`` to ``end`` over ``decay_steps`` (optionally cycling)."""

    def __init__(self, initial_learning_rate, decay_steps, end_learning_rate=0.0001, power=1.0, cycle=False, name=None):
        self.initial_learning_rate, self.decay_steps = initial_learning_rate, decay_steps
        self.end_learning_rate, self.power, self.cycle, self.name = end_learning_rate, power, cycle, name

    def __call__(self, step):
        step, steps = f32(float(step)), f32(self.decay_steps)
        if self.cycle:
            steps = steps * (f32(1) if step == 0 else np.ceil(step / steps))
        else:
            step = min(step, steps)
        initial, end = f32(self.initial_learning_rate), f32(self.end_learning_rate)
        return _out((initial - end) * (f32(1) - step / steps) ** f32(self.power) + end)


class InverseTimeDecay(LearningRateSchedule):
    """``initial / (1 + decay_rate * step / decay_steps)`` (floored when ``staircase``)."""

    def __init__(self, initial_learning_rate, decay_steps, decay_rate, staircase=False, name=None):
        self.initial_learning_rate, self.decay_steps, self.decay_rate = initial_learning_rate, decay_steps, decay_rate
        self.staircase, self.name = staircase, name

    def __call__(self, step):
        p = f32(float(step)) / f32(self.decay_steps)
        p = np.floor(p) if self.staircase else p
        return _out(f32(self.initial_learning_rate) / (f32(1) + f32(self.decay_rate) * p))


class CosineDecay(LearningRateSchedule):
    """Cosine decay to ``alpha * initial`` over ``decay_steps``, with optional linear warmup."""

    def __init__(self, initial_learning_rate, decay_steps, alpha=0.0, name=None, warmup_target=None, warmup_steps=0):
        self.initial_learning_rate, self.decay_steps, self.alpha, self.name = initial_learning_rate, decay_steps, alpha, name
        self.warmup_target, self.warmup_steps = warmup_target, warmup_steps

    def __call__(self, step):
        step, start, decay_steps = f32(float(step)), f32(self.initial_learning_rate), f32(self.decay_steps)
        if self.warmup_target is None:
            return _out(self._decay(min(step, decay_steps), decay_steps, start))
        target, warmup = f32(self.warmup_target), f32(self.warmup_steps)
        step = min(step, decay_steps + warmup)
        if step < warmup:
            return _out((target - start) * (step / warmup) + start)
        return _out(self._decay(step - warmup, decay_steps, target))

    def _decay(self, step, decay_steps, peak):
        cosine = f32(0.5) * (f32(1) + np.cos(f32(math.pi) * (step / decay_steps)))
        return peak * (f32(1 - self.alpha) * cosine + f32(self.alpha))


class CosineDecayRestarts(LearningRateSchedule):
    """Cosine decay with warm restarts (SGDR): period ``first_decay_steps``, each ``t_mul`` times longer
    and ``m_mul`` times lower, down to ``alpha * initial``."""

    def __init__(self, initial_learning_rate, first_decay_steps, t_mul=2.0, m_mul=1.0, alpha=0.0, name=None):
        if first_decay_steps <= 0:
            raise ValueError(f"Argument `first_decay_steps` must be > 0. Received: first_decay_steps={first_decay_steps}")
        self.initial_learning_rate, self.first_decay_steps = initial_learning_rate, first_decay_steps
        self.t_mul, self.m_mul, self.alpha, self.name = t_mul, m_mul, alpha, name

    def __call__(self, step):
        fraction = f32(float(step)) / f32(self.first_decay_steps)
        t_mul, m_mul = f32(self.t_mul), f32(self.m_mul)
        if t_mul == 1:
            restart = np.floor(fraction)
            fraction = fraction - restart
        else:
            restart = np.floor(np.log(f32(1) - fraction * (f32(1) - t_mul)) / np.log(t_mul))
            done = (f32(1) - t_mul ** restart) / (f32(1) - t_mul)
            fraction = (fraction - done) / t_mul ** restart
        cosine = f32(0.5) * m_mul ** restart * (f32(1) + np.cos(f32(math.pi) * fraction))
        return _out(f32(self.initial_learning_rate) * (f32(1 - self.alpha) * cosine + f32(self.alpha)))


_CLASSES = {c.__name__: c for c in (ExponentialDecay, PiecewiseConstantDecay, PolynomialDecay,
                                    InverseTimeDecay, CosineDecay, CosineDecayRestarts)}


def _steps(step):
    """``step`` as a numpy array when it holds several steps (an array, list or tensor), else ``None``."""
    if isinstance(step, torch.Tensor):
        return step.detach().cpu().numpy() if step.dim() > 0 else None
    if isinstance(step, (list, tuple, np.ndarray)):
        steps = np.asarray(step)
        return steps if steps.ndim > 0 else None
    return None


def _elementwise(call):
    """A built-in schedule's ``__call__`` that also takes many steps at once, as Keras's: the
    overfit_and_underfit tutorial plots ``lr_schedule(np.linspace(0, 100000))``. The rates come back
    as a float32 tensor of the steps' shape (TensorFlow's: a float32 tensor)."""
    @functools.wraps(call)
    def schedule(self, step):
        steps = _steps(step)
        if steps is None:
            return call(self, step)
        rates = [call(self, s) for s in steps.reshape(-1).tolist()]
        return torch.tensor(rates, dtype=torch.float32).reshape(steps.shape)
    return schedule


for _cls in _CLASSES.values():   # the built-ins only: a user's subclass computes on tensors itself
    _cls.__call__ = _elementwise(_cls.__call__)


def serialize(schedule) -> dict:
    return {"class_name": type(schedule).__name__, "config": schedule.get_config()}


def deserialize(config: dict, custom_objects=None) -> LearningRateSchedule:
    """The schedule of a ``serialize`` dict: a built-in class, or one of ``custom_objects`` (name -> class: a
    ``LearningRateSchedule`` subclass with ``get_config``, as keras.io's ``WarmUpCosine``), or registered
    (``register_keras_serializable``, ``custom_object_scope``: what ``load_model`` opens its custom objects in)."""
    from multidev.keras.saving.serialization import get_custom_objects

    name = config["class_name"]
    cls = (custom_objects or {}).get(name) or get_custom_objects().get(name) or _CLASSES.get(name)
    if cls is None:
        raise ValueError(f"Unknown learning rate schedule: {name!r}. Pass it in `custom_objects=` (or register it "
                         f"with keras.saving.register_keras_serializable) when loading, e.g. load_model(path, "
                         f"custom_objects={{{name!r}: {name}}}). Built-in: {sorted(_CLASSES)}.")
    return cls.from_config(config["config"])
