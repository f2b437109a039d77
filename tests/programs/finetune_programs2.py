"""``finetune_programs.py``'s second half, as public sources write them:

* BatchNorm frozen in eval mode inside a training model: ``model.train(); model.apply(set_bn_eval)`` at each
  epoch's start (mmdetection's ``norm_eval``, the Faster R-CNN fine-tuning recipes), with and without the BN
  affine parameters frozen too, between epochs and in the step;
* distillation from a frozen teacher (Hinton's KD: ``KLDivLoss(reduction="batchmean")`` on temperature-scaled
  log-softmax / softmax, ``* T * T``, plus the hard-label loss), the teacher run under ``torch.no_grad()`` in
  eval mode, built in the scope or outside it;
* prompt tuning: a trainable ``nn.Parameter`` prefix concatenated to a frozen embedding's output, a frozen
  encoder, only the prompt and the head in the optimizer;
* tied weights (``lm_head.weight = embed.weight``) with the embedding frozen (the head with it), and a tied
  model where only the embedding's tie trains;
* loralib's ``Linear`` (microsoft/LoRA): ``mark_only_lora_as_trainable``, the update merged into the frozen
  weight by ``model.eval()`` and taken out again by ``model.train()`` (its ``train`` override, guarded by
  ``self.merged``), with the evaluation between steps or inside the step;
* EWC (elastic weight consolidation) when fine-tuning on a new task: the diagonal Fisher from squared
  gradients of a backward pass outside the loop (``if p.grad is not None: fisher[n] += p.grad.data ** 2``),
  then the penalty ``lambda * F * (p - p_old) ** 2`` in the step; and a gradient-norm probe between steps.

Imports only torch (and ``finetune_programs``)."""
from __future__ import annotations

import math

import torch
from torch import nn, optim
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from finetune_programs import CLASSES, EPOCH, F64, GLOBAL_BATCH, WIDTH, loader, outputs, probe, train


class BNNet(nn.Module):
    def __init__(self, hidden: int = 8):
        super().__init__()
        self.fc1, self.bn1 = nn.Linear(WIDTH, hidden), nn.BatchNorm1d(hidden)
        self.drop = nn.Dropout(0.2)
        self.head = nn.Linear(hidden, CLASSES)

    def forward(self, x):
        return self.head(self.drop(F.relu(self.bn1(self.fc1(x)))))


def set_bn_eval(m):
    classname = m.__class__.__name__
    if classname.find("BatchNorm") != -1:
        m.eval()


def _bn_eval(port, in_step: bool, freeze_affine: bool) -> dict:
    torch.manual_seed(90)
    with port.scope():
        model = BNNet().double()
        model.bn1.running_mean.normal_()   # "pretrained" statistics the fine-tuning keeps
        model.bn1.running_var.uniform_(0.5, 2.0)
        if freeze_affine:
            for p in model.bn1.parameters():
                p.requires_grad = False
        optimizer = optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1, momentum=0.9)
    model = port.wrap(model)

    def epoch_start(i):
        if i % EPOCH == 0:
            model.train()
            model.apply(set_bn_eval)

    hooks = {"before": epoch_start} if in_step else {"between": lambda i: epoch_start(i + 1)}
    if not in_step:
        epoch_start(0)
    log = train(port, model, optimizer, loader(91, 2 * EPOCH), **hooks)
    model.eval()
    return {**port.weights(model), **port.buffers(model), "log": log, "outputs": outputs(port, model)}


def bn_eval_between_epochs(port) -> dict:
    return _bn_eval(port, in_step=False, freeze_affine=False)


def bn_eval_in_step(port) -> dict:
    return _bn_eval(port, in_step=True, freeze_affine=False)


def bn_eval_affine_frozen(port) -> dict:
    return _bn_eval(port, in_step=False, freeze_affine=True)


# --- distillation from a frozen teacher -------------------------------------------------------------------------
class Teacher(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(WIDTH, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.3),
                                 nn.Linear(16, CLASSES))

    def forward(self, x):
        return self.net(x)


def _distill(port, teacher_in_scope: bool, T: float = 2.0, alpha: float = 0.7) -> dict:
    torch.manual_seed(100)
    teacher = None if teacher_in_scope else Teacher().double()
    with port.scope():
        teacher = teacher or Teacher().double()
        student = nn.Sequential(nn.Linear(WIDTH, 8), nn.ReLU(), nn.Dropout(0.1), nn.Linear(8, CLASSES)).double()
        optimizer = optim.Adam(student.parameters(), lr=0.05)
    teacher.eval()
    for p in teacher.parameters():
        p.requires_grad = False
    student = port.wrap(student)
    kd = nn.KLDivLoss(reduction="batchmean")

    def loss_fn(x, y):
        with torch.no_grad():
            teacher_logits = teacher(x)
        logits = student(x)
        soft = kd(F.log_softmax(logits / T, dim=1), F.softmax(teacher_logits / T, dim=1)) * (T * T)
        return alpha * soft + (1 - alpha) * F.cross_entropy(logits, y)

    log = train(port, student, optimizer, loader(101, 4), loss_fn=loss_fn)
    student.eval()
    return {**port.weights(student, teacher), **port.buffers(teacher), "log": log,
            "outputs": outputs(port, student)}


def distill_teacher_in_scope(port) -> dict:
    return _distill(port, teacher_in_scope=True)


def distill_teacher_outside_scope(port) -> dict:
    return _distill(port, teacher_in_scope=False)


# --- prompt tuning and tied weights over a frozen embedding ---------------------------------------------------
VOCAB, SEQ, DIM = 11, 5, 6


def tokens(seed: int, steps: int) -> DataLoader:
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, VOCAB, (steps * GLOBAL_BATCH, SEQ), generator=g)
    y = torch.randint(0, CLASSES, (steps * GLOBAL_BATCH,), generator=g)
    return DataLoader(TensorDataset(x, y), batch_size=GLOBAL_BATCH)


class PromptTuned(nn.Module):
    """A frozen "pretrained" embedding and GRU encoder; a learned soft prompt prepended to each sequence."""

    def __init__(self, n_prompt: int = 3):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.encoder = nn.GRU(DIM, DIM, batch_first=True)
        self.prompt = nn.Parameter(torch.randn(n_prompt, DIM) * 0.5)
        self.head = nn.Linear(DIM, CLASSES)

    def forward(self, ids):
        prompt = self.prompt.unsqueeze(0).expand(ids.shape[0], -1, -1)
        h, _ = self.encoder(torch.cat([prompt, self.embed(ids)], dim=1))
        return self.head(h[:, -1])


def prompt_tuning(port) -> dict:
    torch.manual_seed(110)
    with port.scope():
        model = PromptTuned().double()
        for p in model.embed.parameters():
            p.requires_grad = False
        model.encoder.requires_grad_(False)
        optimizer = optim.Adam([model.prompt, *model.head.parameters()], lr=0.05)
    model = port.wrap(model)
    log = train(port, model, optimizer, tokens(111, 4))
    ids = torch.randint(0, VOCAB, (4, SEQ), generator=torch.Generator().manual_seed(112))
    return {**port.weights(model), "log": log, "outputs": outputs(port, model, ids)}


class TiedLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.mix = nn.Linear(DIM, DIM)
        self.lm_head = nn.Linear(DIM, VOCAB)
        self.lm_head.weight = self.embed.weight

    def forward(self, ids):
        return self.lm_head(torch.tanh(self.mix(self.embed(ids))))


def _tied(port, freeze: str) -> dict:
    """Next-token loss; ``freeze``: "attr" (``embed.weight.requires_grad = False``: the head's weight is the same
    parameter), "module" (``embed.requires_grad_(False)``), or "none" (the tie trains from both uses)."""
    torch.manual_seed(120)
    with port.scope():
        model = TiedLM().double()
        if freeze == "attr":
            model.embed.weight.requires_grad = False
        elif freeze == "module":
            model.embed.requires_grad_(False)
        optimizer = optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=0.05)
    model = port.wrap(model)

    def loss_fn(ids, _):
        logits = model(ids[:, :-1])
        return F.cross_entropy(logits.reshape(-1, VOCAB), ids[:, 1:].reshape(-1))

    log = train(port, model, optimizer, tokens(121, 4), loss_fn=loss_fn)
    m = port.module(model)
    ids = torch.randint(0, VOCAB, (3, SEQ), generator=torch.Generator().manual_seed(122))
    return {**port.weights(model), "log": log, "outputs": outputs(port, model, ids),
            "tied": m.lm_head.weight is m.embed.weight}


def tied_embedding_frozen_attr(port) -> dict:
    return _tied(port, "attr")


def tied_embedding_frozen_module(port) -> dict:
    return _tied(port, "module")


def tied_embedding_trained(port) -> dict:
    return _tied(port, "none")


# --- loralib's Linear: merged by eval(), unmerged by train() -----------------------------------------------------
class LoraLinear(nn.Linear):
    """loralib's ``Linear`` (``merge_weights=True``, no dropout, ``fan_in_fan_out=False``)."""

    def __init__(self, in_features, out_features, r=2, lora_alpha=4, merge_weights=True):
        nn.Linear.__init__(self, in_features, out_features)
        self.r, self.lora_alpha, self.merge_weights, self.merged = r, lora_alpha, merge_weights, False
        self.lora_A = nn.Parameter(self.weight.new_zeros((r, in_features)))
        self.lora_B = nn.Parameter(self.weight.new_zeros((out_features, r)))
        self.scaling = self.lora_alpha / self.r
        self.weight.requires_grad = False
        self.reset_parameters()

    def reset_parameters(self):
        nn.Linear.reset_parameters(self)
        if hasattr(self, "lora_A"):
            nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
            nn.init.normal_(self.lora_B, std=0.1)   # zeros in loralib; nonzero so A trains from the first step

    def train(self, mode: bool = True):
        nn.Linear.train(self, mode)
        if mode:
            if self.merge_weights and self.merged:
                self.weight.data -= (self.lora_B @ self.lora_A) * self.scaling
                self.merged = False
        else:
            if self.merge_weights and not self.merged:
                self.weight.data += (self.lora_B @ self.lora_A) * self.scaling
                self.merged = True
        return self

    def forward(self, x):
        if self.r > 0 and not self.merged:
            result = F.linear(x, self.weight, bias=self.bias)
            return result + (x @ self.lora_A.transpose(0, 1) @ self.lora_B.transpose(0, 1)) * self.scaling
        return F.linear(x, self.weight, bias=self.bias)


def mark_only_lora_as_trainable(model: nn.Module) -> None:
    for n, p in model.named_parameters():
        if "lora_" not in n:
            p.requires_grad = False


def _loralib(port, eval_in_step: bool) -> dict:
    """Each step trains in train mode; every second step then evaluates its batch in eval mode (merged weights),
    in the step or between steps."""
    torch.manual_seed(130)
    with port.scope():
        model = nn.Sequential(LoraLinear(WIDTH, 8), nn.ReLU(), LoraLinear(8, CLASSES)).double()
        mark_only_lora_as_trainable(model)
        optimizer = optim.Adam([p for p in model.parameters() if p.requires_grad], lr=0.05)
    model = port.wrap(model)

    def step(x, y, i):
        model.train()
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
        if eval_in_step and i % 2 == 1:   # the loop's evaluation every second step
            model.eval()
            with torch.no_grad():
                return F.cross_entropy(model(x), y)
        return torch.zeros((), dtype=F64)

    log, evals = [], []
    for i, (x, y) in enumerate(port.distribute(loader(131, 4))):
        log.append(port.mean(port.run(step, args=(x, y, i))))
        if not eval_in_step:   # between steps: the merged model on held-out data
            model.eval()
            evals.append(outputs(port, model))
    merged = outputs(port, model) if eval_in_step else evals[-1]
    model.train()
    return {**port.weights(model), "log": log, "evals": evals, "outputs": merged}


def loralib_eval_between_steps(port) -> dict:
    return _loralib(port, eval_in_step=False)


def loralib_eval_in_step(port) -> dict:
    return _loralib(port, eval_in_step=True)


# --- EWC: the Fisher from a backward pass outside the loop ---------------------------------------------------
def ewc_fisher_outside_the_loop(port) -> dict:
    torch.manual_seed(140)
    with port.scope():
        model = nn.Sequential(nn.Linear(WIDTH, 8), nn.Tanh(), nn.Linear(8, CLASSES)).double()
        optimizer = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model = port.wrap(model)
    old_task = [(x, y) for x, y in loader(141, 3)]   # every rank (replica) the whole old-task batches
    fisher = {n: torch.zeros_like(p) for n, p in model.named_parameters()}
    for x, y in old_task:
        model.zero_grad()
        F.cross_entropy(model(x), y).backward()
        for n, p in model.named_parameters():
            if p.grad is not None:
                fisher[n] += p.grad.data ** 2 / len(old_task)
    star = {n: p.detach().clone() for n, p in model.named_parameters()}

    def loss_fn(x, y):
        loss = F.cross_entropy(model(x), y)
        for n, p in model.named_parameters():
            loss = loss + 20.0 * (fisher[n] * (p - star[n]) ** 2).sum()
        return loss

    norms = []

    def probe(i):   # between steps: the gradient norm on a held-out batch
        model.zero_grad()
        F.cross_entropy(model(old_task[0][0]), old_task[0][1]).backward()
        norms.append(float(sum((p.grad ** 2).sum() for p in model.parameters()) ** 0.5))

    log = train(port, model, optimizer, loader(142, 4), loss_fn=loss_fn, between=probe)
    return {**port.weights(model), "log": log, "norms": norms,
            "fisher": float(sum(f.sum() for f in fisher.values()))}


FINETUNE2 = {f.__name__: f for f in (
    bn_eval_between_epochs, bn_eval_in_step, bn_eval_affine_frozen, distill_teacher_in_scope,
    distill_teacher_outside_scope, prompt_tuning, tied_embedding_frozen_attr, tied_embedding_frozen_module,
    tied_embedding_trained, loralib_eval_between_steps, loralib_eval_in_step, ewc_fisher_outside_the_loop)}

__all__ = ["FINETUNE2", "probe", "F64"]
