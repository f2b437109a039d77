"""Generative-model programs as printed (``generative_programs.py``, ``generative_programs2.py``: VQ-VAE with an EMA
codebook, Glow's ActNorm with data-dependent init, PixelCNN's masked convolution, a VAE with
``Normal.rsample``/``kl_divergence``, DDPM with an EMA copy and sampling), ported with two lines: on
MirroredStrategy (2 logical CPUs) and ``multidev launch --workers 2`` they give DDP's weights, buffers, losses
and samples on 2 Gloo processes (float64), or are refused saying why.

The strategy's cases run in one fresh interpreter, the DDP ranks in one 2-process job and the launched workers
in another, all started together (``generative_run.py``)."""
from __future__ import annotations


import pytest

from tests.programs.generative_run import ALL as PROGRAMS
from tests.programs.test_pytutorials import _flat, _ok, run_three_ways

TIMEOUT_S = 240
TOLERANCE = 1e-10   # the same ops on the same slices, 2 gradients averaged: 0.0 here
CODEBOOK = "Buffer 'Quantize.embed:0': replica 1's copy differs from replica 0's"
REFUSED = {   # program -> what the error says (every layout: each replica's copy differs after the first run)
    "vqvae_ema_dist_fn": "torch.distributed.is_initialized() inside strategy.run",   # dist_fn's world size
    "vqvae_ema_dist_all_reduce": "torch.distributed.all_reduce inside strategy.run",
    "vqvae_ema_no_reduce": CODEBOOK,
    "actnorm_init_in_step": "Variable 'ActNorm.loc:0': replica 1's copy differs from replica 0's",
}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return run_three_ways(tmp_path_factory, "generative")


def _equal(got: dict, theirs: dict) -> None:
    assert got["spread"] == 0.0 and theirs["spread"] == 0.0, "every replica's (rank's) copy is the same"
    assert got.get("buffer_spread", 0.0) == 0.0, "every replica's buffers are the same"
    for key in ("params", "buffers"):
        assert len(got.get(key, [])) == len(theirs.get(key, []))
        assert max((abs(x - y) for x, y in zip(got.get(key, []), theirs.get(key, []))), default=0.0) <= TOLERANCE
    for key in ("log", "sample"):
        assert _flat(got.get(key, [])) == pytest.approx(_flat(theirs.get(key, [])), rel=TOLERANCE, abs=TOLERANCE)


ALL = sorted(PROGRAMS)


def test_every_program_ran(results):
    (ours, ddp, *workers), _ = results
    assert sorted(ours) == sorted(ddp) == sorted(workers[1]) == sorted(set(workers[0]) - {"chief_only_run"}) == ALL


def test_a_run_on_the_chief_alone_waits_for_nobody(results):
    """The first-run comparison goes across workers only in runs whose collectives met."""
    assert results[0][2]["chief_only_run"] == {"value": 2.0}


def _as_ddp_or_refused(got: dict, theirs: dict, program: str, log: str) -> None:
    if program in REFUSED:
        assert got.get("error", "").startswith("ValueError") and REFUSED[program] in got["error"], got
        return
    _equal(_ok(got, log), theirs)


@pytest.mark.parametrize("program", ALL)
def test_on_mirrored_strategy_as_ddp_or_refused(results, program):
    """Buffers and weights written from each replica's batch (the EMA codebook without a replica all-reduce,
    ActNorm's init in the step) are refused; the ports (statistics summed with the replica context's
    ``all_reduce``, or replica 0's gathered; the init on the global batch) and the rest give DDP's numbers."""
    (ours, ddp, *_), log = results
    _as_ddp_or_refused(ours[program], _ok(ddp[program], ""), program, log)


@pytest.mark.parametrize("program", ALL)
def test_under_multidev_launch_as_ddp_or_refused(results, program):
    """One replica per worker: the workers' copies are compared by digest after the first run."""
    (_, ddp, *workers), log = results
    for worker in workers:
        _as_ddp_or_refused(worker[program], _ok(ddp[program], ""), program, log)
    if program not in REFUSED:
        assert workers[0][program]["params"] == workers[1][program]["params"], "every worker's"


def test_what_ddp_does_with_the_refused_programs(results):
    """Why the refusals: without the all-reduce DDP's ranks end with different buffers (rank 0's reach the next
    forward by broadcast_buffers), and ActNorm initialised in the step leaves DDP's ranks' weights apart."""
    ddp = results[0][1]
    assert ddp["vqvae_ema_no_reduce"]["buffer_spread"] > 0.1
    assert ddp["vqvae_ema_dist_fn"]["buffer_spread"] == 0.0
    assert ddp["actnorm_init_in_step"]["spread"] > 0.1
    assert ddp["vqvae_ema_rank0_ported"]["params"] == ddp["vqvae_ema_no_reduce"]["params"], "the same DDP program"
