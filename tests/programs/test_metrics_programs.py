"""Metrics computed inside the step and printed after the epoch (``metrics_programs.py``): on MirroredStrategy
(2 logical CPUs) the numbers a ported script prints are those DDP's rank 0 prints on 2 Gloo processes
(torchmetrics synced by its own ``compute()``, hand-written counts after the script's all-reduce), or the
program is refused saying why.

The MirroredStrategy run is one fresh interpreter, the DDP ranks one 2-process job, started together
(``metrics_run.py``).
"""
from __future__ import annotations


import pytest

from tests.programs.metrics_run import ON_WORKERS
from tests.programs.test_pytutorials import run_three_ways

pytest.importorskip("torchmetrics", reason="torchmetrics is not installed (pip install torchmetrics: the test extras)")
pytest.importorskip("sklearn", reason="scikit-learn is not installed")

TIMEOUT_S = 240
# Every replica and rank runs the same ops on the same rows, and the states of 2 are summed (exact in any
# order): 0.0 here. Counts summed in another order (the meter's interleaved additions) differ by rounding.
TOLERANCE = 1e-12
TORCHMETRICS = [f"torchmetrics_{built}_{call}" for built in ("scope", "outside") for call in ("update", "forward")]
EQUAL = ("reduced_counts", "average_meter", "sklearn_f1")
REFUSED = {   # program -> what the ValueError must say
    "compute_in_step": ("MulticlassAccuracy.compute() inside strategy.run", "Call compute() outside strategy.run",
                        "sync_on_compute=False"),
    "nonlocal_counts": ("writes the enclosing function's variable 'correct' (now 0)", "a replica's addition can be "
                        "lost", "strategy.reduce('SUM', value, axis=None)"),
}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    loaded, logs = run_three_ways(tmp_path_factory, "metrics")
    assert sorted(loaded[0]) == sorted(loaded[1]) == sorted(TORCHMETRICS + list(EQUAL) + list(REFUSED))
    return loaded, logs


def _flat(rows) -> list:
    return [x for row in rows for x in (_flat(row) if isinstance(row, list) else [row])]


def _same(got: dict, theirs: dict, log: str) -> None:
    assert "error" not in got, (got["error"], log[-4000:])
    assert "error" not in theirs, theirs["error"]
    for key in theirs:
        assert len(_flat(got[key])) == len(_flat(theirs[key]))
        assert _flat(got[key]) == pytest.approx(_flat(theirs[key]), rel=TOLERANCE, abs=TOLERANCE), key


@pytest.mark.parametrize("program", TORCHMETRICS)
def test_torchmetrics_compute_is_ddps(results, program):
    """Accuracy, F1Score, MeanMetric, AUROC (list states), MeanSquaredError and a MetricCollection (compute
    groups), built in the scope or outside it, updated by ``update`` or ``metric(...)`` in the step:
    ``compute()`` after each epoch is DDP's synced value (before: Accuracy and F1 gave replica 0's half);
    ``metric(...)``'s batch value is replica 0's batch, as rank 0's."""
    (mine, ddp, *_), log = results
    _same(mine[program], ddp[program], log)
    assert len(mine[program]["log"]) == 2 and len(mine[program]["log"][0]) == 7


@pytest.mark.parametrize("program", EQUAL)
def test_hand_written_metric_is_ddps(results, program):
    """Counts returned by the step and summed with ``strategy.reduce``; ``AverageMeter.update(loss.item(), n)``
    in the step (one meter for every replica: DDP's after ``Summary``'s all-reduce); sklearn's F1 over
    ``strategy.gather`` / ``experimental_local_results`` rows (DDP's over ``all_gather``)."""
    (mine, ddp, *_), log = results
    _same(mine[program], ddp[program], log)


@pytest.mark.parametrize("program", sorted(REFUSED))
def test_refused_saying_why(results, program):
    """``metric.compute()`` in the step (a cross-rank sync under DDP) and ``nonlocal correct; correct += ...``
    (one variable for the replica threads: lost updates; refused before the run starts) raise ``ValueError``."""
    (mine, ddp, *_), _ = results
    assert "error" not in ddp[program]
    assert mine[program]["error"].startswith("ValueError: ")
    for phrase in REFUSED[program]:
        assert phrase in mine[program]["error"]


@pytest.mark.parametrize("program", ON_WORKERS)
def test_on_workers_as_ddp(results, program):
    """Under ``multidev launch --workers 2`` (one replica a worker, no process group) torchmetrics'
    ``compute()`` syncs over the job's workers (DDP's value on both); ``metric(...)``'s batch value and
    ``nonlocal`` counts are each worker's own, as each rank's (one replica: nothing shared, nothing refused);
    ``experimental_local_results`` holds the worker's own rows, ``strategy.gather`` every worker's."""
    (_, ddp, *workers), log = results
    for index, worker in enumerate(workers):
        got, theirs = dict(worker[program]), dict(ddp[program])
        if index == 1 and program == "nonlocal_counts":   # rank 1's counts; rank 0's are in the DDP file
            assert "error" not in got and got["log"][1] == theirs["log"][1] == 32, got
            continue
        if index == 1:
            got.pop("batch", None), theirs.pop("batch", None)   # rank 1's batches, not rank 0's
        if program == "sklearn_f1":
            got["log"], theirs["log"] = [e[0] for e in got["log"]], [e[0] for e in theirs["log"]]
        _same(got, theirs, log)
