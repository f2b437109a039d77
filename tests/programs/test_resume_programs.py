"""Stop-and-resume programs as printed (``resume_programs.py``: the ImageNet example's ``save_checkpoint`` /
``--resume``, a checkpoint loaded after a step, a DDP job's checkpoint fine-tuned with a new head, random
states saved and restored with dropout), ported with two lines: on MirroredStrategy (2 logical CPUs) and
``multidev launch --workers 2`` the resumed runs continue as the uninterrupted ones and give DDP's numbers on
2 Gloo processes (float64), or are refused saying why. All three ways run together (``resume_run.py``)."""
from __future__ import annotations

import pytest

from tests.programs.test_pytutorials import _flat, _ok, run_three_ways

TOLERANCE = 1e-10   # 2 gradients averaged, and the job's sampler gives a replica other examples than DDP's rank


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return run_three_ways(tmp_path_factory, "resume")


def _close(a, b, tol=TOLERANCE) -> None:
    assert _flat(a) == pytest.approx(_flat(b), rel=tol, abs=tol)


def _ways(results, program):
    (ours, ddp, *workers), log = results
    return [_ok(ours[program], log)] + [_ok(w[program], log) for w in workers], _ok(ddp[program], "")


def _same_run(got: dict, theirs: dict) -> None:
    assert got["spread"] == 0.0 and theirs["spread"] == 0.0, "every replica's (rank's) copy is the same"
    _close(got["params"], theirs["params"])
    _close(got["log"], theirs["log"])


def test_imagenet_resume_continues_as_uninterrupted_and_as_ddp(results):
    """Losses of epochs 3-4, validation accuracy, best_acc1, the GradScaler's scale, StepLR's rate and the
    weights after ``--resume checkpoint.pth.tar`` are the uninterrupted run's and DDP's."""
    ours, ddp = _ways(results, "imagenet_resume")
    full = ddp["uninterrupted"]
    assert ddp["log"][0] == full["log"][0][-len(ddp["log"][0]):] and ddp["params"] == full["params"]
    for got in ours:
        _same_run(got["uninterrupted"], full)
        assert got["log"][0] == got["uninterrupted"]["log"][0][8:], "epochs 3-4 of the uninterrupted run, bit for bit"
        assert got["params"] == got["uninterrupted"]["params"] and got["log"][2] == got["uninterrupted"]["log"][2]
        _same_run(got, ddp)


def test_imagenet_resumed_on_one_device_from_two_replicas(results):
    """The checkpoint of 2 replicas resumed by OneDeviceStrategy (1 replica): the same global batches, so the
    uninterrupted run's numbers (the sum over replicas reassociated)."""
    ours, _ = _ways(results, "imagenet_resume")
    other = ours[0]["other"]
    assert "error" not in other, other
    _close(other["params"], ours[0]["uninterrupted"]["params"], 1e-12)
    _close(other["log"][0], ours[0]["uninterrupted"]["log"][0][8:], 1e-12)


def test_checkpoint_loaded_after_a_step(results):
    """Adam's state of a step already taken is replaced by the checkpoint's: the continuation is the
    uninterrupted one (and DDP's), Adam's step counts 2 + 3."""
    ours, ddp = _ways(results, "resume_after_first_step")
    assert ddp["log"][1] == ddp["log"][2]
    for got in ours:
        assert got["log"][1] == got["log"][2] and got["log"][3] == [5.0]
        _same_run(got, ddp)


def test_ddp_checkpoint_finetuned_in_the_port(results):
    """DDP's ``module.`` keys: as printed (``strict=False`` into the unwrapped model) the port is refused
    before anything loads (on the old code it loaded nothing and fine-tuned from the fresh init); with
    ``consume_prefix_in_state_dict_if_present`` or from ``model.module.state_dict()`` it is DDP's run."""
    ours, ddp = _ways(results, "ddp_checkpoint_finetune")
    assert _ok(ddp["as_printed"], "")["log"][1] == ["module.fc.bias", "module.fc.weight"]
    for got in ours:
        assert got["as_printed"]["error"].startswith("ValueError: load_state_dict(strict=False) would load nothing")
        assert "consume_prefix_in_state_dict_if_present" in got["as_printed"]["error"]
        for name in ("prefix_consumed", "module_file"):
            assert _ok(got[name], "")["log"][1] == ["fc.bias", "fc.weight"]
            _same_run({**got[name], "log": got[name]["log"][0]}, {**ddp["as_printed"], "log": ddp["as_printed"]["log"][0]})


def test_random_states_resume_dropout_loader_numpy_and_python(results):
    """``torch.get_rng_state()``, the loader's generator, numpy's and Python's states restored: every
    replica's dropout masks and draws continue as in the uninterrupted run, bit for bit, and as DDP's."""
    ours, ddp = _ways(results, "rng_resume")
    full = ddp["uninterrupted"]
    assert ddp["log"][0] == full["log"][0][-len(ddp["log"][0]):] and ddp["params"] == full["params"]
    for got in ours:
        assert got["log"][0] == got["uninterrupted"]["log"][0][4:] and got["params"] == got["uninterrupted"]["params"]
        _same_run(got, ddp)
