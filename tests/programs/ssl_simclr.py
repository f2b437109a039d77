"""SimCLR's NT-Xent against every replica's embeddings gathered with their gradients (``ssl_programs.py``'s
runners and port): VICReg's ``FullGatherLayer`` (an all-gather whose backward all-reduces, one device's
gradient) and Spijkervet/SimCLR's ``GatherLayer`` (each rank keeps its own slice of the gathered
gradient: the other ranks' loss terms are dropped), float64, the views coming with the batch.
This module imports only torch: the DDP runner must not import multidev.
"""
from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn
from torch.nn import functional as F

try:   # the runners put this directory on sys.path; pytest imports the package
    from programs import Program
    from ssl_programs import _views
except ImportError:
    from tests.programs.programs import Program
    from tests.programs.ssl_programs import _views


# --- the torch.distributed lines of the sources (ssl_port.py replaces them) --------------------------------
class FullGatherLayer(torch.autograd.Function):
    """VICReg's: gather tensors from all processes and support backward propagation for the gradients
    across processes."""

    @staticmethod
    def forward(ctx, x):
        output = [torch.zeros_like(x) for _ in range(dist.get_world_size())]
        dist.all_gather(output, x)
        return tuple(output)

    @staticmethod
    def backward(ctx, *grads):
        all_gradients = torch.stack(grads)
        dist.all_reduce(all_gradients)
        return all_gradients[dist.get_rank()]


class GatherLayer(torch.autograd.Function):
    """Spijkervet/SimCLR's: gather tensors from all processes, supporting backward propagation (each
    rank keeps its own slice of the gathered gradient, not all-reduced)."""

    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)
        output = [torch.zeros_like(input) for _ in range(dist.get_world_size())]
        dist.all_gather(output, input)
        return tuple(output)

    @staticmethod
    def backward(ctx, *grads):
        (input,) = ctx.saved_tensors
        grad_out = torch.zeros_like(input)
        grad_out[:] = grads[dist.get_rank()]
        return grad_out


def gather_own_gradient(x):
    return torch.cat(GatherLayer.apply(x), dim=0)


def ddp_gather_with_grad(x):
    return torch.cat(FullGatherLayer.apply(x), dim=0)


def gather_with_grad(x):
    return ddp_gather_with_grad(x)

def rank():
    return torch.distributed.get_rank()


# --- SimCLR's NT-Xent: this replica's embeddings against every replica's, gathered with gradients ---------------
def _simclr_build():
    torch.manual_seed(43)
    model = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 12), nn.ReLU(), nn.Linear(12, 8)).double()
    return {"model": model, "opt": torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)}


def nt_xent(z1, z2, temperature=0.5, gather=None):
    """Rows of this rank (``2n``) against the gathered ``[z1_0, z2_0, z1_1, z2_1, ...]`` (``2nW``)."""
    z = F.normalize(torch.cat([z1, z2]), dim=1)
    everyone = {None: gather_with_grad, "own": gather_own_gradient}.get(gather, gather)(z)
    n2 = z.shape[0]
    offset = n2 * rank()
    logits = z @ everyone.T / temperature
    own = torch.arange(n2) + offset
    logits[torch.arange(n2), own] = float("-inf")   # not itself
    positives = (torch.arange(n2) + n2 // 2) % n2 + offset
    return F.cross_entropy(logits, positives)


def _simclr_step(gather=None):
    def step(state, batch, carry):
        x_i, x_j = batch
        model, opt = state["model"], state["opt"]
        loss = nt_xent(model(x_i), model(x_j), gather=gather)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), carry
    return step


TORCH_DISTRIBUTED = (r"^ValueError: torch.distributed.get_world_size inside strategy.run: \w+Strategy's 2 replica.*"
                     r"get_replica_context\(\)")
SSL_SIMCLR = [
    # every replica's embeddings, with the gradients of every replica's loss: one device's NT-Xent
    Program("simclr_gathered_negatives", _simclr_build, _views(103), _simclr_step()),
    # each rank's gradient from its own loss only (the other ranks' terms dropped): the port gathers
    # detached embeddings and puts its own in its rows
    Program("simclr_own_slice_gather_layer", _simclr_build, _views(103), _simclr_step("own"), compare_one_device=False),
    # the FullGatherLayer kept as printed (torch.distributed inside strategy.run): refused with the fix
    Program("simclr_gather_layer_kept", _simclr_build, _views(103), _simclr_step(ddp_gather_with_grad),
            refused=TORCH_DISTRIBUTED, workers_refused=TORCH_DISTRIBUTED),
]
