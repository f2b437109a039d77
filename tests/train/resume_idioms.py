"""PyTorch checkpoint idioms on two replicas (MirroredStrategy), each compared with what torch does
on one device: run by ``test_resume_torch.py`` in a fresh interpreter; each function returns what
the test asserts on."""

from __future__ import annotations

import copy

import safetensors.torch
import torch
import torch.nn.functional as F

import multidev as md


class Tied(torch.nn.Module):
    """A language-model head tied to its embedding (word_language_model's ``tie_weights``)."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(10, 4, dtype=torch.float64)
        self.head = torch.nn.Linear(4, 10, bias=False, dtype=torch.float64)
        self.head.weight = self.emb.weight
        self.register_buffer("seen", torch.zeros((), dtype=torch.float64))

    def forward(self, tokens):
        self.seen += 1
        return self.head(self.emb(tokens))


def _setup(strategy):
    torch.manual_seed(0)
    with strategy.scope():
        model = Tied()
        opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    tokens = torch.arange(8) % 10
    data = md.data.Dataset.from_tensor_slices((tokens, (tokens + 1) % 10)).batch(8)
    return model, opt, strategy.experimental_distribute_dataset(data)


def _train(strategy, model, opt, dist, on_replica=None):
    def step(t, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(t), y)
        loss.backward()
        opt.step()
        if on_replica is not None:
            on_replica(loss)
        return loss
    for t, y in dist:
        last = strategy.run(step, args=(t, y))
    return last


def save_inside_run(strategy) -> dict:
    """Saving in the step under ``replica_id_in_sync_group == 0`` (DDP's ``if rank == 0``) writes what a
    save outside gives; a PerReplica loss in ``torch.save`` is refused at save."""
    model, opt, dist = _setup(strategy)

    def save(loss):
        if md.distribute.get_replica_context().replica_id_in_sync_group == 0:
            torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "loss": loss}, "inside.pt")
    loss = _train(strategy, model, opt, dist, save)
    inside = torch.load("inside.pt", weights_only=True)
    outside = model.state_dict()
    try:
        torch.save({"loss": loss}, "per_replica.pt")
        refused = None
    except TypeError as e:
        refused = str(e)
    return {"keys": sorted(inside["model"]), "equal": all(torch.equal(inside["model"][k], outside[k]) for k in outside),
            "momentum_saved": sorted(inside["optimizer"]["state"]), "loss_is_tensor": type(inside["loss"]) is torch.Tensor,
            "refused": refused}


def safetensors_tied(strategy) -> dict:
    """``save_file(model.state_dict())`` refuses tied weights as on one device; ``save_model`` /
    ``load_model`` into a model built in the scope keeps them tied on every replica."""
    model, opt, dist = _setup(strategy)
    _train(strategy, model, opt, dist)
    try:
        safetensors.torch.save_file(model.state_dict(), "tied.safetensors")
        save_file_error = None
    except RuntimeError as e:
        save_file_error = str(e)
    safetensors.torch.save_model(model, "model.safetensors")
    fresh, fresh_opt, _ = _setup(strategy)
    missing, unexpected = safetensors.torch.load_model(fresh, "model.safetensors")
    read = strategy.run(lambda: fresh.head.weight.detach().clone())
    return {"save_file_error": save_file_error, "missing": sorted(missing), "unexpected": sorted(unexpected),
            "tied": fresh.head.weight is fresh.emb.weight,
            "replicas_equal": [torch.equal(r, model.emb.weight.detach()) for r in strategy.experimental_local_results(read)]}


def strict_false(strategy) -> dict:
    """``load_state_dict(strict=False)`` reports missing and unexpected keys as torch does and loads the rest."""
    model, _, _ = _setup(strategy)
    result = model.load_state_dict({"emb.weight": torch.full((10, 4), 2.0, dtype=torch.float64),
                                    "extra.weight": torch.zeros(1)}, strict=False)
    read = strategy.run(lambda: model.head.weight.detach().sum())
    try:
        model.load_state_dict({"emb.weight": torch.zeros(10, 4, dtype=torch.float64)})
        strict_error = None
    except RuntimeError as e:
        strict_error = str(e)
    return {"missing": result.missing_keys, "unexpected": result.unexpected_keys,
            "replica_sums": [float(v) for v in strategy.experimental_local_results(read)], "strict_error": strict_error}


def best_weights(strategy) -> dict:
    """The transfer-learning tutorial's ``best = copy.deepcopy(model.state_dict())`` is a snapshot that
    later training leaves alone, and ``model.load_state_dict(best)`` brings every replica back to it."""
    model, opt, dist = _setup(strategy)
    _train(strategy, model, opt, dist)
    best = copy.deepcopy(model.state_dict())
    snapshot = {k: v.clone() for k, v in best.items()}
    live = model.state_dict()                     # no copy: follows training, as torch's does
    _train(strategy, model, opt, dist)
    moved = not torch.equal(live["emb.weight"], snapshot["emb.weight"])
    unchanged = all(torch.equal(best[k], snapshot[k]) for k in best)
    model.load_state_dict(best)
    read = strategy.run(lambda: model.emb.weight.detach().clone())
    return {"unchanged": unchanged, "live_followed": moved, "tied": model.head.weight is model.emb.weight,
            "replicas_back": [torch.equal(r, snapshot["emb.weight"]) for r in strategy.experimental_local_results(read)]}


def scheduler_states() -> dict:
    """``md.train.Checkpoint`` round-trips schedulers (a ReduceLROnPlateau fed tensor losses, which torch keeps as floats, a
    SequentialLR of two) and refuses a state it cannot store without pickle, naming it."""
    p = torch.nn.Parameter(torch.zeros(2))
    opt = torch.optim.SGD([p], lr=0.1)
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=0)
    for loss in (torch.tensor(3.0), torch.tensor(2.0), torch.tensor(2.5)):
        plateau.step(loss)
    opt2 = torch.optim.SGD([torch.nn.Parameter(torch.zeros(2))], lr=0.1)
    lin = torch.optim.lr_scheduler.LinearLR(opt2, 0.1, total_iters=2)
    seq = torch.optim.lr_scheduler.SequentialLR(opt2, [lin, torch.optim.lr_scheduler.ExponentialLR(opt2, 0.9)], [2])
    for _ in range(3):
        opt2.step()
        seq.step()
    saved = {"plateau": plateau.state_dict(), "seq": seq.state_dict()}
    path = md.train.Checkpoint(plateau=plateau, seq=seq).write("sched/ckpt")
    plateau2 = torch.optim.lr_scheduler.ReduceLROnPlateau(torch.optim.SGD([torch.nn.Parameter(torch.zeros(2))]))
    opt3 = torch.optim.SGD([torch.nn.Parameter(torch.zeros(2))], lr=0.1)
    seq2 = torch.optim.lr_scheduler.SequentialLR(opt3, [torch.optim.lr_scheduler.LinearLR(opt3, 0.1, total_iters=2),
                                                        torch.optim.lr_scheduler.ExponentialLR(opt3, 0.9)], [2])
    md.train.Checkpoint(plateau=plateau2, seq=seq2).read(path).assert_consumed()
    restored = {"plateau": plateau2.state_dict(), "seq": seq2.state_dict()}
    plateau.callback = lambda: None               # a non-JSON value in the scheduler's __dict__
    try:
        md.train.Checkpoint(plateau=plateau).write("sched/bad")
        refused = None
    except ValueError as e:
        refused = str(e)
    return {"best": restored["plateau"]["best"], "bad_epochs": restored["plateau"]["num_bad_epochs"],
            "plateau_equal": repr(restored["plateau"]) == repr(saved["plateau"]),
            "seq_equal": restored["seq"] == saved["seq"], "refused": refused}


def cases(strategy) -> dict:
    return {"save_inside_run": save_inside_run(strategy), "safetensors_tied": safetensors_tied(strategy),
            "strict_false": strict_false(strategy), "best_weights": best_weights(strategy),
            "scheduler_states": scheduler_states()}
