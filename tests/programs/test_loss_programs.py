"""torch.nn's losses and the loss normalisations DDP programs write (``loss_programs.py`` ... ``loss_programs3.py``:
the loss zoo with ``'mean'`` and ``'sum'``, class weights, ``ignore_index``, ``label_smoothing``, ``pos_weight``,
``CTCLoss`` with ``zero_infinity``, ``KLDivLoss('batchmean')``; cross-entropy over the global token count;
gradient accumulation; multi-task losses summed from a dict, Kendall's learnable ``log_vars``), ported with two
lines: on MirroredStrategy (2 logical CPUs) and ``multidev launch --workers 2`` they give DDP's weights and
logged losses on 2 Gloo processes (float64), or are refused saying why.

The strategy's cases run in one fresh interpreter, the DDP ranks in one 2-process job and the launched workers
in another, all started together (``loss_run.py``)."""
from __future__ import annotations

import math

import pytest

from tests.programs.loss_run import ALL as PROGRAMS
from tests.programs.test_pytutorials import _flat, _ok, run_three_ways

TOLERANCE = 1e-10   # the same ops on the same slices, 2 gradients averaged: 0.0 here
REFUSED = {   # program -> what the error says
    "tokens_dist_all_reduce_as_printed": "torch.distributed.all_reduce inside strategy.run",
    "kendall_free_parameter": "would update tensors (shapes [(2,)]) that are not mirrored",
    "barlow_twins_as_printed": "all_reduce('sum', c.detach()) + (c - c.detach())",
    "counted_ce_per_replica": "Buffer 'CountedCE.cum_samples:0': replica 1's copy differs from replica 0's",
}
# program -> the DDP program it is compared with (the module DDP does not wrap is mirrored in the scope; the
# port of Barlow Twins' untracked all-reduce is the program as printed)
REFERENCE = {"kendall_loss_module_not_wrapped": "kendall_loss_module", "kendall_variable": "kendall_loss_module",
             "barlow_twins_passthrough": "barlow_twins_as_printed"}
# One replica per worker: a free tensor is each worker's own, as each rank's under DDP (the same drift).
WORKERS_AS_DDP = ("kendall_free_parameter",)



@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return run_three_ways(tmp_path_factory, "loss")


def _same(got: list, theirs: list) -> None:
    """Equal to TOLERANCE, ``nan`` where DDP logged ``nan`` (a shard of ignored tokens only)."""
    assert len(got) == len(theirs)
    for x, y in zip(got, theirs):
        assert (math.isnan(x) and math.isnan(y)) or abs(x - y) <= TOLERANCE * max(1.0, abs(y)), (x, y)


def _equal(got: dict, theirs: dict) -> None:
    assert got["spread"] == 0.0, "every replica's copy is the same"
    _same(got["params"], theirs["params"])
    _same(_flat(got["log"]), _flat(theirs["log"]))
    _same(got.get("buffers", []), theirs.get("buffers", []))


def _as_ddp_or_refused(got: dict, theirs: dict, program: str, log: str, refused=REFUSED) -> None:
    if program in refused:
        assert got.get("error", "").startswith("ValueError") and REFUSED[program] in got["error"], got
        return
    _equal(_ok(got, log), theirs)


def _reference(ddp: dict, program: str) -> dict:
    theirs = _ok(ddp[REFERENCE.get(program, program)], "")
    if program == "kendall_variable":   # its log_vars are no model weights (compared below)
        theirs = {**theirs, "params": theirs["params"][:-2]}
    return theirs


ALL = sorted(PROGRAMS)


def test_every_program_ran(results):
    (ours, ddp, *workers), _ = results
    assert sorted(ours) == sorted(ddp) == sorted(workers[0]) == sorted(workers[1]) == ALL


@pytest.mark.parametrize("program", ALL)
def test_on_mirrored_strategy_as_ddp_or_refused(results, program):
    (ours, ddp, *_), log = results
    theirs = _reference(ddp, program)
    _as_ddp_or_refused(ours[program], theirs, program, log)


@pytest.mark.parametrize("program", ALL)
def test_under_multidev_launch_as_ddp_or_refused(results, program):
    """One replica per worker: the workers' copies are compared by digest after the first run."""
    (ours, ddp, *workers), log = results
    refused = {k: v for k, v in REFUSED.items() if k not in WORKERS_AS_DDP}
    for worker in workers:
        theirs = _reference(ddp, program)
        _as_ddp_or_refused(worker[program], theirs, program, log, refused)
    if program not in refused:
        assert workers[0][program]["params"] == workers[1][program]["params"], "every worker's"
    if program in WORKERS_AS_DDP:   # worker 0's free tensor is rank 0's; worker 1's another (DDP's drift)
        _same(workers[0][program]["log_vars"], ddp[program]["log_vars"])
        assert max(abs(a - b) for a, b in zip(workers[0][program]["log_vars"], workers[1][program]["log_vars"])) > 1e-3


def test_what_ddp_does(results):
    """The references: an all-ignored shard's ``nan`` loss (its gradient zero: the weights stay finite); the
    loss module DDP does not wrap and the free ``log_vars`` drift apart on DDP's ranks."""
    ddp = results[0][1]
    assert math.isnan(ddp["ce_weight_ignore_smoothing"]["log"][1])
    assert all(math.isfinite(x) for x in ddp["ce_weight_ignore_smoothing"]["params"])
    assert ddp["kendall_loss_module_not_wrapped"]["spread"] > 1e-3
    assert ddp["kendall_free_parameter"]["log_vars_spread"] > 1e-3
    assert ddp["ce_weight_ignore_smoothing"] == ddp["ce_criterion_outside_scope"]
    assert ddp["counted_ce_per_replica"]["buffer_spread"] > 1, "each rank's own counts (rank 0's reach forward)"


def test_log_vars_as_a_variable_train_as_in_a_wrapped_module(results):
    """``md.Variable(torch.zeros(2))`` (the refusal's fix for the free ``nn.Parameter``) ends where DDP's
    ``log_vars`` kept in a wrapped ``MultiTaskLoss`` end, on every replica and worker."""
    (ours, ddp, *workers), _ = results
    for got in (ours, *workers):
        assert got["kendall_variable"]["log_vars_spread"] == 0.0
        _same(got["kendall_variable"]["log_vars"], ddp["kendall_loss_module"]["params"][-2:])


def test_barlow_twins_untracked_all_reduce(results):
    """DDP's ``all_reduce(c)`` as printed is not differentiable: its weights are 0.68 from those of the
    differentiable all-reduce (``torch.distributed.nn.functional.all_reduce``, the replica context's), which
    the refusal used to name alone; the spelling it names now gives DDP's (``barlow_twins_passthrough``)."""
    (ours, ddp, *_), _ = results
    printed, differentiable = ddp["barlow_twins_as_printed"]["params"], ddp["barlow_twins_differentiable"]["params"]
    assert max(abs(a - b) for a, b in zip(printed, differentiable)) > 0.1
    assert ddp["barlow_twins_passthrough"] == ddp["barlow_twins_as_printed"], "the same DDP program"
