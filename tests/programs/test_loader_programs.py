"""Input pipelines as DDP programs write them (``loader_programs.py``), ported as ``docs/ddp_port.md`` ("Input
pipelines") says, on MirroredStrategy (2 logical CPUs) and ``multidev launch --workers 2`` against DDP on 2 Gloo
processes (float64): the same examples at every step and DDP's weights, or the documented difference, or a
refusal saying why. The strategies' cases run in one fresh interpreter, the DDP ranks in one 2-process job and
the launched workers in another, all started together (``loader_run.py``)."""
from __future__ import annotations


import pytest

from tests.programs.loader_run import ALL as PROGRAMS
from tests.programs.test_pytutorials import _flat, _ok, run_three_ways

TIMEOUT_S = 240
TOLERANCE = 1e-10
# Each pipeline (replica, worker) reads its rank's loader: DDP's examples, draws and weights.
AS_DDP = ("bucket_sampler_per_rank", "iterable_per_pipeline", "reproducible_workers", "distributed_sampler_drop_last",
          "per_pipeline_dropout")
# Every DDP rank reads the same batches (no per-rank split); the port splits each across the replicas.
SAME_ON_EVERY_RANK = ("bucket_sampler_unsplit", "weighted_sampler", "subset_sampler")
# A stream sharded by rank: one process (or workers without torch.distributed) reads it whole.
WHOLE_STREAM = ("iterable_split_by_dist", "iterable_split_by_env")
REFUSED_ON_WORKERS = {
    "bucket_sampler_unsplit": "sampler BucketBatchSampler(num_replicas=1, rank=0) gives it 1/1 of the data",
    "iterable_split_by_env": "first batch on worker(s) [1] differs from worker 0's",
}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return run_three_ways(tmp_path_factory, "loader")


def _equal(got: dict, theirs: dict) -> None:
    assert got["spread"] == 0.0 and theirs["spread"] == 0.0, "every replica's (rank's) copy is the same"
    assert got["seen"] == theirs["seen"], "the same examples at every step"
    assert max(abs(x - y) for x, y in zip(got["params"], theirs["params"])) <= TOLERANCE
    assert _flat(got["log"]) == pytest.approx(_flat(theirs["log"]), rel=TOLERANCE, abs=TOLERANCE)


def _ours(results, program, where):
    (mirrored, _, *workers), log = results
    return _ok(mirrored[program] if where == "mirrored" else workers[0][program], log)


def test_every_program_ran(results):
    (ours, ddp, *workers), _ = results
    assert sorted(ours) == sorted(ddp) == sorted(workers[0]) == sorted(PROGRAMS)
    assert sorted(AS_DDP + SAME_ON_EVERY_RANK + WHOLE_STREAM) == sorted(PROGRAMS)


@pytest.mark.parametrize("where", ["mirrored", "workers"])
@pytest.mark.parametrize("program", AS_DDP)
def test_per_pipeline_loaders_train_as_ddp(results, program, where):
    """``distribute_datasets_from_function``, each pipeline its rank's loader: bucketed batches of varying size
    and length, a stream sharded by ``ctx``, the reproducibility recipe's workers and augmentation, a
    ``DistributedSampler(drop_last=True)`` with ``set_epoch``, dropout after each epoch's loader draws."""
    _equal(_ours(results, program, where), results[0][1][program])


@pytest.mark.parametrize("where", ["mirrored", "workers"])
@pytest.mark.parametrize("program", SAME_ON_EVERY_RANK)
def test_a_batch_every_rank_reads_is_split(results, program, where):
    """DDP trains each rank on the whole batch; the port splits it: each example once per step (DDP: once per
    rank), the same weights where every batch splits evenly, the replicas' means weighted by their shares of
    an odd batch otherwise (TensorFlow's rule)."""
    (_, ddp, *workers), log = results
    if where == "workers" and program in REFUSED_ON_WORKERS:
        error = workers[0][program].get("error", "")
        assert error.startswith("ValueError") and REFUSED_ON_WORKERS[program] in error, error
        return
    got, theirs = _ours(results, program, where), ddp[program]
    assert [[2 * s, 2 * c] for s, c in got["seen"]] == theirs["seen"]
    gap = max(abs(x - y) for x, y in zip(got["params"], theirs["params"]))
    odd = any(c % 2 for _, c in got["seen"])
    assert (gap > 1e-3) if odd else (gap <= TOLERANCE), (gap, got["seen"])


@pytest.mark.parametrize("where", ["mirrored", "workers"])
@pytest.mark.parametrize("program", WHOLE_STREAM)
def test_a_stream_sharded_by_rank(results, program, where):
    """Without torch.distributed the stream is read whole and each loader batch is the global batch: every
    example once per epoch, in twice DDP's steps; sharded by the ``RANK`` multidev launch sets, the workers'
    batches differ and the port is refused."""
    (_, ddp, *workers), log = results
    if where == "workers" and program in REFUSED_ON_WORKERS:
        for worker in workers:
            error = worker[program].get("error", "")
            assert error.startswith("ValueError") and REFUSED_ON_WORKERS[program] in error, error
        return
    got, theirs = _ours(results, program, where), ddp[program]
    assert len(got["seen"]) == 2 * len(theirs["seen"])
    assert sum(s for s, _ in got["seen"]) == sum(s for s, _ in theirs["seen"])
