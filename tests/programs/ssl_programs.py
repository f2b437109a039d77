"""Self-supervised programs as their public sources print them, as ``programs.py``'s ``Program``s
(same runners), float64, the two augmented views coming with the batch (the loaders' transforms):

* MoCo v2 (facebookresearch/moco ``builder.py``): the key encoder's momentum update under
  ``torch.no_grad()`` inside ``forward`` (``param_k.data = param_k.data * m + param_q.data * (1 - m)``,
  and a deep-copied key encoder updated with ``param_k.data.mul_(m).add_(param_q.data, alpha=1 - m)``),
  the negative queue buffer filled by ``_dequeue_and_enqueue``, shuffle-BN;
* BYOL (lucidrains/byol-pytorch): the target network's EMA by ``torch._foreach_lerp_`` inside the step,
  by ``lerp_`` or by ``ma_params.data = ...`` between steps (outside ``strategy.run``);
* SimSiam (facebookresearch/simsiam): the stop-gradient ``z.detach()``, ``fix_lr`` parameter groups;
* SimCLR: ``ssl_simclr.py``; DINO, mean teacher, distillation: ``ssl_programs2.py``.

The few lines that call ``torch.distributed`` are this module's functions ``concat_all_gather``,
``broadcast_from_first``, ``all_reduce_sum``, ``rank`` and ``world_size``, as the sources print them;
``ssl_port.py`` swaps in their multidev ports (the replica context's ``all_gather`` and ``all_reduce``),
as a port edits those lines. This module imports only torch (and numpy).
"""
from __future__ import annotations

import copy

import torch
import torch.distributed as dist
from torch import nn
from torch.nn import functional as F

try:   # the runners put this directory on sys.path; pytest imports the package
    from programs import F64, GLOBAL_BATCH, Program, _gen
except ImportError:
    from tests.programs.programs import F64, GLOBAL_BATCH, Program, _gen


# --- the torch.distributed lines of the sources (ssl_port.py replaces them) --------------------------------
@torch.no_grad()
def concat_all_gather(tensor):
    """MoCo's: every rank's tensor, concatenated (no gradient)."""
    tensors_gather = [torch.ones_like(tensor) for _ in range(torch.distributed.get_world_size())]
    torch.distributed.all_gather(tensors_gather, tensor, async_op=False)
    return torch.cat(tensors_gather, dim=0)


def broadcast_from_first(tensor):
    torch.distributed.broadcast(tensor, src=0)
    return tensor


def all_reduce_sum(tensor):
    dist.all_reduce(tensor)
    return tensor


def rank():
    return torch.distributed.get_rank()


def world_size():
    return dist.get_world_size()


# --- data: two augmented views of each example, as the loaders' TwoCropsTransform gives them -----------------
def _views(seed, steps=3, width=6):
    def batches():
        g = _gen(seed)
        out = []
        for _ in range(steps):
            x = torch.randn(GLOBAL_BATCH, width, generator=g, dtype=F64)
            x1 = x + 0.3 * torch.randn(GLOBAL_BATCH, width, generator=g, dtype=F64)
            x2 = x * (torch.rand(GLOBAL_BATCH, width, generator=g, dtype=F64) > 0.2)
            out.append((x1, x2))
        return out
    return batches


class Encoder(nn.Module):
    """A small stand-in for ``torchvision.models.__dict__[arch](num_classes=dim)``: a body and ``fc``."""

    def __init__(self, num_classes=8, width=6, hidden=12):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(width, hidden), nn.BatchNorm1d(hidden), nn.ReLU())
        self.fc = nn.Linear(hidden, num_classes)

    def forward(self, x):
        return self.fc(self.body(x))


# --- MoCo v2 (facebookresearch/moco, moco/builder.py) ---------------------------------------------------------
class MoCo(nn.Module):
    def __init__(self, base_encoder, dim=8, K=16, m=0.9, T=0.2, mlp=True, deepcopy_inplace=False):
        super().__init__()
        self.K, self.m, self.T = K, m, T
        self.deepcopy_inplace = deepcopy_inplace
        self.encoder_q = base_encoder(num_classes=dim)
        if mlp:   # hack: brute-force replacement
            dim_mlp = self.encoder_q.fc.weight.shape[1]
            self.encoder_q.fc = nn.Sequential(nn.Linear(dim_mlp, dim_mlp), nn.ReLU(), self.encoder_q.fc)
        if deepcopy_inplace:   # MoCo v3 and most re-implementations
            self.encoder_k = copy.deepcopy(self.encoder_q)
            for param_k in self.encoder_k.parameters():
                param_k.requires_grad = False
        else:
            self.encoder_k = base_encoder(num_classes=dim)
            if mlp:
                self.encoder_k.fc = nn.Sequential(nn.Linear(dim_mlp, dim_mlp), nn.ReLU(), self.encoder_k.fc)
            for param_q, param_k in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
                param_k.data.copy_(param_q.data)  # initialize
                param_k.requires_grad = False  # not update by gradient
        self.register_buffer("queue", torch.randn(dim, K))
        self.queue = nn.functional.normalize(self.queue, dim=0)
        self.register_buffer("queue_ptr", torch.zeros(1, dtype=torch.long))

    @torch.no_grad()
    def _momentum_update_key_encoder(self):
        for param_q, param_k in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
            if self.deepcopy_inplace:
                param_k.data.mul_(self.m).add_(param_q.data, alpha=1 - self.m)
            else:
                param_k.data = param_k.data * self.m + param_q.data * (1.0 - self.m)

    @torch.no_grad()
    def _dequeue_and_enqueue(self, keys):
        keys = concat_all_gather(keys)
        batch_size = keys.shape[0]
        ptr = int(self.queue_ptr)
        assert self.K % batch_size == 0  # for simplicity
        self.queue[:, ptr:ptr + batch_size] = keys.T
        ptr = (ptr + batch_size) % self.K  # move pointer
        self.queue_ptr[0] = ptr

    @torch.no_grad()
    def _batch_shuffle_ddp(self, x):
        batch_size_this = x.shape[0]
        x_gather = concat_all_gather(x)
        batch_size_all = x_gather.shape[0]
        num_gpus = batch_size_all // batch_size_this
        idx_shuffle = torch.randperm(batch_size_all)
        idx_shuffle = broadcast_from_first(idx_shuffle)
        idx_unshuffle = torch.argsort(idx_shuffle)
        gpu_idx = rank()
        idx_this = idx_shuffle.view(num_gpus, -1)[gpu_idx]
        return x_gather[idx_this], idx_unshuffle

    @torch.no_grad()
    def _batch_unshuffle_ddp(self, x, idx_unshuffle):
        batch_size_this = x.shape[0]
        x_gather = concat_all_gather(x)
        batch_size_all = x_gather.shape[0]
        num_gpus = batch_size_all // batch_size_this
        gpu_idx = rank()
        idx_this = idx_unshuffle.view(num_gpus, -1)[gpu_idx]
        return x_gather[idx_this]

    def forward(self, im_q, im_k):
        q = self.encoder_q(im_q)
        q = nn.functional.normalize(q, dim=1)
        with torch.no_grad():
            self._momentum_update_key_encoder()
            im_k, idx_unshuffle = self._batch_shuffle_ddp(im_k)   # shuffle for making use of BN
            k = self.encoder_k(im_k)
            k = nn.functional.normalize(k, dim=1)
            k = self._batch_unshuffle_ddp(k, idx_unshuffle)
        l_pos = torch.einsum("nc,nc->n", [q, k]).unsqueeze(-1)
        l_neg = torch.einsum("nc,ck->nk", [q, self.queue.clone().detach()])
        logits = torch.cat([l_pos, l_neg], dim=1)
        logits /= self.T
        labels = torch.zeros(logits.shape[0], dtype=torch.long)
        self._dequeue_and_enqueue(k)
        return logits, labels


def _moco_build(deepcopy_inplace):
    def build():
        torch.manual_seed(40)
        model = MoCo(Encoder, deepcopy_inplace=deepcopy_inplace).double()
        optimizer = torch.optim.SGD(model.parameters(), 0.3, momentum=0.9, weight_decay=1e-4)
        return {"model": model, "optimizer": optimizer, "criterion": nn.CrossEntropyLoss()}
    return build


def _moco_step(state, batch, carry):
    images = batch
    output, target = state["model"](im_q=images[0], im_k=images[1])
    loss = state["criterion"](output, target)
    state["optimizer"].zero_grad()
    loss.backward()
    state["optimizer"].step()
    return loss.detach(), carry


def _moco_observe(state) -> list:
    model = getattr(state["model"], "module", state["model"])
    return [float(model.queue_ptr)] + model.queue.detach().reshape(-1).tolist()


# --- BYOL (lucidrains/byol-pytorch): online network + predictor, EMA target -----------------------------------
def _mlp(dim_in, hidden, dim_out):
    return nn.Sequential(nn.Linear(dim_in, hidden), nn.BatchNorm1d(hidden), nn.ReLU(inplace=True),
                         nn.Linear(hidden, dim_out))


def loss_fn(x, y):
    x = F.normalize(x, dim=-1, p=2)
    y = F.normalize(y, dim=-1, p=2)
    return 2 - 2 * (x * y).sum(dim=-1)


class BYOL(nn.Module):
    def __init__(self, moving_average_decay=0.9):
        super().__init__()
        self.online_encoder = nn.Sequential(Encoder(num_classes=10), _mlp(10, 12, 8))   # net + projector
        self.online_predictor = _mlp(8, 12, 8)
        self.target_encoder = copy.deepcopy(self.online_encoder)
        for p in self.target_encoder.parameters():
            p.requires_grad = False
        self.beta = moving_average_decay

    def update_moving_average(self, spelling):
        with torch.no_grad():
            self._update_moving_average(spelling)

    def _update_moving_average(self, spelling):
        online, target = list(self.online_encoder.parameters()), list(self.target_encoder.parameters())
        if spelling == "foreach_lerp":   # timm's ModelEmaV3, in the step
            torch._foreach_lerp_(target, online, 1.0 - self.beta)
        elif spelling == "lerp":
            for ma_params, current_params in zip(target, online):
                ma_params.lerp_(current_params, 1.0 - self.beta)
        else:   # lucidrains' update_moving_average
            for current_params, ma_params in zip(online, target):
                old_weight, up_weight = ma_params.data, current_params.data
                ma_params.data = old_weight * self.beta + (1 - self.beta) * up_weight

    def forward(self, image_one, image_two):
        online_pred_one = self.online_predictor(self.online_encoder(image_one))
        online_pred_two = self.online_predictor(self.online_encoder(image_two))
        with torch.no_grad():
            target_proj_one = self.target_encoder(image_one).detach()
            target_proj_two = self.target_encoder(image_two).detach()
        loss_one = loss_fn(online_pred_one, target_proj_two.detach())
        loss_two = loss_fn(online_pred_two, target_proj_one.detach())
        return (loss_one + loss_two).mean()


def _byol_build():
    torch.manual_seed(41)
    learner = BYOL().double()
    return {"model": learner, "opt": torch.optim.Adam(learner.parameters(), lr=3e-3)}


def _byol_step(spelling):
    def step(state, batch, carry):
        learner, opt = state["model"], state["opt"]
        loss = learner(*batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if spelling == "foreach_lerp_with_grad":   # no torch.no_grad(): the target's parameters turn non-leaf
            getattr(learner, "module", learner)._update_moving_average("foreach_lerp")
        elif spelling is not None:   # in the loop body: each DDP rank, each replica, updates its own copy
            getattr(learner, "module", learner).update_moving_average(spelling)
        return loss.detach(), carry
    return step


def _byol_between_steps(spelling):
    def after_step(state, i):   # outside strategy.run: once, on the one set of weights
        learner = state["model"]
        with torch.no_grad():
            getattr(learner, "module", learner).update_moving_average(spelling)
    return after_step


# --- SimSiam (facebookresearch/simsiam, simsiam/builder.py and main_simsiam.py) -------------------------------
class SimSiam(nn.Module):
    def __init__(self, base_encoder, dim=8, pred_dim=4):
        super().__init__()
        self.encoder = base_encoder(num_classes=dim)
        prev_dim = self.encoder.fc.weight.shape[1]
        self.encoder.fc = nn.Sequential(nn.Linear(prev_dim, prev_dim, bias=False), nn.BatchNorm1d(prev_dim),
                                        nn.ReLU(inplace=True), self.encoder.fc, nn.BatchNorm1d(dim, affine=False))
        self.encoder.fc[3].bias.requires_grad = False   # hack: not use bias as it is followed by BN
        self.predictor = nn.Sequential(nn.Linear(dim, pred_dim, bias=False), nn.BatchNorm1d(pred_dim),
                                       nn.ReLU(inplace=True), nn.Linear(pred_dim, dim))

    def forward(self, x1, x2):
        z1 = self.encoder(x1)
        z2 = self.encoder(x2)
        p1 = self.predictor(z1)
        p2 = self.predictor(z2)
        return p1, p2, z1.detach(), z2.detach()


def _simsiam_build():
    torch.manual_seed(42)
    model = SimSiam(Encoder).double()
    optim_params = [{"params": model.encoder.parameters(), "fix_lr": False},
                    {"params": model.predictor.parameters(), "fix_lr": True}]
    return {"model": model, "optimizer": torch.optim.SGD(optim_params, 0.1, momentum=0.9, weight_decay=1e-4),
            "criterion": nn.CosineSimilarity(dim=1)}


def _simsiam_step(state, batch, carry):
    images = batch
    p1, p2, z1, z2 = state["model"](x1=images[0], x2=images[1])
    loss = -(state["criterion"](p1, z2).mean() + state["criterion"](p2, z1).mean()) * 0.5
    state["optimizer"].zero_grad()
    loss.backward()
    state["optimizer"].step()
    return loss.detach(), carry


SSL_PROGRAMS = [
    # BatchNorm normalises each replica's half (each rank's): DDP's result, not one device's
    Program("moco_v2", _moco_build(False), _views(100), _moco_step, observe=_moco_observe, compare_one_device=False),
    Program("moco_deepcopy_inplace_momentum", _moco_build(True), _views(100), _moco_step, observe=_moco_observe,
            compare_one_device=False),
    Program("byol_foreach_lerp_in_step", _byol_build, _views(101), _byol_step("foreach_lerp"), compare_one_device=False,
            tolerance=1e-10),
    # the EMA recorded by autograd (each step's graph kept alive, under DDP too): the same numbers
    Program("byol_foreach_lerp_outside_no_grad", _byol_build, _views(101), _byol_step("foreach_lerp_with_grad"),
            compare_one_device=False, tolerance=1e-10),
    Program("byol_foreach_lerp_between_steps", _byol_build, _views(101), _byol_step(None), compare_one_device=False,
            after_step=_byol_between_steps("foreach_lerp"), tolerance=1e-10),
    Program("byol_lerp_between_steps", _byol_build, _views(101), _byol_step(None), compare_one_device=False,
            after_step=_byol_between_steps("lerp"), tolerance=1e-10),
    Program("byol_data_assign_between_steps", _byol_build, _views(101), _byol_step(None), compare_one_device=False,
            after_step=_byol_between_steps("data"), tolerance=1e-10),
    Program("byol_data_assign_in_step", _byol_build, _views(101), _byol_step("data"), compare_one_device=False,
            tolerance=1e-10),
    Program("simsiam", _simsiam_build, _views(102), _simsiam_step, compare_one_device=False),
]
