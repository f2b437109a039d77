"""PreemptionCheckpointHandler on 2 worker processes: worker 1 gets SIGTERM after call 3; both workers
run call 4, save the checkpoint (4 calls) and exit with TensorFlow's restart code 42; relaunched, both
resume at call 4 and end with the weights of an uninterrupted run (replayed in plain torch)."""

import json

import numpy as np
import torch

from multidev.train import latest_checkpoint as md_latest
from tests.multiworker._cluster import run_cluster

BODY = """
import json, os, signal, sys
import torch
import multidev as md

CKPT = os.environ["PREEMPT_DIR"]
strategy = md.distribute.MultiWorkerMirroredStrategy()
rank = strategy.cluster_resolver.task_id
torch.manual_seed(0)
x = torch.randn(6, 8, 3)          # 6 global batches of 8 (each worker reads its 4 rows)
y = torch.randn(6, 8, 1)
with strategy.scope():
    model = torch.nn.Linear(3, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
checkpoint = md.train.Checkpoint(model=model, optimizer=optimizer)
handler = md.distribute.experimental.PreemptionCheckpointHandler(strategy.cluster_resolver, checkpoint, CKPT)
start = handler.total_run_calls
print("START", start, flush=True)

def step(xb, yb):
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(xb), yb)
    loss.backward()
    optimizer.step()
    return loss

def distributed_step(i):
    rows = slice(4 * rank, 4 * rank + 4)
    return strategy.run(step, args=(x[i, rows], y[i, rows]))

while handler.total_run_calls < 6:
    handler.run(distributed_step, handler.total_run_calls)
    print("RAN", handler.total_run_calls, flush=True)
    if start == 0 and rank == 1 and handler.total_run_calls == 3:
        os.kill(os.getpid(), signal.SIGTERM)

print("RESULT " + json.dumps({"start": start, "weights": [p.detach().flatten().tolist() for p in model.parameters()]}))
"""


def _replay(steps=6):
    torch.manual_seed(0)
    x, y = torch.randn(6, 8, 3), torch.randn(6, 8, 1)
    model = torch.nn.Linear(3, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for i in range(steps):
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x[i]), y[i]).backward()
        optimizer.step()
    return [p.detach().flatten().tolist() for p in model.parameters()]


def test_sigterm_on_one_worker_saves_on_both_and_the_relaunch_resumes(tmp_path):
    env = {"PREEMPT_DIR": str(tmp_path / "ckpt")}
    first = run_cluster(BODY, workers=2, env=env, timeout=120)
    for rank, proc in enumerate(first):
        ran = [line for line in proc.stdout.splitlines() if line.startswith("RAN")]
        assert proc.returncode == 42, f"worker {rank} rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        assert ran == ["RAN 1", "RAN 2", "RAN 3", "RAN 4"], proc.stdout
    assert md_latest(tmp_path / "ckpt").endswith("ckpt-1")
    second = run_cluster(BODY, workers=2, env=env, timeout=120)
    results = []
    for rank, proc in enumerate(second):
        assert proc.returncode == 0, f"worker {rank} rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        assert "START 4" in proc.stdout
        results.append(json.loads(proc.stdout.split("RESULT ", 1)[1]))
    assert results[0] == results[1]
    for got, want in zip(results[0]["weights"], _replay()):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("workertemp")]
