"""Detection and segmentation programs as printed (``detect_programs.py``, ``detect_programs2.py``: torchvision's
detection loop over ``tuple(zip(*b))`` batches with a YOLO-style and an FCOS-style head and a Mask-style
per-instance loss, a U-Net trained with ``ignore_index=255``), ported with two lines: on MirroredStrategy
(2 logical CPUs) and ``multidev launch --workers 2`` they give DDP's weights and losses on 2 Gloo processes
(float64), or are refused saying why, or (``cat_list`` padding the global batch) differ as documented.

The strategy's cases run in one fresh interpreter, the DDP ranks in one 2-process job and the launched workers
in another, all started together (``detect_run.py``)."""
from __future__ import annotations

import pytest

from tests.programs.detect_run import ALL as PROGRAMS
from tests.programs.test_pytutorials import _flat, _ok, run_three_ways

TOLERANCE = 1e-10   # the same ops on the same examples, 2 gradients averaged: 0.0 here
IS_INITIALIZED = "torch.distributed.is_initialized() inside strategy.run"
REFUSED = {   # program -> what the error says
    "yolo_reduce_dict_as_printed": IS_INITIALIZED,   # utils.reduce_dict's get_world_size()
    "fcos_num_pos_as_printed": IS_INITIALIZED,       # reduce_sum(num_pos) / num_gpus
}
PADDED_GLOBALLY = "unet_segmentation_mixed_sizes"   # cat_list pads the global batch, a DDP rank its half
ALL = sorted(PROGRAMS)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return run_three_ways(tmp_path_factory, "detect")


def _equal(got: dict, theirs: dict) -> None:
    assert got["spread"] == 0.0 and theirs["spread"] == 0.0, "every replica's (rank's) copy is the same"
    assert len(got["params"]) == len(theirs["params"])
    assert max(abs(x - y) for x, y in zip(got["params"], theirs["params"])) <= TOLERANCE
    assert _flat(got["log"]) == pytest.approx(_flat(theirs["log"]), rel=TOLERANCE, abs=TOLERANCE)


def _as_ddp_or_refused(got: dict, theirs: dict, program: str, log: str) -> None:
    if program in REFUSED:
        assert got.get("error", "").startswith("ValueError") and REFUSED[program] in got["error"], got
        assert "ctx.all_reduce('sum', num_pos)" in got["error"] and "strategy.reduce('mean'" in got["error"]
        return
    if program == PADDED_GLOBALLY:
        _ok(got, log)
        assert max(abs(x - y) for x, y in zip(got["params"], theirs["params"])) > 1e-4, "padding reaches the loss"
        return
    _equal(_ok(got, log), theirs)


def test_every_program_ran(results):
    (ours, ddp, *workers), _ = results
    assert sorted(ours) == sorted(ddp) == sorted(workers[0]) == sorted(workers[1]) == ALL


@pytest.mark.parametrize("program", ALL)
def test_on_mirrored_strategy_as_ddp_or_refused(results, program):
    """Tuples of images of different sizes and of target dicts are cut by example; per-image losses, FCOS's
    positives summed with the replica context's ``all_reduce``, the U-Net's ``ignore_index=255`` and the
    per-instance mask loss give DDP's numbers; ``reduce_dict`` and FCOS's ``reduce_sum`` as printed are
    refused at their ``dist.is_initialized()``."""
    (ours, ddp, *_), log = results
    _as_ddp_or_refused(ours[program], _ok(ddp[program], ""), program, log)


@pytest.mark.parametrize("program", ALL)
def test_under_multidev_launch_as_ddp_or_refused(results, program):
    (_, ddp, *workers), log = results
    for worker in workers:
        _as_ddp_or_refused(worker[program], _ok(ddp[program], ""), program, log)
    if program not in REFUSED:
        assert workers[0][program]["params"] == workers[1][program]["params"], "every worker's"


def test_what_the_refusals_save(results):
    """DDP trains the refused programs; their ports (the replica context's all-reduce, ``cat_list`` in the
    step) give DDP's numbers, and the program as printed (the ports' DDP side) trains the same on DDP."""
    ours, ddp = results[0][0], results[0][1]
    assert ddp["fcos_num_pos_as_printed"]["params"] == ddp["fcos_num_pos_ported"]["params"], "the same DDP program"
    assert ddp[PADDED_GLOBALLY]["params"] == ddp["unet_segmentation_mixed_sizes_padded_in_step"]["params"]
    assert ours[PADDED_GLOBALLY]["params"] != ddp[PADDED_GLOBALLY]["params"]
