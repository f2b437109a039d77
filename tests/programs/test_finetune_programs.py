"""Fine-tuning idioms as public sources write them (``finetune_programs.py``, ``finetune_programs2.py``: gradual
unfreezing, LoRA by hand / as a parametrization / loralib's ``Linear`` merged by ``eval()``, BERT's layer-wise
learning-rate decay with warmup, BatchNorm kept in eval mode, distillation from a frozen teacher, prompt tuning,
a tied embedding frozen), ported with two lines: on MirroredStrategy (2 logical CPUs) and ``multidev launch
--workers 2`` they give DDP's weights, buffers, losses, learning rates and predictions on 2 Gloo processes
(float64).

The strategy's cases run in one fresh interpreter, the DDP ranks in one 2-process job and the launched workers
in another, all started together (``finetune_run.py``)."""
from __future__ import annotations

import pytest

from tests.programs.finetune_run import ALL as PROGRAMS
from tests.programs.test_pytutorials import _flat, _ok, run_three_ways

TIMEOUT_S = 240
TOLERANCE = 1e-10   # the same ops on the same slices, 2 gradients averaged: 0.0 here
ALL = sorted(PROGRAMS)
#: DDP wrapped after the freeze never reduces the groups unfrozen later; multidev reduces every parameter that
#: needs a gradient at the backward, which is DDP's result when wrapped before the freeze.
DDP_WRAPPED_FIRST = {"unfreeze_wrapped_after_freeze": "unfreeze_attr_all_between"}


@pytest.fixture(scope="module")
def three_ways(tmp_path_factory):
    return run_three_ways(tmp_path_factory, "finetune")


def _equal(got: dict, theirs: dict) -> None:
    assert got["spread"] == 0.0 and theirs["spread"] == 0.0, "every replica's (rank's) copy is the same"
    assert got.get("buffer_spread", 0.0) == 0.0, "every replica's buffers are the same"
    assert sorted(got) == sorted(theirs)
    for key, value in theirs.items():
        if isinstance(value, bool) or not isinstance(value, (list, int, float)):
            assert got[key] == value, key
            continue
        mine, ref = _flat(got[key] if isinstance(got[key], list) else [got[key]]), _flat(value if isinstance(value, list) else [value])
        assert len(mine) == len(ref), key
        assert max((abs(x - y) for x, y in zip(mine, ref)), default=0.0) <= TOLERANCE, key


def test_every_program_ran(three_ways):
    (ours, ddp, *workers), _ = three_ways
    assert sorted(ours) == sorted(ddp) == sorted(workers[0]) == sorted(workers[1]) == ALL


def _reference(ddp: dict, program: str) -> dict:
    return _ok(ddp[DDP_WRAPPED_FIRST.get(program, program)], "")


@pytest.mark.parametrize("program", ALL)
def test_on_mirrored_strategy_as_ddp(three_ways, program):
    (ours, ddp, *_), log = three_ways
    _equal(_ok(ours[program], log), _reference(ddp, program))


@pytest.mark.parametrize("program", ALL)
def test_under_multidev_launch_as_ddp(three_ways, program):
    """One replica per worker."""
    (_, ddp, *workers), log = three_ways
    for worker in workers:
        _equal(_ok(worker[program], log), _reference(ddp, program))


def test_what_ddp_does_wrapped_after_the_freeze(three_ways):
    """DDP registers only the parameters needing gradients when wrapped: its ranks' unfrozen groups part ways."""
    ddp = three_ways[0][1]
    assert ddp["unfreeze_wrapped_after_freeze"]["spread"] > 0.05


def test_what_the_programs_did(three_ways):
    """The idioms did what their authors meant: the unfrozen groups joined the optimizer (or, never added, stayed
    put), the tie held, every replica's loralib layers merged in eval mode (outputs outside the run: merged)."""
    ours, ddp = three_ways[0][0], three_ways[0][1]
    assert [ours[p]["groups"] for p in ("unfreeze_attr_all_between", "unfreeze_attr_add_group_in_step",
                                         "unfreeze_not_in_optimizer")] == [3, 3, 1]
    assert all(ours[p]["tied"] for p in ALL if p.startswith("tied_"))
    merged, unmerged = (_flat(ours["lora_by_hand"][k]) for k in ("merged", "outputs"))
    assert _flat(ours["lora_merged_in_step"]["merged"]) == pytest.approx(merged, abs=1e-12)
    assert merged == pytest.approx(unmerged, abs=1e-12), "the merged layer computes what the adapter did"
    assert ddp["llrd_lambda_per_group_in_step"]["rates"][0] != ddp["llrd_lambda_lr_in_step"]["rates"][0]
