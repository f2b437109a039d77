"""MultiWorkerMirroredStrategy faults and results found by an attack (issue 18): a paused worker 0,
reduce with one device per worker, workers fed different amounts of data."""

from __future__ import annotations

import numpy as np
import pytest

from tests.multiworker._cluster import results_json, run_cluster

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

PRELUDE = """
import json, os, sys, time, torch, multidev as md
def report(**kw):
    print("RESULT " + json.dumps(kw), flush=True)
strategy = md.distribute.MultiWorkerMirroredStrategy(
    communication_options=md.distribute.experimental.CommunicationOptions(timeout_seconds=float(os.environ["T"])))
rank = int(os.environ["TASK_INDEX"])
"""


def test_reduce_of_run_results_goes_across_workers_with_one_device_each():
    body = PRELUDE + """
ctx_ids = []
def fn():
    ctx = md.distribute.get_replica_context()
    ctx_ids.append(int(ctx.replica_id_in_sync_group))   # a tensor, as in TF
    return torch.tensor(float(ctx.replica_id_in_sync_group))
out = strategy.run(fn)
batch = strategy.run(lambda: torch.arange(3.0) + 3 * rank)           # [0,1,2] and [3,4,5]
report(replicas=strategy.num_replicas_in_sync, ids=ctx_ids,
       sum=float(strategy.reduce("SUM", out, axis=None)), mean=float(strategy.reduce("MEAN", out, axis=None)),
       sum_axis=float(strategy.reduce("SUM", batch, axis=0)), mean_axis=float(strategy.reduce("MEAN", batch, axis=0)),
       plain_mean=float(strategy.reduce("MEAN", torch.tensor(float(rank) * 4), axis=None)))
"""
    procs = run_cluster(body, workers=2, timeout=120, env={"T": "30", "MULTIDEV_LOGICAL_CPUS": "1"})
    results = [results_json(p) for p in procs]
    assert [r["ids"] for r in results] == [[0], [1]]
    for r in results:
        assert r["replicas"] == 2
        assert r["sum"] == 1.0 and r["mean"] == 0.5, r     # TF: 0 + 1 and (0 + 1) / 2 on both workers
        assert r["sum_axis"] == 15.0 and r["mean_axis"] == 2.5, r
        assert r["plain_mean"] == 2.0, r


def test_paused_worker_0_is_named_by_the_other_worker_within_the_timeout():
    # Worker 0 hosts the rendezvous store; paused by SIGSTOP its sockets stay open but never answer.
    body = PRELUDE + """
import signal
with strategy.scope():
    v = md.Variable(0.0)
def step():
    md.distribute.get_replica_context().all_reduce("SUM", torch.ones(4))
strategy.run(step)
if rank == 0:
    os.kill(os.getpid(), signal.SIGSTOP)   # paused for good; the harness kills it
t0 = time.monotonic()
try:
    for _ in range(3):
        strategy.run(step)
    report(type=None, msg="no error", seconds=time.monotonic() - t0)
except md.errors.OpError as err:
    report(type=type(err).__name__, msg=str(err), seconds=time.monotonic() - t0)
"""
    procs = run_cluster(body, workers=2, timeout=90, env={"T": "3", "MULTIDEV_LOGICAL_CPUS": "1"}, wait_ranks=[1])
    r = results_json(procs[1])
    assert r["type"] == "DeadlineExceededError", r
    assert r["msg"].startswith("worker 0 (127.0.0.1:") and "hung" in r["msg"], r
    assert r["seconds"] < 3 + 30, r   # the timeout plus a bounded margin (slow machines), never forever


def test_workers_fitting_on_different_amounts_of_data_all_fail_or_all_finish_alike():
    # Never one worker exiting 0 with a model of fewer steps while the other fails (issue 18 item 6).
    body = PRELUDE + """
import numpy as np
from multidev import keras
def data(n):
    rng = np.random.RandomState(rank)
    x = rng.randn(n, 4).astype("float32")
    return x, x.sum(1, keepdims=True)
def unknown_length(n):        # filter(): the cardinality is unknown, so workers agree step by step
    options = md.data.Options()
    options.experimental_distribute.auto_shard_policy = md.data.experimental.AutoShardPolicy.OFF
    ds = md.data.Dataset.from_tensor_slices(data(n)).filter(lambda x, y: True).batch(8)
    return ds.with_options(options)
with strategy.scope():
    model = keras.models.Sequential([keras.layers.Dense(1, input_shape=(4,))])
    model.compile(keras.optimizers.SGD(0.01), "mse")
out = {}
for name, make in [("arrays", lambda: dict(zip("xy", data(40 if rank == 0 else 16)), batch_size=8)),
                   ("unknown", lambda: dict(x=unknown_length(40 if rank == 0 else 16))),
                   ("even", lambda: dict(x=unknown_length(24)))]:
    before = int(model.optimizer.iterations)
    try:
        model.fit(epochs=2, verbose=0, **make())
        out[name] = ["ok", int(model.optimizer.iterations) - before]
    except md.errors.OpError as err:
        out[name] = [type(err).__name__, str(err), int(model.optimizer.iterations) - before]
try:
    loss = model.evaluate(unknown_length(24 if rank == 0 else 40), verbose=0)
    out["evaluate"] = ["ok"]
    out["evaluated"] = [float(loss), [w.tolist() for w in model.get_weights()]]
except md.errors.OpError as err:
    out["evaluate"] = [type(err).__name__, str(err)]
report(**out)
"""
    procs = run_cluster(body, workers=2, timeout=150, env={"T": "20", "MULTIDEV_LOGICAL_CPUS": "1"})
    results = [results_json(p) for p in procs]
    for r in results:
        kind, msg, steps = r["arrays"]
        assert kind == "InvalidArgumentError" and "training inputs differ in length: worker 0 has 5, worker 1 has 2 batches" in msg, r
        assert steps == 0, r                                 # caught before any step
        # OFF: each worker trains on its own stream rebatched to 8 / 2 workers, as TensorFlow's fit
        # does (tests/multiworker/test_mw_tutorials_vs_tf.py); the worker that runs out first takes
        # part with empty batches, as in a custom loop, so both finish alike: 40 / 4 = 10 steps an epoch
        assert r["unknown"] == ["ok", 20], r
        assert r["even"] == ["ok", 12], r                    # 24 / 4 = 6 steps per epoch on both, 2 epochs
        # evaluate reads an OFF-sharded dataset as each worker's own stream too, as TensorFlow's does
        # (tests/multiworker/test_mw_evaluate_vs_tf.py): the worker that runs out first (24 of 40 rows) takes
        # part with empty batches, so both finish alike instead of refusing
        assert r["evaluate"] == ["ok"], r
        loss, (kernel, bias) = r["evaluated"]    # the mean over both workers' 64 rows, one device's figure
        x = np.concatenate([np.random.RandomState(rank).randn(n, 4) for rank, n in ((0, 24), (1, 40))])
        want = np.mean((x @ np.asarray(kernel) + np.asarray(bias) - x.sum(1, keepdims=True)) ** 2)
        assert abs(loss - want) <= 1e-4 * max(1.0, want), (loss, want)
