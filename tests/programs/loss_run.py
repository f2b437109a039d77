"""Run the programs of ``loss_programs.py`` ... ``loss_programs3.py`` and write their results as JSON into the
directory given:

    MULTIDEV_LOGICAL_CPUS=2 python tests/programs/loss_run.py OUT_DIR   # MirroredStrategy, 2 replicas
    RANK=r WORLD_SIZE=2 MASTER_ADDR=... MASTER_PORT=... python tests/programs/loss_run.py OUT_DIR   # DDP
    multidev launch --workers 2 tests/programs/loss_run.py OUT_DIR   # MultiWorkerMirroredStrategy

``LOSS_ONLY=name,name`` runs those programs only (to debug one). The DDP run imports no multidev.
"""
from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from three_ways_main import only, run_main  # noqa: E402
from generative_run import GenDdpPort, GenMirroredPort  # noqa: E402
from loss_programs import (bce_pos_weight, ce_criterion_outside_scope, ce_weight_ignore_smoothing,  # noqa: E402
                           gaussian_nll, huber_mean, huber_sum, kldiv_batchmean, kldiv_log_target_sum,
                           multilabel_soft_margin, nll_class_weighted, poisson_nll)
from loss_programs2 import (accumulation_mean_over_steps, cosine_embedding, ctc_mean_zero_infinity,  # noqa: E402
                            ctc_sum_zero_infinity, margin_ranking, tokens_accumulation_num_items,
                            tokens_dist_all_reduce_as_printed, tokens_num_items_times_world,
                            tokens_over_global_count, triplet_margin)
from loss_programs3 import (kendall_free_parameter, kendall_loss_module, kendall_loss_module_not_wrapped,  # noqa: E402
                            center_loss, kendall_variable, losses_dict_summed)
from loss_programs4 import (adaptive_log_softmax, multitask_missing_labels, supcon_global_negatives,  # noqa: E402
                            tokens_count_gathered)
from loss_programs5 import (barlow_twins_as_printed, barlow_twins_differentiable,  # noqa: E402
                            barlow_twins_passthrough, counted_ce_per_replica, counted_ce_summed)

ALL = {f.__name__: f for f in (
    nll_class_weighted, ce_weight_ignore_smoothing, ce_criterion_outside_scope, bce_pos_weight,
    multilabel_soft_margin, huber_mean, huber_sum, poisson_nll, gaussian_nll, kldiv_batchmean, kldiv_log_target_sum,
    triplet_margin, cosine_embedding, margin_ranking, ctc_mean_zero_infinity, ctc_sum_zero_infinity,
    tokens_over_global_count, tokens_num_items_times_world, tokens_dist_all_reduce_as_printed,
    tokens_accumulation_num_items, accumulation_mean_over_steps,
    losses_dict_summed, kendall_loss_module, kendall_loss_module_not_wrapped, kendall_free_parameter,
    kendall_variable, center_loss,
    multitask_missing_labels, adaptive_log_softmax, supcon_global_negatives, tokens_count_gathered,
    barlow_twins_as_printed, barlow_twins_passthrough, barlow_twins_differentiable, counted_ce_per_replica,
    counted_ce_summed)}
ALL = only(ALL, "LOSS_ONLY")


class LossDdpPort(GenDdpPort):
    """A DDP rank, plus ``dist.get_world_size()``, a vector's mean over the ranks and a free tensor's copies."""

    def world_size(self) -> int:
        return torch.distributed.get_world_size()

    def means(self, value) -> list:
        t = value.detach().double().clone()
        torch.distributed.all_reduce(t)
        return (t / self.world).tolist()

    def tensor_spread(self, name: str, tensor) -> dict:
        flat = tensor.detach().double().reshape(-1)
        first = flat.clone()
        torch.distributed.broadcast(first, src=0)
        spread = (flat - first).abs().max()
        torch.distributed.all_reduce(spread, op=torch.distributed.ReduceOp.MAX)
        return {name: first.tolist(), f"{name}_spread": float(spread)}

    def gather_grad(self, z):
        from torch.distributed.nn.functional import all_gather
        return torch.cat(all_gather(z))

    def gather(self, t):
        out = [torch.empty_like(t) for _ in range(self.world)]
        torch.distributed.all_gather(out, t)
        return torch.cat(out)

    def rank_in_step(self) -> int:
        return torch.distributed.get_rank()

    def variable(self, t):   # no multidev here: a free parameter (the test compares with kendall_loss_module)
        return torch.nn.Parameter(t)

    def all_reduce_passthrough(self, c):   # the program as printed
        torch.distributed.all_reduce(c)
        return c

    def all_reduce_grad(self, c):
        from torch.distributed.nn.functional import all_reduce
        return all_reduce(c)


class LossMirroredPort(GenMirroredPort):
    """The multidev port: ``num_replicas_in_sync`` for the world size."""

    def world_size(self) -> int:
        return self.strategy.num_replicas_in_sync

    def means(self, value) -> list:
        return self.strategy.reduce("MEAN", value, axis=None).double().tolist()

    def tensor_spread(self, name: str, tensor) -> dict:
        copies = self.strategy.experimental_local_results(tensor)
        spread = max(float((c.detach() - copies[0].detach()).abs().max()) for c in copies)
        return {name: copies[0].detach().double().reshape(-1).tolist(), f"{name}_spread": spread}

    def gather_grad(self, z):
        import multidev as md
        return md.distribute.get_replica_context().all_gather(z, axis=0)

    gather = gather_grad

    def rank_in_step(self) -> int:
        import multidev as md
        return int(md.distribute.get_replica_context().replica_id_in_sync_group)

    def variable(self, t):
        import multidev as md
        return md.Variable(t)

    def all_reduce_passthrough(self, c):
        import multidev as md
        return md.distribute.get_replica_context().all_reduce("sum", c.detach()) + (c - c.detach())

    def all_reduce_grad(self, c):
        import multidev as md
        return md.distribute.get_replica_context().all_reduce("sum", c)


if __name__ == "__main__":   # a worker of `multidev launch` (TF_CONFIG), a DDP rank (RANK), or one process
    run_main("loss", ALL, LossMirroredPort, LossDdpPort)
