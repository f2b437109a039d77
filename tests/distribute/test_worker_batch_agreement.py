"""``experimental_distribute_dataset`` of a torch DataLoader on 2 workers (``MultiWorkerMirroredStrategy``):
every worker keeps its slice of each loader batch, so the workers' loaders must yield the same batches. A
loader giving each worker its own share (an ``IterableDataset`` splitting by ``RANK`` / ``WORLD_SIZE``, as
WebDataset's ``split_by_node`` and ``multidev launch`` set them; a shuffle seeded per worker) trained each
worker on half its share, silently; now both workers raise ``ValueError`` before the first step, naming
``distribute_datasets_from_function``. Keras ``fit`` of such a loader is refused alike. Equal loaders,
``md.data`` datasets and a worker's own ``DistributedSampler`` share read as before. One 2-worker job over loopback."""
from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import textwrap

import pytest

from multidev.collectives.process_world import free_loopback_ports
from tests.conftest import ROOT

CODE = r'''
import json, os, torch, multidev as md
from torch.utils.data import DataLoader, DistributedSampler, IterableDataset, TensorDataset

class ByRank(IterableDataset):   # WebDataset's split_by_node: the environment's RANK / WORLD_SIZE
    def __iter__(self):
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        yield from (torch.tensor([float(i)]) for i in range(rank, 16, world))

strategy = md.distribute.MultiWorkerMirroredStrategy()
index = strategy.extended.worker_index
os.environ.update(RANK=str(index), WORLD_SIZE="2")
data = TensorDataset(torch.arange(16.0).reshape(16, 1))

def seen(dataset):
    try:
        return [float(strategy.reduce("SUM", strategy.run(lambda b: b.sum(), args=(tuple(b)[0] if isinstance(b, (list, tuple)) else b,)), axis=None))
                for _ in range(2) for b in strategy.experimental_distribute_dataset(dataset)]
    except ValueError as e:
        return "ValueError: " + str(e)

torch.manual_seed(100 + index)   # a shuffle without generator= then differs per worker
out = {
    "by_rank": seen(DataLoader(ByRank(), batch_size=4)),
    "unseeded_shuffle": seen(DataLoader(data, batch_size=4, shuffle=True)),
    "seeded_shuffle": seen(DataLoader(data, batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(0))),
    "worker_share": seen(DataLoader(data, batch_size=2, sampler=DistributedSampler(data, 2, index, shuffle=False))),
    "md_data": seen(md.data.Dataset.from_tensor_slices(torch.arange(16.0).reshape(16, 1) + index).batch(4)),
}

class ByRankXY(IterableDataset):
    def __iter__(self):
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        yield from ((torch.tensor([float(i)]), torch.tensor([2.0 * i])) for i in range(rank, 16, world))

def fitted(loader):
    with strategy.scope():
        torch.manual_seed(0)
        model = md.keras.Sequential([md.keras.layers.Dense(1)])
        model.compile(optimizer=md.keras.optimizers.SGD(0.01), loss="mse")
    try:
        model.fit(loader, epochs=2, verbose=0)
        return [p.detach().tolist() for p in model.parameters()]
    except ValueError as e:
        return "ValueError: " + str(e)

xy = TensorDataset(torch.arange(16.0).reshape(16, 1), 2 * torch.arange(16.0).reshape(16, 1))
out["fit_by_rank"] = fitted(DataLoader(ByRankXY(), batch_size=4))
out["fit_seeded"] = fitted(DataLoader(xy, batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(0)))
print("RESULT" + json.dumps(out))
'''


@pytest.fixture(scope="module")
def workers():
    cluster = json.dumps({"worker": [f"127.0.0.1:{p}" for p in free_loopback_ports(2)]})
    secret = secrets.token_hex(32)
    procs = []
    for i in range(2):
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1",
                   MULTIDEV_JOB_SECRET=secret,
                   TF_CONFIG=f'{{"cluster": {cluster}, "task": {{"type": "worker", "index": {i}}}}}')
        for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
            env.pop(name, None)
        procs.append(subprocess.Popen([sys.executable, "-c", textwrap.dedent(CODE)], env=env, cwd=ROOT,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    try:
        logs = [p.communicate(timeout=180)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
    assert all(p.returncode == 0 for p in procs), [log[-3000:] for log in logs]
    return [json.loads(log.split("RESULT", 1)[1]) for log in logs]


@pytest.mark.parametrize("case", ["by_rank", "unseeded_shuffle", "fit_by_rank"])
def test_workers_reading_different_batches_are_refused(workers, case):
    for got in workers:
        assert isinstance(got[case], str) and "first batch on worker(s) [1] differs" in got[case], got[case]
        assert "distribute_datasets_from_function" in got[case] and "manual_seed" in got[case]


def test_equal_loaders_train_every_example_once_per_epoch(workers):
    """Each epoch's steps sum every example once (0 + ... + 15 = 120), the same on both workers."""
    assert workers[0]["seeded_shuffle"] == workers[1]["seeded_shuffle"]
    assert sum(workers[0]["seeded_shuffle"]) == 2 * 120


def test_a_workers_own_share_and_md_data_read_as_before(workers):
    assert workers[0]["worker_share"] == workers[1]["worker_share"] and sum(workers[0]["worker_share"]) == 2 * 120
    assert isinstance(workers[0]["md_data"], list), "md.data datasets keep TensorFlow's rule (no check)"


def test_keras_fit_of_equal_loaders_trains_as_before(workers):
    assert isinstance(workers[0]["fit_seeded"], list) and workers[0]["fit_seeded"] == workers[1]["fit_seeded"]
