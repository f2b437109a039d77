"""torch.distributed features a DDP program uses beyond the wrapper, as DDP runs them and as their port does:

    RANK=.. WORLD_SIZE=2 MASTER_ADDR=.. MASTER_PORT=.. python tests/programs/ddp_features.py ddp OUT_DIR
    RANK=.. WORLD_SIZE=2 MASTER_ADDR=.. MASTER_PORT=.. TF_CONFIG=.. python tests/programs/ddp_features.py mwms OUT_DIR
    MULTIDEV_LOGICAL_CPUS=2 python tests/programs/ddp_features.py threads OUT_DIR

``ddp``: one of 2 Gloo ranks, no multidev imported. ``mwms``: a MultiWorkerMirroredStrategy worker of one
replica with the launcher's torchrun variables (what ``multidev launch`` sets): it first runs the cases that
need no process group (refusals, uneven input), then keeps the program's ``init_process_group("gloo")`` and
runs ZeRO, the DDP wrapper and ``torch.distributed.nn.functional`` as the DDP program does. ``threads``:
MirroredStrategy on 2 logical CPUs. Each writes ``features_<mode>_<rank>.json``; ``test_ddp_features.py``
compares them.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.nn.functional as F
from process_exit import leave_process_group

torch.set_default_dtype(torch.float64)
WORLD, GLOBAL_BATCH, LR = 2, 8, 0.05
X = torch.randn(24, 4, generator=torch.Generator().manual_seed(0))
Y = torch.tanh(X @ torch.arange(1.0, 5.0)[:, None])


def net() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))


def params(model) -> list:
    return [p.detach().reshape(-1).tolist() for p in model.parameters()]


def loader(n: int, batch: int, sampler=None) -> torch.utils.data.DataLoader:
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X[:n], Y[:n]), batch_size=batch, sampler=sampler)


def mine(t: torch.Tensor, rank: int) -> torch.Tensor:
    """DDP rank ``rank``'s rows of a global batch: the strategy's split (``tensor_split``, an empty tail)."""
    return torch.tensor_split(t, WORLD)[rank]


def step_fn(model, opt):
    def step(x, y):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()
    return step


def encoder() -> torch.nn.Module:
    torch.manual_seed(1)
    return torch.nn.Linear(4, 8)


def clip_loss(z: torch.Tensor, rank: int) -> torch.Tensor:
    """CLIP/SimCLR's gathered contrastive loss with torch.distributed.nn.functional's differentiable
    collectives: this rank's rows against every rank's, the logits scaled by the all-reduced mean norm."""
    import torch.distributed.nn.functional as dnn
    everyone = torch.cat(dnn.all_gather(z))
    scale = dnn.all_reduce(z.norm(dim=1).sum()) / everyone.shape[0]
    return _contrastive(z, everyone, scale, rank)


def clip_loss_port(z: torch.Tensor, rank) -> torch.Tensor:
    """The port's lines: the replica context's differentiable all_gather and all_reduce."""
    import multidev as md
    ctx = md.distribute.get_replica_context()
    everyone = ctx.all_gather(z, axis=0)
    scale = ctx.all_reduce("sum", z.norm(dim=1).sum()) / everyone.shape[0]
    return _contrastive(z, everyone, scale, int(ctx.replica_id_in_sync_group))


def _contrastive(z, everyone, scale, rank: int) -> torch.Tensor:
    logits = z @ everyone.t() / scale
    return F.cross_entropy(logits, torch.arange(z.shape[0]) + rank * z.shape[0])


def on_rank(fn, *args):
    """DDP's loop body runs as it is."""
    return fn(*args)


# --- the loops, shared by DDP and the port (``run`` is on_rank or strategy.run) ------------------------------
def train(model, opt, batches, run) -> list:
    step = step_fn(model, opt)
    return [run(step, x, y) for x, y in batches]


def ddp_kept_loop(model, batches, run) -> dict:
    """A DDP loop that keeps its wrapper: no_sync accumulation over two micro-batches, model.module,
    dist.all_reduce of the logged loss, rank 0 saving, a barrier."""
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)

    def step(x, y):
        opt.zero_grad()
        total = torch.zeros(())
        for i, (a, b) in enumerate(zip(x.chunk(2), y.chunk(2))):
            with model.no_sync() if i == 0 else contextlib.nullcontext():
                loss = F.mse_loss(model(a), b) / 2
                loss.backward()
            total += loss.detach()
        opt.step()
        return total

    logged = []
    for x, y in batches:
        total = run(step, x, y)
        dist.all_reduce(total)
        logged.append(float(total) / dist.get_world_size())
    saved = None
    if dist.get_rank() == 0:
        with tempfile.TemporaryDirectory() as tmp:
            torch.save(model.module.state_dict(), os.path.join(tmp, "model.pt"))
            state = torch.load(os.path.join(tmp, "model.pt"), weights_only=True)
        loaded = net()
        loaded.load_state_dict(state)
        saved = {"keys": sorted(state), "types": sorted({type(t).__name__ for t in state.values()}),
                 "params": params(loaded)}
    dist.barrier()
    return {"params": params(model.module), "logged": logged, "saved": saved}


def clip_loop(model, batches, run, rank, loss_fn=clip_loss) -> list:
    opt = torch.optim.SGD(model.parameters(), lr=LR)

    def step(x):
        opt.zero_grad()
        loss_fn(model(x), rank).backward()
        opt.step()

    for x, _ in batches:
        run(step, x)
    return params(getattr(model, "module", model))


def sampled(world: int, rank: int, batch: int) -> torch.utils.data.DataLoader:
    """9 examples through DistributedSampler(drop_last=False): DDP pads them to 10 (example 0 again)."""
    from torch.utils.data.distributed import DistributedSampler
    dataset = torch.utils.data.TensorDataset(X[:9], Y[:9])
    return torch.utils.data.DataLoader(dataset, batch_size=batch, sampler=DistributedSampler(
        dataset, num_replicas=world, rank=rank, shuffle=False, drop_last=False))


class UnpaddedSampler(torch.utils.data.DistributedSampler):
    """An evaluation-style DistributedSampler: rank ``r`` takes examples ``r::num_replicas``, unpadded, so
    the ranks get uneven counts (9 over 2: 5 and 4; in batches of 2, 3 and 2 batches): DDP's join() case."""

    def __iter__(self):
        return iter(range(self.rank, len(self.dataset), self.num_replicas))

    def __len__(self) -> int:
        return len(range(self.rank, len(self.dataset), self.num_replicas))


def unpadded(world: int, rank: int) -> torch.utils.data.DataLoader:
    dataset = torch.utils.data.TensorDataset(X[:9], Y[:9])
    return torch.utils.data.DataLoader(dataset, batch_size=2, sampler=UnpaddedSampler(dataset, world, rank, shuffle=False))


# --- DDP: the references -----------------------------------------------------------------------------------
def ddp_cases(rank: int) -> dict:
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.nn.parallel import DistributedDataParallel as DDP
    halves = lambda n, b: [(mine(x, rank), mine(y, rank)) for x, y in loader(n, b)]
    model = DDP(net())
    opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW, lr=LR, weight_decay=0.01)
    train(model, opt, halves(24, GLOBAL_BATCH), on_rank)
    out = {"zero": params(model.module)}
    out["ddp_kept"] = ddp_kept_loop(DDP(net()), halves(24, GLOBAL_BATCH), on_rank)
    model = DDP(net())                                 # uneven: rank 1 has no rows in the last batch
    with model.join():                                 # divide_by_initial_world_size=True
        train(model, torch.optim.SGD(model.parameters(), lr=LR), [b for b in halves(9, 4) if len(b[0])], on_rank)
    out["join"] = params(model.module)
    model = DDP(net())
    with model.join():
        train(model, torch.optim.SGD(model.parameters(), lr=LR), unpadded(WORLD, rank), on_rank)
    out["join_sampler"] = params(model.module)
    model = DDP(net())
    batches = list(sampled(WORLD, rank, 2))
    train(model, torch.optim.SGD(model.parameters(), lr=LR), batches, on_rank)
    out["sampler"] = {"params": params(model.module), "sizes": [len(x) for x, _ in batches]}
    out["clip"] = clip_loop(DDP(encoder()), halves(24, GLOBAL_BATCH), on_rank, rank)
    return out


# --- the port: MirroredStrategy's threads and MultiWorkerMirroredStrategy's processes ---------------------
def error_of(fn, *args) -> str:
    try:
        fn(*args)
    except Exception as e:   # noqa: BLE001 - recorded, and checked by the test
        return f"{type(e).__name__}: {e}"
    return ""


def refusals(strategy) -> dict:
    """What a program that keeps torch.distributed's features meets without a process group of its own."""
    import multidev as md
    from torch.distributed.algorithms.join import Join
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.nn.parallel import DistributedDataParallel as DDP
    with strategy.scope():
        model = net()

    def zero():
        with strategy.scope():
            ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW, lr=LR)

    def wrapper():
        with strategy.scope():
            DDP(model)

    def join():
        with Join([model]):
            pass

    z = md.distribute.PerReplica(tuple(torch.ones(2, 8) for _ in range(strategy.extended.num_local_replicas)))
    return {"zero": error_of(zero), "ddp": error_of(wrapper), "join": error_of(join),
            "join_in_run": error_of(strategy.run, join),
            "keywords": [error_of(lambda: DDP(module=model)), error_of(lambda: Join(joinables=[model])), error_of(
                lambda: ZeroRedundancyOptimizer(params=model.parameters(), optimizer_class=torch.optim.AdamW, lr=LR))],
            "nn_all_gather": error_of(strategy.run, lambda t: clip_loss(t, 0), (z,)),
            "get_rank": error_of(dist.get_rank), "get_world_size": error_of(dist.get_world_size),
            "barrier": error_of(dist.barrier), "all_reduce": error_of(dist.all_reduce, torch.ones(()))}


def strategy_run(strategy):
    return lambda fn, *args: strategy.experimental_local_results(strategy.run(fn, args=args))[0]


def uneven_cases(strategy) -> dict:
    """9 examples, global batch 4: through experimental_distribute_dataset (TF's partial batches), and
    through a DistributedSampler(drop_last=False) of the job's workers (DDP's padding)."""
    run, ext = strategy_run(strategy), strategy.extended
    out = {}
    cases = [("uneven", loader(9, 4)), ("sampler", sampled(ext.num_workers, ext.worker_index, 4 // ext.num_workers))]
    if ext.num_workers == WORLD:    # each worker its own uneven share (DDP's join() case)
        cases.append(("join_sampler", unpadded(ext.num_workers, ext.worker_index)))
    for name, data in cases:
        with strategy.scope():
            model = net()
            opt = torch.optim.SGD(model.parameters(), lr=LR)
        batches = list(strategy.experimental_distribute_dataset(data))
        losses = train(model, opt, batches, run)
        sizes = [[len(t) for t in strategy.experimental_local_results(x)] for x, _ in batches]
        out[name] = {"params": params(model), "sizes": sizes, "losses": [float(v) for v in losses]}
    return out


def process_group_cases(strategy) -> dict:
    """The DDP program's features with its own process group kept (one replica per worker)."""
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.nn.parallel import DistributedDataParallel as DDP
    run = strategy_run(strategy)
    global_batches = lambda: strategy.experimental_distribute_dataset(loader(24, GLOBAL_BATCH))
    with strategy.scope():
        model = net()
        opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW, lr=LR, weight_decay=0.01)
    train(model, opt, global_batches(), run)
    out = {"zero": params(model)}
    with strategy.scope():
        model = net()
        opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW, lr=LR, weight_decay=0.01,
                                      parameters_as_bucket_view=True)
    out["zero_bucket_view"] = error_of(train, model, opt, global_batches(), run) or params(model)
    out["zero_overlap"] = error_of(lambda: ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW,
                                                                   lr=LR, overlap_with_ddp=True))
    with strategy.scope():
        wrapped = DDP(net())
    out["ddp_kept"] = ddp_kept_loop(wrapped, global_batches(), run)
    out["join_disabled"] = error_of(lambda: wrapped.join(enable=False).__enter__())   # Join that does nothing: torch's
    out["join_kept"] = error_of(wrapped.join)
    with strategy.scope():
        model = encoder()
    out["clip"] = clip_loop(model, global_batches(), run, strategy.extended.worker_index)
    return out


def _patched() -> list:
    """The functions multidev replaces while a strategy lives (torch's own again once none does)."""
    import torch.distributed.nn.functional as dnn
    from torch.distributed.algorithms.join import Join
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.nn.parallel import DistributedDataParallel
    return [DistributedDataParallel.__init__, ZeroRedundancyOptimizer.__init__, Join.__init__, dnn.all_gather,
            torch.distributed.nn.all_reduce, dist.barrier]


def threads(out_dir: str) -> None:
    import gc
    import torch.distributed.optim  # noqa: F401   (imported before the first strategy, as a program's imports are)
    import multidev as md
    torchs = _patched()
    strategy = md.distribute.MirroredStrategy()
    assert all(a is not b for a, b in zip(_patched(), torchs))
    assert strategy.num_replicas_in_sync == 2, strategy.num_replicas_in_sync
    with strategy.scope():
        model = encoder()
    clip = clip_loop(model, strategy.experimental_distribute_dataset(loader(24, GLOBAL_BATCH)), strategy_run(strategy),
                     None, clip_loss_port)
    result = {"refusals": refusals(strategy), **uneven_cases(strategy), "clip_port": clip}
    del strategy, model
    gc.collect()
    result["torchs_again"] = all(a is b for a, b in zip(_patched(), torchs))
    _write(out_dir, "features_threads.json", result)


def mwms(out_dir: str) -> None:
    import torch.distributed.optim  # noqa: F401
    import multidev as md
    options = md.distribute.experimental.CommunicationOptions(timeout_seconds=30)
    strategy = md.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    result = {"refusals": refusals(strategy), **uneven_cases(strategy)}
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=30))
    result.update(process_group_cases(strategy))
    _write(out_dir, f"features_mwms_{strategy.extended.worker_index}.json", result)
    leave_process_group()


def ddp(out_dir: str) -> None:
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=30))
    result = ddp_cases(dist.get_rank())
    _write(out_dir, f"features_ddp_{dist.get_rank()}.json", result)
    leave_process_group()


def _write(out_dir: str, name: str, result: dict) -> None:
    with open(os.path.join(out_dir, name), "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    {"ddp": ddp, "mwms": mwms, "threads": threads}[sys.argv[1]](sys.argv[2])
