"""Metrics as PyTorch training scripts compute them inside the step and print them after the epoch, run
as a DDP rank (``metrics_run.py``'s ``Ddp``) and ported to multidev (model and optimizer in
``strategy.scope()``, the step in ``strategy.run``). Each program returns what rank 0 (replica 0's script)
prints per epoch; the test compares the two.

* torchmetrics (``Accuracy``, ``F1Score``, ``MeanMetric`` of the loss, ``AUROC`` with its list states,
  ``MeanSquaredError``, a ``MetricCollection`` with compute groups), built in the scope or outside it,
  ``metric.update(...)`` or ``metric(preds, target)`` in the step, ``compute()`` / ``reset()`` outside:
  DDP's ``compute()`` syncs every rank's states (torchmetrics' own ``gather_all_tensors``);
* ``metric.compute()`` inside the step (a sync there under DDP);
* hand-written accumulation: ``nonlocal correct; correct += (pred == y).sum().item()`` in the step; the
  port's counts returned from the step and summed with ``strategy.reduce`` (DDP: its rank's counts
  all-reduced at the epoch's end); imagenet's ``AverageMeter.update(loss.item(), n)`` in the step (DDP:
  ``Summary``'s ``all_reduce`` at the end); ``sklearn.metrics.f1_score`` on predictions collected with
  ``strategy.gather`` / ``experimental_local_results`` (DDP: ``dist.all_gather``).
"""
from __future__ import annotations

import torch
from torch.nn import functional as F

F64 = torch.float64
CLASSES, FEATURES, ROWS, GLOBAL_BATCH, EPOCHS = 3, 6, 64, 16, 2


def _data() -> torch.utils.data.DataLoader:
    g = torch.Generator().manual_seed(7)
    x = torch.randn(ROWS, FEATURES, generator=g, dtype=F64)
    y = (x[:, :CLASSES] + 0.8 * torch.randn(ROWS, CLASSES, generator=g, dtype=F64)).argmax(1)
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=GLOBAL_BATCH)


def _model(port):
    torch.manual_seed(3)
    with port.scope():
        model = torch.nn.Sequential(torch.nn.Linear(FEATURES, 8), torch.nn.Tanh(),
                                    torch.nn.Linear(8, CLASSES)).double()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.3)
    return port.wrap(model), optimizer


def _train_step(model, optimizer, x, y):
    optimizer.zero_grad()
    out = model(x)
    loss = F.cross_entropy(out, y)
    loss.backward()
    optimizer.step()
    return out.detach(), loss.detach()


def _metrics():
    import torchmetrics as tm
    collection = tm.MetricCollection({"precision": tm.Precision(task="multiclass", num_classes=CLASSES, average="macro"),
                                      "recall": tm.Recall(task="multiclass", num_classes=CLASSES, average="macro")})
    return {"accuracy": tm.Accuracy(task="multiclass", num_classes=CLASSES),
            "f1": tm.F1Score(task="multiclass", num_classes=CLASSES, average="macro"),
            "loss": tm.MeanMetric(), "auroc": tm.AUROC(task="multiclass", num_classes=CLASSES),
            "mse": tm.MeanSquaredError(), "collection": collection}


def _flat(value) -> list:
    if isinstance(value, dict):
        return [x for k in sorted(value) for x in _flat(value[k])]
    return [float(value)]


def torchmetrics_program(port, built: str, call: str) -> dict:
    """Every metric's ``compute()`` after each epoch (and, with ``metric(...)``, rank 0's batch accuracies)."""
    model, optimizer = _model(port)
    default = torch.get_default_dtype()
    torch.set_default_dtype(F64)   # MeanMetric's and MeanSquaredError's states in float64
    try:
        if built == "scope":
            with port.scope():
                metrics = _metrics()
        else:
            metrics = _metrics()
    finally:
        torch.set_default_dtype(default)

    def step(x, y):
        out, loss = _train_step(model, optimizer, x, y)
        probs = out.softmax(-1)
        args = {"accuracy": (out, y), "f1": (out, y), "loss": (loss,), "auroc": (probs, y),
                "mse": (probs, F.one_hot(y, CLASSES).double()), "collection": (out, y)}
        if call == "update":
            for name, metric in metrics.items():
                metric.update(*args[name])
            return loss
        batch = {name: metric(*args[name]) for name, metric in metrics.items()}
        return batch["accuracy"]

    log, batch_log = [], []
    for _ in range(EPOCHS):
        for x, y in port.distribute(_data()):
            result = port.run(step, args=(x, y))
            if call == "forward":
                batch_log.append(float(port.local0(result)))
        log.append([x for name in sorted(metrics) for x in _flat(metrics[name].compute())])
        for metric in metrics.values():
            metric.reset()
    return {"log": log, "batch": batch_log}


def compute_in_step(port) -> dict:
    """``acc.compute()`` in the step: under DDP a sync of every rank's state there."""
    import torchmetrics as tm
    model, optimizer = _model(port)
    with port.scope():
        acc = tm.Accuracy(task="multiclass", num_classes=CLASSES)

    def step(x, y):
        out, _ = _train_step(model, optimizer, x, y)
        acc.update(out, y)
        return acc.compute()

    return {"log": [float(port.local0(port.run(step, args=(x, y)))) for x, y in port.distribute(_data())]}


def nonlocal_counts(port) -> dict:
    """The classic loop: ``correct``/``total`` of the enclosing function added into in the step."""
    model, optimizer = _model(port)
    correct, total = 0, 0

    def step(x, y):
        nonlocal correct, total
        out, _ = _train_step(model, optimizer, x, y)
        correct += (out.argmax(1) == y).sum().item()
        total += y.size(0)

    for x, y in port.distribute(_data()):
        port.run(step, args=(x, y))
    return {"log": [correct, total]}


def reduced_counts(port) -> dict:
    """The port of ``nonlocal_counts``: counts returned by the step and summed outside (DDP: its own
    counts, all-reduced at the epoch's end as scripts do before printing the global accuracy)."""
    model, optimizer = _model(port)
    log = []
    for _ in range(EPOCHS):
        correct, total, running_loss = 0.0, 0.0, 0.0
        for x, y in port.distribute(_data()):
            c, n, loss = port.run(lambda x, y: _counts(model, optimizer, x, y), args=(x, y))
            correct, total = correct + port.count(c), total + port.count(n)
            running_loss += port.count(loss)
        log.append([port.epoch_sum(correct) / port.epoch_sum(total), port.epoch_sum(running_loss)])
    return {"log": log}


def _counts(model, optimizer, x, y):
    out, loss = _train_step(model, optimizer, x, y)
    return (out.argmax(1) == y).sum(), torch.tensor(y.size(0)), loss


class AverageMeter:
    """imagenet main.py's meter (its ``all_reduce`` is ``Summary``'s, for DDP)."""

    def __init__(self):
        self.sum, self.count, self.avg = 0.0, 0, 0.0

    def update(self, val, n=1):
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count

    def all_reduce(self):
        total = torch.tensor([self.sum, self.count], dtype=F64)
        torch.distributed.all_reduce(total)
        self.sum, self.count = total.tolist()
        self.avg = self.sum / self.count


def average_meter(port) -> dict:
    """``losses.update(loss.item(), x.size(0))`` in the step; the epoch's average printed after it."""
    model, optimizer = _model(port)
    log = []
    for _ in range(EPOCHS):
        losses = AverageMeter()

        def step(x, y):
            _, loss = _train_step(model, optimizer, x, y)
            losses.update(loss.item(), x.size(0))

        for x, y in port.distribute(_data()):
            port.run(step, args=(x, y))
        port.meter_all_reduce(losses)
        log.append([losses.avg, losses.count])
    return {"log": log}


def sklearn_f1(port) -> dict:
    """``sklearn.metrics.f1_score`` over the epoch's predictions, gathered across replicas (ranks) by
    ``strategy.gather``, and over ``experimental_local_results`` (this process's replicas' rows)."""
    from sklearn.metrics import f1_score
    model, optimizer = _model(port)
    log = []
    for _ in range(EPOCHS):
        preds, targets, local_preds, local_targets = [], [], [], []

        def step(x, y):
            out, _ = _train_step(model, optimizer, x, y)
            return out.argmax(1), y

        for x, y in port.distribute(_data()):
            pred, target = port.run(step, args=(x, y))
            preds.append(port.gather(pred))
            targets.append(port.gather(target))
            local_preds.append(port.local_rows(pred))
            local_targets.append(port.local_rows(target))
        log.append([f1_score(torch.cat(targets).numpy(), torch.cat(preds).numpy(), average="macro"),
                    f1_score(torch.cat(local_targets).numpy(), torch.cat(local_preds).numpy(), average="macro")])
    return {"log": log}


PROGRAMS = {
    **{f"torchmetrics_{built}_{call}": (lambda port, b=built, c=call: torchmetrics_program(port, b, c))
       for built in ("scope", "outside") for call in ("update", "forward")},
    "compute_in_step": compute_in_step,
    "nonlocal_counts": nonlocal_counts,
    "reduced_counts": reduced_counts,
    "average_meter": average_meter,
    "sklearn_f1": sklearn_f1,
}
