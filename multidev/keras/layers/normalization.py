"""BatchNormalization (Keras momentum/epsilon semantics, optional cross-replica statistics) and
LayerNormalization.

Example:
    bn = md.keras.layers.BatchNormalization()        # momentum 0.99, epsilon 1e-3
    y = bn(x, training=True)                         # normalizes with batch stats, updates moving stats
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from multidev.keras import initializers
from multidev.keras.layers.base import Layer
from multidev.values.context import current_replica_context


def all_replica_moments(total, total_sq, count):
    """Sum batch-norm statistics over every replica in sync (differentiably), so
    ``synchronized=True`` normalizes with the global batch's mean and variance."""
    ctx = current_replica_context()
    if ctx is None or ctx.num_replicas_in_sync == 1:
        return total, total_sq, count
    return tuple(ctx.all_reduce("SUM", [total, total_sq, count]))


class BatchNormalization(Layer):
    """Normalize over all axes but ``axis`` with batch statistics (training) or moving ones (inference).

    Moving statistics update as Keras does: ``moving = moving * momentum + batch * (1 - momentum)``
    with the biased batch variance. With ``synchronized=True`` the per-replica sums are passed to
    ``BatchNormalization.moments_aggregator`` (set by a strategy; ``None`` means one replica).
    """

    # fn(sum, sum_of_squares, count) -> the same, summed over replicas; used when synchronized=True.
    moments_aggregator = staticmethod(all_replica_moments)
    supports_masking = True

    def __init__(self, axis=-1, momentum=0.99, epsilon=1e-3, center=True, scale=True,
                 beta_initializer="zeros", gamma_initializer="ones", moving_mean_initializer="zeros",
                 moving_variance_initializer="ones", synchronized=False, renorm=False, **kwargs):
        for arg in ("renorm_clipping", "renorm_momentum"):
            kwargs.pop(arg, None)
        super().__init__(**kwargs)
        if renorm:
            raise NotImplementedError(
                "BatchNormalization(renorm=True) (batch renormalization) is not implemented in md.keras: its "
                "r/d corrections and renorm moving statistics would be missing and training would silently "
                "differ from TF's. Use renorm=False, or run the model with Keras 3 on multidev (KERAS_BACKEND=torch).")
        self.axis, self.momentum, self.epsilon = axis, float(momentum), float(epsilon)
        self.center, self.scale, self.synchronized = center, scale, bool(synchronized)
        self.beta_initializer = initializers.get(beta_initializer)
        self.gamma_initializer = initializers.get(gamma_initializer)
        self.moving_mean_initializer = initializers.get(moving_mean_initializer)
        self.moving_variance_initializer = initializers.get(moving_variance_initializer)

    def build(self, input_shape):
        dim = input_shape[self.axis]
        if self.scale:
            self.add_weight("gamma", (dim,), self.gamma_initializer)
        if self.center:
            self.add_weight("beta", (dim,), self.beta_initializer)
        # tf.keras 2's policy: each replica updates its own statistics, a cross-replica read takes the mean
        for name, initializer in (("moving_mean", self.moving_mean_initializer),
                                  ("moving_variance", self.moving_variance_initializer)):
            self.add_weight(name, (dim,), initializer, trainable=False, synchronization="on_read", aggregation="mean")

    def _moments(self, x):
        """Batch mean and biased variance over the reduction axes (aggregated across replicas if synchronized)."""
        axis = self.axis % x.ndim
        dims = [d for d in range(x.ndim) if d != axis]
        xf = x.float()
        count = xf.new_full((), float(xf.numel() // xf.shape[axis]))   # filled on the device: no host copy
        total, total_sq = xf.sum(dims), (xf * xf).sum(dims)
        if self.synchronized and BatchNormalization.moments_aggregator is not None:
            total, total_sq, count = BatchNormalization.moments_aggregator(total, total_sq, count)
        mean = total / count
        return mean, (total_sq / count - mean * mean).clamp_min(0)

    def _broadcast(self, v, x):
        shape = [1] * x.ndim
        shape[self.axis % x.ndim] = -1
        return v.reshape(shape)

    def call(self, inputs, training=False):
        if training and self.trainable:
            mean, var = self._moments(inputs)
            with torch.no_grad():
                self.moving_mean.mul_(self.momentum).add_(mean.detach().to(self.moving_mean.dtype), alpha=1 - self.momentum)
                self.moving_variance.mul_(self.momentum).add_(var.detach().to(self.moving_variance.dtype), alpha=1 - self.momentum)
        else:
            mean, var = self.moving_mean, self.moving_variance
        inv = torch.rsqrt(var + self.epsilon)
        if self.scale:
            inv = inv * self.gamma
        out = (inputs - self._broadcast(mean, inputs)) * self._broadcast(inv, inputs)
        if self.center:
            out = out + self._broadcast(self.beta, inputs)
        return out.to(inputs.dtype) if inputs.is_floating_point() else out

    def get_config(self):
        return {**super().get_config(), "axis": self.axis, "momentum": self.momentum, "epsilon": self.epsilon,
                "center": self.center, "scale": self.scale, "synchronized": self.synchronized}


class SyncBatchNormalization(BatchNormalization):
    """BatchNormalization with ``synchronized=True`` (``layers.experimental.SyncBatchNormalization``)."""

    def __init__(self, **kwargs):
        kwargs.pop("synchronized", None)
        super().__init__(synchronized=True, **kwargs)


class LayerNormalization(Layer):
    """Normalize each example over ``axis`` (last by default), then scale by gamma and shift by beta."""

    supports_masking = True

    def __init__(self, axis=-1, epsilon=1e-3, center=True, scale=True, rms_scaling=False, beta_initializer="zeros",
                 gamma_initializer="ones", **kwargs):
        super().__init__(**kwargs)
        self.axis = [axis] if isinstance(axis, int) else list(axis)
        self.epsilon, self.rms_scaling = float(epsilon), bool(rms_scaling)
        # Keras 3: rms_scaling keeps gamma whatever ``scale`` says, and drops beta.
        self.center, self.scale = center and not self.rms_scaling, scale or self.rms_scaling
        self.beta_initializer = initializers.get(beta_initializer)
        self.gamma_initializer = initializers.get(gamma_initializer)

    def build(self, input_shape):
        rank = len(input_shape)
        self._axes = sorted(a % rank for a in self.axis)
        shape = tuple(input_shape[a] for a in self._axes)
        if self.scale:
            self.add_weight("gamma", shape, self.gamma_initializer)
        if self.center:
            self.add_weight("beta", shape, self.beta_initializer)

    def call(self, inputs):
        rank = inputs.ndim
        if self.rms_scaling:   # Keras 3.15's: x / sqrt(var + eps) * gamma, the mean not subtracted
            var = torch.var(inputs, dim=self._axes, keepdim=True, unbiased=False)
            gamma = self.gamma.reshape([inputs.shape[d] if d in self._axes else 1 for d in range(rank)])
            return inputs * torch.rsqrt(var + self.epsilon) * gamma
        if self._axes == list(range(rank - len(self._axes), rank)):   # trailing axes: torch's fused kernel
            shape = inputs.shape[rank - len(self._axes):]
            return F.layer_norm(inputs, shape, self.gamma if self.scale else None,
                                self.beta if self.center else None, self.epsilon)
        var, mean = torch.var_mean(inputs, dim=self._axes, keepdim=True, unbiased=False)
        out = (inputs - mean) * torch.rsqrt(var + self.epsilon)
        bshape = [inputs.shape[d] if d in self._axes else 1 for d in range(rank)]
        if self.scale:
            out = out * self.gamma.reshape(bshape)
        if self.center:
            out = out + self.beta.reshape(bshape)
        return out

    def get_config(self):
        return {**super().get_config(), "axis": self.axis, "epsilon": self.epsilon, "center": self.center,
                "scale": self.scale, "rms_scaling": self.rms_scaling}


class GroupNormalization(Layer):
    """Normalize each example over groups of ``groups`` channels (of ``axis``) and the other non-batch
    axes, then scale by gamma and shift by beta (one per channel), as Keras 3's."""

    supports_masking = True

    def __init__(self, groups=32, axis=-1, epsilon=1e-3, center=True, scale=True, beta_initializer="zeros",
                 gamma_initializer="ones", **kwargs):
        super().__init__(**kwargs)
        self.groups, self.axis, self.epsilon = int(groups), int(axis), float(epsilon)
        self.center, self.scale = bool(center), bool(scale)
        self.beta_initializer = initializers.get(beta_initializer)
        self.gamma_initializer = initializers.get(gamma_initializer)

    def build(self, input_shape):
        dim = input_shape[self.axis]
        if self.groups == -1:   # Keras: one group per channel (instance normalisation, keras.io's CycleGAN)
            self.groups = dim
        if self.groups < 1 or dim < self.groups or dim % self.groups:
            raise ValueError(f"Number of groups ({self.groups}) must be a divisor of the number of channels "
                             f"({dim}) and not exceed it. Input shape: {tuple(input_shape)}")
        if self.scale:
            self.add_weight("gamma", (dim,), self.gamma_initializer)
        if self.center:
            self.add_weight("beta", (dim,), self.beta_initializer)

    def call(self, inputs):
        axis = self.axis % inputs.ndim
        shape = list(inputs.shape)
        grouped_shape = shape[:axis] + [self.groups, shape[axis] // self.groups] + shape[axis + 1:]
        x = inputs.float().reshape(grouped_shape)
        dims = [d for d in range(1, x.ndim) if d != axis]
        var, mean = torch.var_mean(x, dim=dims, keepdim=True, unbiased=False)
        bshape = [1] * x.ndim
        bshape[axis], bshape[axis + 1] = self.groups, shape[axis] // self.groups
        inv = torch.rsqrt(var + self.epsilon)
        if self.scale:
            inv = inv * self.gamma.reshape(bshape)
        res = -mean * inv
        if self.center:
            res = res + self.beta.reshape(bshape)
        return (x * inv + res).reshape(shape).to(inputs.dtype)

    def get_config(self):
        return {**super().get_config(), "groups": self.groups, "axis": self.axis, "epsilon": self.epsilon,
                "center": self.center, "scale": self.scale}


class UnitNormalization(Layer):
    """Scale each example to unit L2 norm over ``axis``: ``x * min(rsqrt(sum(x^2)), 1e12)``, as Keras 3's."""

    supports_masking = True

    def __init__(self, axis=-1, **kwargs):
        super().__init__(**kwargs)
        self.axis = [axis] if isinstance(axis, int) else list(axis)

    def call(self, inputs):
        inv = torch.clamp(torch.rsqrt((inputs * inputs).sum(self.axis, keepdim=True)), max=1e12)
        return inputs * inv

    def get_config(self):
        return {**super().get_config(), "axis": self.axis}
