"""Teacher-student programs as their public sources print them (same runners as ``ssl_programs.py``,
whose module-level collectives ``ssl_port.py`` replaces), float64:

* DINO (facebookresearch/dino ``main_dino.py``): a student with stochastic depth (``drop_path``) and a
  weight-normalised last layer frozen for the first steps (``cancel_gradients_last_layer``), the teacher
  a copy loaded from the student's ``state_dict`` with ``requires_grad = False``, updated by
  ``param_k.data.mul_(m).add_((1 - m) * param_q.detach().data)`` in the loop body; ``DINOLoss`` with its
  ``center`` buffer moved by the all-reduced batch center and its teacher temperature schedule; the
  learning-rate, weight-decay and momentum schedules written into ``param_groups`` every step;
  ``clip_gradients``;
* mean teacher / FixMatch: FixMatch's ``ModelEMA`` (``deepcopy``, ``eval()``, its ``update(model)`` through
  both ``state_dict``s after ``optimizer.step()``), pseudo-labels of the EMA teacher on the weak view
  with a confidence mask, dropout on in the student;
* knowledge distillation with a frozen teacher (``requires_grad_(False)``, ``teacher.eval()``, KL with a
  temperature).

This module imports only torch and numpy: the DDP runner must not import multidev.
"""
from __future__ import annotations

import copy
import math

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn import functional as F

try:   # the runners put this directory on sys.path; pytest imports the package
    from programs import F64, GLOBAL_BATCH, Program, _gen
except ImportError:
    from tests.programs.programs import F64, GLOBAL_BATCH, Program, _gen

STEPS = 4


# --- the torch.distributed lines of DINOLoss.update_center (ssl_port.py replaces them) ------------------------
def all_reduce_sum(tensor):
    dist.all_reduce(tensor)
    return tensor


def world_size():
    return dist.get_world_size()


# --- DINO (facebookresearch/dino: vision_transformer.py, main_dino.py, utils.py) ------------------------------
def drop_path(x, drop_prob: float = 0., training: bool = False):
    if drop_prob == 0. or not training:
        return x
    keep_prob = 1 - drop_prob
    shape = (x.shape[0],) + (1,) * (x.ndim - 1)  # work with diff dim tensors, not just 2D ConvNets
    random_tensor = keep_prob + torch.rand(shape, dtype=x.dtype, device=x.device)
    random_tensor.floor_()  # binarize
    output = x.div(keep_prob) * random_tensor
    return output


class Block(nn.Module):
    """A residual MLP block with stochastic depth, standing in for the ViT's."""

    def __init__(self, dim, drop_path_rate):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        self.drop_path_rate = drop_path_rate

    def forward(self, x):
        return x + drop_path(self.mlp(self.norm(x)), self.drop_path_rate, self.training)


class DINOHead(nn.Module):
    def __init__(self, in_dim, out_dim, hidden_dim=12, bottleneck_dim=6, norm_last_layer=True, old_weight_norm=False):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(in_dim, hidden_dim), nn.GELU(), nn.Linear(hidden_dim, bottleneck_dim))
        self.apply(self._init_weights)
        if old_weight_norm:   # as printed: torch.nn.utils.weight_norm (deprecated, a forward pre-hook)
            self.last_layer = nn.utils.weight_norm(nn.Linear(bottleneck_dim, out_dim, bias=False))
            self.last_layer.weight_g.data.fill_(1)
            if norm_last_layer:
                self.last_layer.weight_g.requires_grad = False
            return
        self.last_layer = nn.utils.parametrizations.weight_norm(nn.Linear(bottleneck_dim, out_dim, bias=False))
        self.last_layer.parametrizations.weight.original0.data.fill_(1)
        if norm_last_layer:
            self.last_layer.parametrizations.weight.original0.requires_grad = False

    def _init_weights(self, m):
        if isinstance(m, nn.Linear):
            nn.init.trunc_normal_(m.weight, std=.02)
            if m.bias is not None:
                nn.init.constant_(m.bias, 0)

    def forward(self, x):
        x = self.mlp(x)
        x = nn.functional.normalize(x, dim=-1, p=2)
        return self.last_layer(x)


class MultiCropWrapper(nn.Module):
    """The crops (same resolution here) through the backbone at once, then the head."""

    def __init__(self, backbone, head):
        super().__init__()
        self.backbone, self.head = backbone, head

    def forward(self, x):
        if not isinstance(x, list):
            x = [x]
        return self.head(self.backbone(torch.cat(x)))


def _dino_net(drop_path_rate, old_weight_norm=False):
    backbone = nn.Sequential(nn.Linear(6, 8), Block(8, drop_path_rate), Block(8, drop_path_rate))
    return MultiCropWrapper(backbone, DINOHead(8, 10, old_weight_norm=old_weight_norm))


class DINOLoss(nn.Module):
    def __init__(self, out_dim, ncrops, warmup_teacher_temp, teacher_temp, warmup_teacher_temp_epochs, nepochs,
                 student_temp=0.1, center_momentum=0.9):
        super().__init__()
        self.student_temp = student_temp
        self.center_momentum = center_momentum
        self.ncrops = ncrops
        self.register_buffer("center", torch.zeros(1, out_dim))
        self.teacher_temp_schedule = np.concatenate((
            np.linspace(warmup_teacher_temp, teacher_temp, warmup_teacher_temp_epochs),
            np.ones(nepochs - warmup_teacher_temp_epochs) * teacher_temp))

    def forward(self, student_output, teacher_output, epoch):
        student_out = student_output / self.student_temp
        student_out = student_out.chunk(self.ncrops)
        temp = self.teacher_temp_schedule[epoch]
        teacher_out = F.softmax((teacher_output - self.center) / temp, dim=-1)
        teacher_out = teacher_out.detach().chunk(2)
        total_loss = 0
        n_loss_terms = 0
        for iq, q in enumerate(teacher_out):
            for v in range(len(student_out)):
                if v == iq:
                    continue  # we skip cases where student and teacher operate on the same view
                loss = torch.sum(-q * F.log_softmax(student_out[v], dim=-1), dim=-1)
                total_loss += loss.mean()
                n_loss_terms += 1
        total_loss /= n_loss_terms
        self.update_center(teacher_output)
        return total_loss

    @torch.no_grad()
    def update_center(self, teacher_output):
        batch_center = torch.sum(teacher_output, dim=0, keepdim=True)
        batch_center = all_reduce_sum(batch_center)
        batch_center = batch_center / (len(teacher_output) * world_size())
        self.center = self.center * self.center_momentum + batch_center * (1 - self.center_momentum)


def cosine_scheduler(base_value, final_value, epochs, niter_per_ep, warmup_epochs=0, start_warmup_value=0):
    warmup_schedule = np.array([])
    warmup_iters = warmup_epochs * niter_per_ep
    if warmup_epochs > 0:
        warmup_schedule = np.linspace(start_warmup_value, base_value, warmup_iters)
    iters = np.arange(epochs * niter_per_ep - warmup_iters)
    schedule = final_value + 0.5 * (base_value - final_value) * (1 + np.cos(np.pi * iters / len(iters)))
    return np.concatenate((warmup_schedule, schedule))


def get_params_groups(model):
    regularized, not_regularized = [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        if name.endswith(".bias") or len(param.shape) == 1:   # we do not regularize biases nor Norm parameters
            not_regularized.append(param)
        else:
            regularized.append(param)
    return [{"params": regularized}, {"params": not_regularized, "weight_decay": 0.}]


def clip_gradients(model, clip):
    norms = []
    for name, p in model.named_parameters():
        if p.grad is not None:
            param_norm = p.grad.data.norm(2)
            norms.append(param_norm.item())
            clip_coef = clip / (param_norm + 1e-6)
            if clip_coef < 1:
                p.grad.data.mul_(clip_coef)
    return norms


def cancel_gradients_last_layer(epoch, model, freeze_last_layer):
    if epoch >= freeze_last_layer:
        return
    for n, p in model.named_parameters():
        if "last_layer" in n:
            p.grad = None


def _dino_build(old_weight_norm=False):
    torch.manual_seed(44)
    student, teacher = _dino_net(0.2, old_weight_norm).double(), _dino_net(0.0, old_weight_norm).double()
    teacher.load_state_dict(student.state_dict())   # teacher and student start with the same weights
    for p in teacher.parameters():
        p.requires_grad = False   # there is no backpropagation through the teacher
    dino_loss = DINOLoss(10, 3, 0.04, 0.07, 2, STEPS).double()
    return {"student": student, "teacher": teacher, "dino_loss": dino_loss,
            "optimizer": torch.optim.AdamW(get_params_groups(student)),
            "lr_schedule": cosine_scheduler(5e-3, 1e-4, STEPS, 1, warmup_epochs=1),
            "wd_schedule": cosine_scheduler(0.04, 0.4, STEPS, 1),
            "momentum_schedule": cosine_scheduler(0.9, 1, STEPS, 1)}


def _multi_crop_batches():
    g = _gen(104)
    out = []
    for _ in range(STEPS):
        x = torch.randn(GLOBAL_BATCH, 6, generator=g, dtype=F64)
        out.append(tuple(x + s * torch.randn(GLOBAL_BATCH, 6, generator=g, dtype=F64) for s in (0.2, 0.2, 0.5)))
    return out


#: DINO builds its loss apart from the networks (``DINOLoss(...).cuda()`` in main_dino.py): here before any
#: strategy exists, as a port that leaves it outside ``strategy.scope()`` does
SHARED_DINO_LOSS = DINOLoss(10, 3, 0.04, 0.07, 2, STEPS).double()


def _dino_loss_outside_build():
    state = _dino_build()
    SHARED_DINO_LOSS.center.zero_()
    state["dino_loss"] = SHARED_DINO_LOSS
    return state


def _dino_step(state, batch, carry):
    """``train_one_epoch``'s body (one iteration per epoch: ``it == epoch``)."""
    (epoch,) = carry
    it = epoch = int(epoch)
    student, teacher, optimizer = state["student"], state["teacher"], state["optimizer"]
    for i, param_group in enumerate(optimizer.param_groups):
        param_group["lr"] = state["lr_schedule"][it]
        if i == 0:  # only the first group is regularized
            param_group["weight_decay"] = state["wd_schedule"][it]
    images = list(batch)
    teacher_output = teacher(images[:2])  # only the 2 global views pass through the teacher
    student_output = student(images)
    loss = state["dino_loss"](student_output, teacher_output, epoch)
    if not math.isfinite(loss.item()):
        raise RuntimeError(f"Loss is {loss.item()}, stopping training")
    optimizer.zero_grad()
    loss.backward()
    clip_gradients(student, 0.05)
    cancel_gradients_last_layer(epoch, student, 2)
    optimizer.step()
    with torch.no_grad():   # EMA update for the teacher
        m = state["momentum_schedule"][it]
        for param_q, param_k in zip(getattr(student, "module", student).parameters(), teacher.parameters()):
            param_k.data.mul_(m).add_((1 - m) * param_q.detach().data)
    return loss.detach(), (carry[0] + 1,)


def _dino_observe(state) -> list:
    return state["dino_loss"].center.detach().reshape(-1).tolist()


# --- mean teacher / FixMatch: FixMatch-pytorch's ModelEMA, pseudo-labels with a confidence mask -----------------
class ModelEMA(object):
    def __init__(self, model, decay):
        self.ema = copy.deepcopy(model)
        self.ema.eval()
        self.decay = decay
        self.ema_has_module = hasattr(self.ema, "module")
        self.param_keys = [k for k, _ in self.ema.named_parameters()]
        self.buffer_keys = [k for k, _ in self.ema.named_buffers()]
        for p in self.ema.parameters():
            p.requires_grad_(False)

    def update(self, model):
        needs_module = hasattr(model, "module") and not self.ema_has_module
        with torch.no_grad():
            msd = model.state_dict()
            esd = self.ema.state_dict()
            for k in self.param_keys:
                j = "module." + k if needs_module else k
                model_v = msd[j].detach()
                ema_v = esd[k]
                esd[k].copy_(ema_v * self.decay + (1. - self.decay) * model_v)
            for k in self.buffer_keys:
                j = "module." + k if needs_module else k
                esd[k].copy_(msd[j])


def _classifier(dropout):
    return nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Dropout(dropout), nn.Linear(12, 3))


def _fixmatch_build():
    torch.manual_seed(45)
    model = _classifier(0.3).double()
    ema_model = ModelEMA(model, 0.8)
    return {"model": model, "ema_model": ema_model, "ema": ema_model.ema,
            "optimizer": torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)}


def _semi_batches():
    g = _gen(105)
    out = []
    for _ in range(3):
        x = torch.randn(GLOBAL_BATCH, 6, generator=g, dtype=F64)
        u = torch.randn(GLOBAL_BATCH, 6, generator=g, dtype=F64)
        y = torch.randint(0, 3, (GLOBAL_BATCH,), generator=g)
        out.append((x, y, u + 0.1 * torch.randn(GLOBAL_BATCH, 6, generator=g, dtype=F64),
                    u + 0.6 * torch.randn(GLOBAL_BATCH, 6, generator=g, dtype=F64)))
    return out


def _fixmatch_step(state, batch, carry):
    inputs_x, targets_x, inputs_u_w, inputs_u_s = batch
    model, ema_model, optimizer = state["model"], state["ema_model"], state["optimizer"]
    model.train()
    logits_x = model(inputs_x)
    with torch.no_grad():   # the mean teacher's targets on the weak view
        pseudo_label = torch.softmax(ema_model.ema(inputs_u_w) / 1.0, dim=-1)
    max_probs, targets_u = torch.max(pseudo_label, dim=-1)
    mask = max_probs.ge(0.4).double()
    Lx = F.cross_entropy(logits_x, targets_x, reduction="mean")
    Lu = (F.cross_entropy(model(inputs_u_s), targets_u, reduction="none") * mask).mean()
    loss = Lx + 1.0 * Lu
    loss.backward()
    optimizer.step()
    ema_model.update(model)
    model.zero_grad()
    return loss.detach(), carry


# --- knowledge distillation: a frozen teacher in eval mode, KL with a temperature ------------------------------
def _kd_build():
    torch.manual_seed(46)
    teacher = nn.Sequential(nn.Linear(6, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.5), nn.Linear(16, 3)).double()
    with torch.no_grad():   # "pretrained": running statistics of its own
        teacher.train()(torch.randn(32, 6, dtype=F64) * 2.0 + 0.5)
    teacher.requires_grad_(False)
    teacher.eval()
    student = _classifier(0.1).double()
    return {"model": student, "teacher": teacher, "opt": torch.optim.Adam(student.parameters(), lr=1e-2)}


def _kd_step(state, batch, carry, T=4.0, alpha=0.7):
    x, y = batch
    student, teacher, opt = state["model"], state["teacher"], state["opt"]
    with torch.no_grad():
        teacher_logits = teacher(x)
    logits = student(x)
    soft = F.kl_div(F.log_softmax(logits / T, dim=-1), F.softmax(teacher_logits / T, dim=-1),
                    reduction="batchmean") * (T * T)
    loss = alpha * soft + (1 - alpha) * F.cross_entropy(logits, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.detach(), carry


def _labelled_batches():
    g = _gen(106)
    return [(torch.randn(GLOBAL_BATCH, 6, generator=g, dtype=F64), torch.randint(0, 3, (GLOBAL_BATCH,), generator=g))
            for _ in range(3)]


def _teacher_buffers(state) -> list:
    teacher = state["teacher"]
    return [float(b.sum()) for b in teacher.buffers()] + [float(teacher.training)]


SHARED_BUFFER = (r"^ValueError: Assigning a new tensor to buffer 'center' of DINOLoss inside MirroredStrategy.run: the "
                 r"module was built outside MirroredStrategy.scope\(\).*"
                 r"Build the module inside `with strategy.scope\(\):`")
EPOCH = lambda batch_size: (torch.zeros((), dtype=F64),)   # noqa: E731 - the epoch index, carried
SSL_PROGRAMS2 = [
    # drop_path draws in the step (each replica as its rank): DDP's result, not one device's
    Program("dino", _dino_build, _multi_crop_batches, _dino_step, models=("student",), averaged=("teacher",),
            initial_carry=EPOCH, observe=_dino_observe, compare_one_device=False, tolerance=1e-10),
    Program("dino_old_weight_norm", lambda: _dino_build(old_weight_norm=True), _multi_crop_batches, _dino_step,
            models=("student",), averaged=("teacher",), initial_carry=EPOCH, observe=_dino_observe,
            compare_one_device=False, tolerance=1e-10),   # its pre-hook's module.weight: per replica
    # one DINOLoss for the 2 replicas of a process (refused); one per worker process with one replica each: DDP's
    Program("dino_loss_built_outside_scope", _dino_loss_outside_build, _multi_crop_batches, _dino_step,
            models=("student",), averaged=("teacher",), initial_carry=EPOCH, observe=_dino_observe,
            compare_one_device=False, tolerance=1e-10, refused=SHARED_BUFFER),
    Program("fixmatch_mean_teacher", _fixmatch_build, _semi_batches, _fixmatch_step, averaged=("ema",),
            compare_one_device=False),
    Program("distillation_frozen_teacher", _kd_build, _labelled_batches, _kd_step, averaged=("teacher",),
            observe=_teacher_buffers, compare_one_device=False),
]
