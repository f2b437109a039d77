"""``torch.nn.SyncBatchNorm`` made in a distributing strategy's scope synchronises across the replicas.

torch's own SyncBatchNorm synchronises only over a ``torch.distributed`` process group (and only for
GPU inputs); the replicas of one process are threads, so on its own it normalised each replica's
slice with that slice's statistics: plain BatchNorm, without a word (issue 23, item 8). A
SyncBatchNorm whose parameters or buffers become distributed variables (``module_hooks``) is given
this subclass (the one other change multidev makes to a user's object, next to the replica-aware
parameter dicts; ``isinstance(m, torch.nn.SyncBatchNorm)`` still holds, ``state_dict`` is unchanged).

In training, inside ``strategy.run`` with more than one replica in sync, the batch mean and the
biased variance are those of the GLOBAL batch: per-channel sums and counts, then the sums of squared
deviations from the global mean, are summed over every replica (and every worker of a
``MultiWorkerMirroredStrategy``) by the replica context's differentiable all-reduce, so the
backward pass carries the statistics' gradients across replicas too, as DDP + SyncBatchNorm does.
Every replica updates its running statistics with the global ones (so they stay equal, as in DDP).
Elsewhere (evaluation, cross-replica context, one replica) it is torch's SyncBatchNorm.
"""

from __future__ import annotations

import torch

from multidev.values.context import current_replica_context


class ReplicaSyncBatchNorm(torch.nn.SyncBatchNorm):
    """A SyncBatchNorm that synchronises over the replicas of the strategy running it."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        ctx = current_replica_context()
        bn_training = self.training or (self.running_mean is None and self.running_var is None)
        if ctx is None or ctx.num_replicas_in_sync == 1 or not (self.training and bn_training):
            return super().forward(input)
        self._check_input_dim(input)
        factor = self._average_factor()
        mean, var, count, centered = _global_moments(ctx, input)
        if self.track_running_stats and self.running_mean is not None:
            with torch.no_grad():
                unbiased = var.detach() * (count / max(count - 1.0, 1.0))
                self.running_mean.mul_(1.0 - factor).add_(mean.detach().to(self.running_mean.dtype), alpha=factor)
                self.running_var.mul_(1.0 - factor).add_(unbiased.to(self.running_var.dtype), alpha=factor)
        shape = [1, -1] + [1] * (input.dim() - 2)
        out = centered * torch.rsqrt(var + self.eps).view(shape)
        if self.affine:
            out = out * self.weight.view(shape) + self.bias.view(shape)
        return out

    def _average_factor(self) -> float:
        """The running-statistics weight of this batch, as ``torch.nn.modules.batchnorm._BatchNorm``."""
        factor = 0.0 if self.momentum is None else self.momentum
        if self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            factor = 1.0 / float(self.num_batches_tracked) if self.momentum is None else self.momentum
        return factor


def _global_moments(ctx, input: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, float, torch.Tensor]:
    """Mean and biased variance per channel over every replica's batch, the global count and the input
    minus the mean (two
    differentiable all-reduces: sums and counts, then squared deviations from the global mean)."""
    dims = [0] + list(range(2, input.dim()))
    local_count = torch.full((1,), float(input.numel() // max(input.size(1), 1)), dtype=input.dtype,
                             device=input.device)
    sums = ctx.all_reduce("SUM", torch.cat([input.sum(dims), local_count]))
    count = float(sums[-1].detach())
    if count == 0:
        raise ValueError("SyncBatchNorm got empty batches on every replica: nothing to normalise with.")
    mean = sums[:-1] / count
    centered = input - mean.view([1, -1] + [1] * (input.dim() - 2))
    var = ctx.all_reduce("SUM", (centered * centered).sum(dims)) / count
    return mean, var, count, centered


def adopt(module: torch.nn.Module) -> None:
    """Give a ``torch.nn.SyncBatchNorm`` (exactly that class) made in a distributing scope the
    replica-synchronising forward (called when its parameters or buffers become distributed)."""
    if type(module) is torch.nn.SyncBatchNorm:
        module.__class__ = ReplicaSyncBatchNorm
