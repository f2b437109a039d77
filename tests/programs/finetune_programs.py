"""Fine-tuning idioms as public PyTorch sources write them, ported with two lines (model and optimizer built in
``strategy.scope()``, the loop body in ``strategy.run`` over ``experimental_distribute_dataset``):

* gradual unfreezing (ULMFiT, fast.ai's ``freeze_to``): ``p.requires_grad = True`` on one more layer group each
  epoch, the optimizer built over every parameter, or over the trainable ones with ``add_param_group``, or
  (a program's bug, the same under DDP) never told; freezing again with ``zero_grad(set_to_none=False)``;
* LoRA by hand (a frozen base ``Linear`` plus ``lora_A`` / ``lora_B`` parameters, merged after training with
  ``base.weight.data += B @ A * scale``), and LoRA as a ``parametrize.register_parametrization``, merged with
  ``remove_parametrizations(..., leave_parametrized=True)``;
* BERT's layer-wise learning-rate decay: parameter groups by name (no weight decay for ``bias`` and
  ``LayerNorm.weight``), a rate per layer, ``LambdaLR`` warmup + linear decay (one lambda, or one per group).

Each is ``case(port) -> dict`` over ``finetune_run``'s ports. Float64, seeded synthetic data, global batch 8.
Imports only torch: the DDP runner must not import multidev.
"""
from __future__ import annotations

import math

import torch
from torch import nn, optim
from torch.nn import functional as F
from torch.nn.utils import parametrize
from torch.utils.data import DataLoader, TensorDataset

F64 = torch.float64
GLOBAL_BATCH, WIDTH, CLASSES, EPOCH = 8, 6, 3, 2


def loader(seed: int, steps: int) -> DataLoader:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(steps * GLOBAL_BATCH, WIDTH, generator=g, dtype=F64)
    y = torch.randint(0, CLASSES, (steps * GLOBAL_BATCH,), generator=g)
    return DataLoader(TensorDataset(x, y), batch_size=GLOBAL_BATCH)


def probe(seed: int = 99) -> torch.Tensor:
    return torch.randn(5, WIDTH, generator=torch.Generator().manual_seed(seed), dtype=F64)


def train(port, model, optimizer, batches, before=None, between=None, scheduler=None, loss_fn=None) -> list:
    """The classifier loop; ``before(i)`` at the step's start (in ``strategy.run``), ``between(i)`` after it."""
    loss_fn = loss_fn or (lambda x, y: F.cross_entropy(model(x), y))

    def step(x, y, i):
        if before is not None:
            before(i)
        optimizer.zero_grad()
        loss = loss_fn(x, y)
        loss.backward()
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        return loss.detach()

    log = []
    for i, (x, y) in enumerate(port.distribute(batches)):
        log.append(port.mean(port.run(step, args=(x, y, i))))
        if between is not None:
            between(i)
    return log


def outputs(port, model, x=None) -> list:
    """Predictions after training, outside the loop (DDP: the rank's module)."""
    with torch.no_grad():
        return port.module(model)(probe() if x is None else x).tolist()


class Net(nn.Module):
    def __init__(self, hidden: int = 8):
        super().__init__()
        self.fc1, self.fc2, self.head = nn.Linear(WIDTH, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, CLASSES)

    def forward(self, x):
        return self.head(F.relu(self.fc2(F.relu(self.fc1(x)))))


# --- gradual unfreezing -------------------------------------------------------------------------------------
def _unfreezing(port, opt: str, in_step: bool, wrap_first: bool = True) -> dict:
    """Everything but the head frozen (``p.requires_grad = False``); at each epoch's start one more group down
    trains (``p.requires_grad = True``). ``opt``: "all" (AdamW over every group at its ULMFiT rate), "add" (over
    the trainable ones, each unfrozen group added), "none" (over the trainable ones, never told)."""
    torch.manual_seed(60)
    with port.scope():
        model = Net().double()
        if wrap_first:   # DDP's reference: wrapped before the freeze, or it never reduces the unfrozen groups
            model = port.wrap(model, find_unused_parameters=True)
        net = port.module(model)
        groups = [net.fc1, net.fc2, net.head]
        for g in groups[:-1]:
            for p in g.parameters():
                p.requires_grad = False
        if not wrap_first:
            model = port.wrap(model, find_unused_parameters=True)
        if opt == "all":
            optimizer = optim.AdamW([{"params": g.parameters(), "lr": 0.05 / 2.6 ** (2 - k)}
                                     for k, g in enumerate(groups)], weight_decay=0.01)
        else:
            optimizer = optim.AdamW(filter(lambda p: p.requires_grad, model.parameters()), lr=0.05)

    def unfreeze(i):
        k = len(groups) - 1 - i // EPOCH
        if i % EPOCH == 0 and i > 0 and k >= 0:
            for p in groups[k].parameters():
                p.requires_grad = True
            if opt == "add":
                optimizer.add_param_group({"params": list(groups[k].parameters()), "lr": 0.05 / 2.6 ** (2 - k)})

    hooks = {"before": unfreeze} if in_step else {"between": lambda i: unfreeze(i + 1)}
    log = train(port, model, optimizer, loader(61, 3 * EPOCH), **hooks)
    return {**port.weights(model), "log": log, "groups": len(optimizer.param_groups)}


def unfreeze_attr_all_between(port) -> dict:
    return _unfreezing(port, "all", in_step=False)


def unfreeze_attr_all_in_step(port) -> dict:
    return _unfreezing(port, "all", in_step=True)


def unfreeze_attr_add_group_in_step(port) -> dict:
    return _unfreezing(port, "add", in_step=True)


def unfreeze_attr_add_group_between(port) -> dict:
    return _unfreezing(port, "add", in_step=False)


def unfreeze_not_in_optimizer(port) -> dict:
    """Unfrozen but never added: the gradients are computed, the optimizer never applies them (DDP's too)."""
    return _unfreezing(port, "none", in_step=True)


def unfreeze_wrapped_after_freeze(port) -> dict:
    """DDP wrapped after the freeze: its ranks' unfrozen groups part ways; multidev reduces them all the same."""
    return _unfreezing(port, "all", in_step=False, wrap_first=False)


def refreeze_zero_grad_kept(port) -> dict:
    """Train everything, then freeze ``fc1`` mid-run with the gradients zeroed, not set to None
    (``zero_grad(set_to_none=False)``): Adam's moments keep moving the frozen layer, on every rank alike."""
    torch.manual_seed(62)
    with port.scope():
        model = Net().double()
        optimizer = optim.Adam(model.parameters(), lr=0.05)
    model = port.wrap(model, find_unused_parameters=True)
    fc1 = port.module(model).fc1

    def step(x, y, i):
        if i == 2:
            fc1.requires_grad_(False)
        optimizer.zero_grad(set_to_none=False)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss.detach()

    log = [port.mean(port.run(step, args=(x, y, i))) for i, (x, y) in enumerate(port.distribute(loader(63, 5)))]
    return {**port.weights(model), "log": log}


# --- LoRA by hand and as a parametrization --------------------------------------------------------------------
class LoRALinear(nn.Module):
    """The common hand-written LoRA layer (microsoft/LoRA's ``Linear``, simplified)."""

    def __init__(self, base: nn.Linear, r: int = 2, alpha: int = 4):
        super().__init__()
        self.base, self.scale, self.merged = base, alpha / r, False
        self.base.weight.requires_grad = False
        self.base.bias.requires_grad = False
        self.lora_A = nn.Parameter(torch.zeros(r, base.in_features))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, r))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        nn.init.normal_(self.lora_B, std=0.1)   # zeros in the paper; nonzero so A trains from the first step

    def forward(self, x):
        out = self.base(x)
        if not self.merged:
            out = out + (x @ self.lora_A.T @ self.lora_B.T) * self.scale
        return out

    def merge(self):
        if not self.merged:
            self.base.weight.data += self.lora_B @ self.lora_A * self.scale
            self.merged = True


def _pretrained(seed: int) -> Net:
    torch.manual_seed(seed)
    return Net()


def _merge_no_grad(layer: LoRALinear) -> None:
    """The merge as other hand-written LoRAs print it: ``+=`` on the parameter under ``no_grad``."""
    with torch.no_grad():
        layer.base.weight += layer.lora_B @ layer.lora_A * layer.scale
    layer.merged = True


def _lora_by_hand(port, merge_in_step: bool) -> dict:
    with port.scope():
        model = _pretrained(70)
        model.fc1, model.fc2 = LoRALinear(model.fc1), LoRALinear(model.fc2)
        model = model.double()
        optimizer = optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=0.05)
    model = port.wrap(model)
    log = train(port, model, optimizer, loader(71, 4))
    before = outputs(port, model)
    layers = [m for m in port.module(model).modules() if isinstance(m, LoRALinear)]
    if merge_in_step:   # the last step's end: in strategy.run, each replica merging its own copy
        port.run(lambda: [_merge_no_grad(m) for m in layers] and torch.zeros(()))
    else:
        for m in layers:
            m.merge()
    return {**port.weights(model), "log": log, "outputs": before, "merged": outputs(port, model)}


def lora_by_hand(port) -> dict:
    return _lora_by_hand(port, merge_in_step=False)


def lora_merged_in_step(port) -> dict:
    return _lora_by_hand(port, merge_in_step=True)


class LoRAParametrization(nn.Module):
    """LoRA as a parametrization: ``weight = W + B @ A * scale`` (minLoRA's ``LoRAParametrization``)."""

    def __init__(self, fan_in: int, fan_out: int, rank: int = 2, alpha: int = 4):
        super().__init__()
        self.lora_A = nn.Parameter(torch.zeros(rank, fan_in))
        self.lora_B = nn.Parameter(torch.zeros(fan_out, rank))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        nn.init.normal_(self.lora_B, std=0.1)
        self.scale = alpha / rank

    def forward(self, W):
        return W + torch.matmul(self.lora_B, self.lora_A).view(W.shape) * self.scale


def _lora_parametrized(port, merge: bool) -> dict:
    with port.scope():
        model = _pretrained(72).double()
        for layer in (model.fc1, model.fc2):
            parametrize.register_parametrization(
                layer, "weight", LoRAParametrization(layer.in_features, layer.out_features).double())
        for name, p in model.named_parameters():
            p.requires_grad = "lora_" in name or name.startswith("head.")
        optimizer = optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=0.05)
    model = port.wrap(model)
    log = train(port, model, optimizer, loader(73, 4))
    result = {**port.weights(model), "log": log, "outputs": outputs(port, model)}
    if merge:
        for layer in (port.module(model).fc1, port.module(model).fc2):
            parametrize.remove_parametrizations(layer, "weight", leave_parametrized=True)
        result["merged"] = outputs(port, model)
    return result


def lora_parametrize(port) -> dict:
    return _lora_parametrized(port, merge=False)


def lora_parametrize_merged(port) -> dict:
    return _lora_parametrized(port, merge=True)


# --- BERT's layer-wise learning-rate decay, no weight decay for bias / LayerNorm, warmup + linear decay ------
class Layer(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.dense, self.LayerNorm = nn.Linear(d, d), nn.LayerNorm(d)

    def forward(self, x):
        return self.LayerNorm(x + torch.tanh(self.dense(x)))


class Encoder(nn.Module):
    def __init__(self, d: int = 8, layers: int = 3):
        super().__init__()
        self.embeddings = nn.Linear(WIDTH, d)
        self.layer = nn.ModuleList(Layer(d) for _ in range(layers))
        self.classifier = nn.Linear(d, CLASSES)

    def forward(self, x):
        h = self.embeddings(x)
        for layer in self.layer:
            h = layer(h)
        return self.classifier(h)


def llrd_groups(model, lr: float, decay: float = 0.8, weight_decay: float = 0.01) -> list:
    """The Kaggle / BERT recipe: the classifier at ``lr``, each layer below ``decay`` times the one above."""
    no_decay = ["bias", "LayerNorm.weight", "LayerNorm.bias"]
    named = list(model.named_parameters())
    prefixes = ["classifier."] + [f"layer.{i}." for i in reversed(range(len(model.layer)))] + ["embeddings."]
    groups = []
    for depth, prefix in enumerate(prefixes):
        rate = lr * decay ** depth
        params = [(n, p) for n, p in named if n.startswith(prefix)]
        groups.append({"params": [p for n, p in params if not any(nd in n for nd in no_decay)],
                       "weight_decay": weight_decay, "lr": rate})
        groups.append({"params": [p for n, p in params if any(nd in n for nd in no_decay)],
                       "weight_decay": 0.0, "lr": rate})
    return groups


def linear_schedule_with_warmup(warmup: int, total: int):
    def lr_lambda(current_step: int):
        if current_step < warmup:
            return float(current_step) / float(max(1, warmup))
        return max(0.0, float(total - current_step) / float(max(1, total - warmup)))
    return lr_lambda


def _llrd(port, per_group: bool, in_step: bool) -> dict:
    torch.manual_seed(80)
    steps = 6
    with port.scope():
        model = Encoder().double()
        optimizer = optim.AdamW(llrd_groups(model, lr=0.05), lr=0.05)
        lambdas = linear_schedule_with_warmup(2, steps)
        if per_group:   # the head warms up faster than the body
            lambdas = [linear_schedule_with_warmup(1 if k < 2 else 2, steps) for k in range(len(optimizer.param_groups))]
        scheduler = optim.lr_scheduler.LambdaLR(optimizer, lambdas)
    model = port.wrap(model)
    rates = []

    def between(i):
        if not in_step:
            scheduler.step()
        rates.append([g["lr"] for g in optimizer.param_groups])

    log = train(port, model, optimizer, loader(81, steps), between=between, scheduler=scheduler if in_step else None)
    return {**port.weights(model), "log": log, "rates": rates, "outputs": outputs(port, model)}


def llrd_lambda_lr_in_step(port) -> dict:
    return _llrd(port, per_group=False, in_step=True)


def llrd_lambda_lr_between(port) -> dict:
    return _llrd(port, per_group=False, in_step=False)


def llrd_lambda_per_group_in_step(port) -> dict:
    return _llrd(port, per_group=True, in_step=True)


FINETUNE = {f.__name__: f for f in (
    unfreeze_attr_all_between, unfreeze_attr_all_in_step, unfreeze_attr_add_group_in_step,
    unfreeze_attr_add_group_between, unfreeze_not_in_optimizer, unfreeze_wrapped_after_freeze,
    refreeze_zero_grad_kept, lora_by_hand, lora_merged_in_step,
    lora_parametrize, lora_parametrize_merged, llrd_lambda_lr_in_step, llrd_lambda_lr_between,
    llrd_lambda_per_group_in_step)}
