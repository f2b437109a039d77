"""Programs built on ``torch.func`` and higher-order autograd (``torchfunc_programs.py``), with the port's changes
(models and optimizers in ``strategy.scope()``, the loop body in ``strategy.run``, the data through
``experimental_distribute_dataset``), train on MirroredStrategy (2 logical CPUs) as DDP trains them on 2 Gloo
processes: the same weights and losses (float64; bit for bit here), every replica's copy equal, or multidev
refuses them saying why; under ``multidev launch --workers 2`` (one replica a worker) those of ``ON_WORKERS``
give DDP's result too. Where the distributed result is one device's (the global batch's mean, exact to
reassociation), the one-device run is compared too.

The MirroredStrategy and one-device cases run in one fresh interpreter, the DDP ranks in one 2-process job and
the launched workers in another, all started together (``torchfunc_run.py``).
"""
from __future__ import annotations

import re

import pytest

from tests.programs.test_pytutorials import run_three_ways
from tests.programs.torchfunc_run import ONE_DEVICE, ON_WORKERS

TIMEOUT_S = 240
# Both sides run the same ops on the same slices and average 2 gradients (exact in any order): 0.0 here;
# the margin is for another CPU's kernels.
TOLERANCE = 1e-10
# One device sums the global batch's rows in one reduction, two replicas in two halves: reassociation only.
ONE_DEVICE_TOLERANCE = 1e-12
EQUAL = ("maml", "maml_first_order", "dp_sgd", "dp_sgd_opacus", "ensemble_module", "input_gradient_penalty",
         "jacobian_penalty", "hvp_curvature_penalty", "hvp_in_update_reduced", "checkpoint_sequential_dropout",
         "custom_autograd_function")
REFUSED = {   # program -> (exception type, a regular expression its message matches)
    # stack_module_state's stacked leaves: tensors of no module, one for both replicas (the later replica's
    # backward or the earlier replica's step refuses them first, as the threads run)
    "ensemble_as_printed": ("ValueError", r"(loss\.backward\(\)|SGD\.step\(\)) inside MirroredStrategy\.run would "
                                          r"(accumulate into|update) tensors \(shapes \[\(3, \d, \d\).*\) that are "
                                          r"not mirrored"),
    "jit_script_submodule": ("ValueError", r"MirroredStrategy\.run called the torch\.jit\.script-ed module ScriptedBlock, "
                                           r"which holds variables created in a strategy's scope"),
    # each replica subtracts its own batch's HVP from the reduced gradients
    "hvp_in_update": ("ValueError", r"SGD\.step\(\) inside MirroredStrategy\.run: the gradient of 'Linear\.weight:0', "
                                    r"which loss\.backward\(\) reduced across replicas, was changed afterwards "
                                    r"differently on replica 1 than on replica 0"),
}
DRIFT_UNDER_DDP = ("ensemble_as_printed", "hvp_in_update")   # nothing keeps DDP's ranks together


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    loaded, logs = run_three_ways(tmp_path_factory, "torchfunc")
    assert sorted(loaded[0]["multidev"]) == sorted(EQUAL + tuple(REFUSED)), "every program is tested"
    return loaded, logs


def _ok(result: dict, log: str) -> dict:
    assert "error" not in result, (result["error"], log[-4000:])
    return result


def _max_diff(a: list, b: list) -> float:
    assert len(a) == len(b)
    return max(abs(x - y) for x, y in zip(a, b))


def _same_as_ddp(got: dict, theirs: dict) -> None:
    assert got["spread"] == 0.0 and theirs["spread"] == 0.0, "every replica's (rank's) copy is the same"
    assert _max_diff(got["params"], theirs["params"]) <= TOLERANCE
    assert got["log"] == pytest.approx(theirs["log"], rel=TOLERANCE, abs=TOLERANCE)


@pytest.mark.parametrize("program", EQUAL)
def test_program_trains_as_ddp(results, program):
    """MAML (second and first order: ``functional_call`` with fast weights, ``autograd.grad`` in the inner
    loop), per-sample gradients by ``vmap(grad(...))`` with DP-SGD's clipping and seeded noise set as
    ``p.grad`` by hand, a stacked ensemble registered on a module, double backprop, ``jacrev`` and ``hvp``
    penalties, ``checkpoint_sequential`` over dropout and a custom ``autograd.Function``: DDP's weights and
    losses. Before, ``functional_call`` inside ``strategy.run`` copied the swapped-in tensors into the
    replica's weights: the HVP penalty trained 0.074 off DDP's weights, silently, and MAML and ``vmap(grad)``
    raised torch's in-place errors."""
    ((ours, ddp, *_), log) = results
    _same_as_ddp(_ok(ours["multidev"][program], log), _ok(ddp[program], ""))


@pytest.mark.parametrize("program", ONE_DEVICE)
def test_program_gives_one_devices_weights(results, program):
    """The programs whose loss is a mean over the batch (MAML's over its tasks) give one device's weights on
    the global batch; so does DP-SGD written as Opacus' ``DistributedDPOptimizer`` distributes it (the noise
    drawn on the first replica only, the sum divided by the global batch)."""
    ((ours, *_), log) = results
    got, one = _ok(ours["multidev"][program], log), _ok(ours["one_device"][program], log)
    assert _max_diff(got["params"], one["params"]) <= ONE_DEVICE_TOLERANCE


def test_gradients_set_by_hand_are_summed_where_ddp_reduces_nothing(results):
    """DP-SGD sets ``p.grad`` by hand with no backward: DDP's reducer never sees it, so its ranks drift apart
    unless the program all-reduces them itself (``dp_sgd_no_reduction``: the ranks differ); multidev's
    ``optimizer.step()`` sums such gradients across replicas (TensorFlow's rule for gradients it did not
    reduce): DDP's with ``dist.all_reduce(p.grad)`` by hand (``dp_sgd``, compared above)."""
    ((ours, ddp, *_), log) = results
    assert ddp["dp_sgd_no_reduction"]["spread"] > 1e-3
    assert _ok(ours["multidev"]["dp_sgd"], log)["spread"] == 0.0


@pytest.mark.parametrize("program", sorted(REFUSED))
def test_program_refused_saying_why(results, program):
    """``stack_module_state``'s stacked parameters are new leaves of no module: one tensor for every replica,
    refused at the first backward that reaches them from a second replica (DDP reduces them nowhere: its
    ranks drift, ``ensemble_as_printed``'s spread; registered on a module, ``ensemble_module``, they train
    as DDP). A ``torch.jit.script``-ed submodule reads the variables in TorchScript, where no replica gets
    its copy: refused at its first forward (DDP trains it). A correction each replica computes from its own
    batch and subtracts from the reduced gradients (an HVP): refused at the first step, before any update (under
    DDP the ranks drift apart; before, the replicas took each variable's owner replica's correction, silently;
    averaged first, ``hvp_in_update_reduced``, it trains as DDP and as one device)."""
    ((ours, ddp, *_), log) = results
    kind, says = REFUSED[program]
    error = ours["multidev"][program].get("error", "")
    assert error.startswith(kind) and re.search(says, error), error
    theirs = _ok(ddp[program], "")
    assert (theirs["spread"] > 1e-6) == (program in DRIFT_UNDER_DDP), theirs["spread"]


@pytest.mark.parametrize("program", [p for p in ON_WORKERS if p not in REFUSED])
def test_program_under_multidev_launch_trains_as_ddp(results, program):
    """``multidev launch --workers 2``: both workers hold DDP's weights and log DDP's numbers."""
    ((_, ddp, *workers), log) = results
    first = _ok(workers[0][program], log)
    assert all(_ok(w[program], log)["params"] == first["params"] for w in workers), "every worker's"
    _same_as_ddp(first, ddp[program])


def test_under_multidev_launch_an_ensemble_as_printed_drifts_as_ddp_and_a_scripted_module_is_refused(results):
    """One replica a worker: the stacked leaves are each worker's own, as each rank's (worker 0 holds rank 0's
    weights, the workers differ by DDP's ranks' spread: nothing reduces them under either). The scripted
    module's variables would not train (its gradient goes to no replica's copy: 0.1 off DDP's weights):
    refused at the optimizer's first step."""
    ((_, ddp, *workers), log) = results
    w0, w1 = (_ok(w["ensemble_as_printed"], log) for w in workers)
    assert _max_diff(w0["params"], ddp["ensemble_as_printed"]["params"]) <= TOLERANCE
    assert _max_diff(w0["params"], w1["params"]) == pytest.approx(ddp["ensemble_as_printed"]["spread"], rel=1e-6)
    for w in workers:
        error = w["jit_script_submodule"].get("error", "")
        assert error.startswith("ValueError: SGD.step() inside MultiWorkerMirroredStrategy.run would train the "
                                "variables of the torch.jit.script-ed module ScriptedBlock"), error
