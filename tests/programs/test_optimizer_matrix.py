"""Every ``torch.optim`` optimizer and LR scheduler on 2 replicas gives DDP's result on 2 Gloo processes
and one device's on the global batch, with each of multidev's update plans (MirroredStrategy's split
update, its all-reduce, CentralStorageStrategy's shared storage) (``optimizer_matrix.py``: flags, groups,
closures, sparse gradients, state_dict reloads, schedulers stepped inside and outside the step), or
the error torch itself raises on one device. Compared after 4 steps: the weights, every number of
the optimizer's state, each group's hyperparameters after every step, the lr each replica (rank)
read inside the step, and the losses.

Against DDP the comparison is bit for bit: with 2 replicas a gradient is ``(a + b) / 2`` on both
sides. Against one device (one mean over the whole batch) the sums are reassociated: 1e-12.
All multidev cases run in one fresh interpreter, all DDP cases in one 2-process Gloo job, together.
"""

from __future__ import annotations

import json
import os
import re

import pytest

from tests.programs.optimizer_matrix import CASES
from tests.programs.test_programs import HERE, _finish, _free_port, _start

TIMEOUT_S = 180
ONE_DEVICE_TOLERANCE = 1e-12
# DDP's sparse all-reduce adds the ranks' rows in another order than multidev's sparse sum.
DDP_ROUNDING = {"sparse_adam": 1e-15}
# LBFGS keeps the closure's loss: multidev's closure returns the global batch's (one device's, so that
# its tolerance and line search decide alike everywhere); each DDP rank keeps its own half's.
DDP_OWN_LOSS_KEYS = {"prev_loss"}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("optimizer_matrix"))
    port = str(_free_port())
    script = os.path.join(HERE, "run_optimizer_matrix.py")
    procs = [_start(script, out, MULTIDEV_LOGICAL_CPUS="2")]
    procs += [_start(script, out, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                     MASTER_PORT=port) for r in range(2)]
    logs = _finish(procs, TIMEOUT_S)
    failed = [(p.args, p.returncode, log) for p, log in zip(procs, logs) if p.returncode != 0]
    assert not failed, failed
    with open(os.path.join(out, "multidev.json")) as f:
        ours = json.load(f)
    with open(os.path.join(out, "ddp0.json")) as f:
        ddp = json.load(f)
    return ours, ddp


def _no_error(result: dict) -> dict:
    assert "error" not in result, result["error"]
    return result


def _max_difference(a: list, b: list) -> float:
    assert [len(p) for p in a] == [len(p) for p in b]
    return max((abs(x - y) for p, q in zip(a, b) for x, y in zip(p, q)), default=0.0)


def _state_difference(got: dict, want: dict, skip: set = frozenset()) -> float:
    """The largest difference between two optimizers' states (the same entries, each as long)."""
    assert got.keys() == want.keys()
    worst = 0.0
    for name in want:
        mine, theirs = got[name]["state"], want[name]["state"]
        assert mine.keys() == theirs.keys(), name
        keys = [k for k in theirs if k.split(".", 1)[1] not in skip]
        worst = max(worst, _max_difference([mine[k] for k in keys], [theirs[k] for k in keys]))
    return worst


@pytest.mark.parametrize("plan", ["split", "all_reduce", "central_storage"])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_optimizer_equals_one_device_and_ddp(results, case, plan):
    ours, ddp = results
    one, got, theirs = ours[case.name]["one_device"], ours[case.name][plan], ddp[case.name]
    if plan == "central_storage" and case.shared_storage_refused:
        assert re.search(case.shared_storage_refused, got.get("error", "")), got
        return
    if case.torch_refuses:   # torch's own error on one device, raised alike by every replica and rank
        assert re.search(case.torch_refuses, one.get("error", "")), one
        assert got.get("error") == one["error"] and theirs.get("error") == one["error"], (got, theirs)
        return
    one, got, theirs = _no_error(one), _no_error(got), _no_error(theirs)
    assert got["replica_spread"] == 0.0 and got["state_spread"] == 0.0, "every replica's weights and state alike"
    assert _max_difference(got["params"], one["params"]) <= ONE_DEVICE_TOLERANCE
    assert _state_difference(got["optimizer"], one["optimizer"]) <= ONE_DEVICE_TOLERANCE
    assert got["groups"] == one["groups"], "each step's hyperparameters: one device's"
    assert got["lrs"] == [row * 2 for row in one["lrs"]], "every replica read one device's lr in the step"
    assert got["losses"] == pytest.approx(one["losses"], rel=ONE_DEVICE_TOLERANCE, abs=ONE_DEVICE_TOLERANCE)
    if case.ddp_differs:
        return
    assert theirs["rank_spread"] == 0.0, "every DDP rank holds the same parameters"
    rounding = DDP_ROUNDING.get(case.name, 0.0)
    assert _max_difference(got["params"], theirs["params"]) <= rounding
    assert _state_difference(got["optimizer"], theirs["optimizer"], skip=DDP_OWN_LOSS_KEYS) <= rounding
    assert got["groups"] == theirs["groups"] and got["lrs"] == theirs["lrs"] and got["losses"] == theirs["losses"]
