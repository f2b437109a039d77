"""Time-series and audio programs (``timeseries_programs*.py``: a stateful LSTM trained with truncated BPTT, its
state on the module or in a variable of the loop; forecasting on sliding windows with teacher forcing and with
``pack_padded_sequence(enforce_sorted=False)`` / ``pad_packed_sequence(total_length=...)``; a log-mel front end
with ``torch.stft`` and SpecAugment masks drawn in the step; WaveNet's dilated causal convolutions; locuslab's
TCN with ``weight_norm``), ported with two lines: on MirroredStrategy (2 logical CPUs) and ``multidev launch
--workers 2`` they give DDP's weights and logged numbers on 2 Gloo processes (float64), or are refused saying why.

The strategy's cases run in one fresh interpreter, the DDP ranks in one 2-process job and the launched workers
in another, all started together (``timeseries_run.py``)."""
from __future__ import annotations

import pytest

from tests.programs.test_pytutorials import _flat, _ok, run_three_ways
from tests.programs.timeseries_run import ALL as PROGRAMS

TIMEOUT_S = 240
TOLERANCE = 1e-10   # the same ops on the same slices, 2 gradients averaged
GLOBAL_STATE = ("ValueError: the LSTM's hidden state holds 8 rows for a replica's batch of 4 (2 replicas in sync)")
REFUSED = {   # program -> what the error says (MirroredStrategy and the launched workers alike)
    "stateful_module_init_hidden": GLOBAL_STATE,
    "carried_hidden_global_init": GLOBAL_STATE,
    # left as found: the assignment to a buffer's name is written into the replica's copy in place, which the
    # LSTM saved for backward (DDP rebinds the buffer; multidev's variable keeps its storage): torch's error
    "stateful_buffer_state": "RuntimeError: one of the variables needed for gradient computation has been "
                             "modified by an inplace operation",
}
REFUSED_MIRRORED = {   # a worker's one replica gives back plain tensors, which repackage_hidden detaches as DDP
    **REFUSED, "carried_hidden_detached_outside": "TypeError: PerReplica is not iterable: use "
                                                  "strategy.experimental_local_results(value)"}
ALL = sorted(PROGRAMS)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return run_three_ways(tmp_path_factory, "timeseries")


def _equal(got: dict, theirs: dict) -> None:
    assert got["spread"] == 0.0 and theirs["spread"] == 0.0, "every replica's (rank's) copy is the same"
    assert len(got["params"]) == len(theirs["params"])
    assert max(abs(x - y) for x, y in zip(got["params"], theirs["params"])) <= TOLERANCE
    for key in sorted(set(theirs) - {"params", "spread"}):   # logs, evaluations, draws after training
        assert _flat(_listed(got[key])) == pytest.approx(_flat(_listed(theirs[key])), rel=TOLERANCE,
                                                         abs=TOLERANCE), key


def _listed(value) -> list:
    return value if isinstance(value, list) else [value]


def _as_ddp_or_refused(got: dict, theirs: dict, program: str, log: str, refused: dict = REFUSED) -> None:
    if program in refused:
        assert refused[program] in got.get("error", ""), got
        return
    _equal(_ok(got, log), theirs)


def test_every_program_ran(results):
    (ours, ddp, *workers), _ = results
    assert sorted(ours) == sorted(ddp) == sorted(workers[0]) == sorted(workers[1]) == ALL


@pytest.mark.parametrize("program", ALL)
def test_on_mirrored_strategy_as_ddp_or_refused(results, program):
    """A state made for the global batch (``init_hidden(batch_size)`` with the loader's batch size) is refused
    naming the port; so is ``repackage_hidden`` on ``strategy.run``'s per-replica output between runs (its
    port: ``strategy.run(repackage_hidden, args=(hidden,))``). The rest give DDP's numbers: each replica
    carries its own state, as each rank does."""
    (ours, ddp, *_), log = results
    _as_ddp_or_refused(ours[program], _ok(ddp[program], ""), program, log, REFUSED_MIRRORED)


@pytest.mark.parametrize("program", ALL)
def test_under_multidev_launch_as_ddp_or_refused(results, program):
    (_, ddp, *workers), log = results
    for worker in workers:
        _as_ddp_or_refused(worker[program], _ok(ddp[program], ""), program, log)
    if program not in REFUSED:
        assert workers[0][program]["params"] == workers[1][program]["params"], "every worker's"


def test_what_ddp_does_with_the_refused_programs(results):
    """DDP's program makes each rank's state from its own loader's batch size: the same training as a state
    started from zeros (``self.hidden = None``), which multidev gives."""
    ddp = results[0][1]
    assert ddp["stateful_module_init_hidden"]["log"] == ddp["stateful_module_hidden"]["log"]
    assert ddp["carried_hidden_global_init"]["log"] == ddp["carried_hidden"]["log"]
    assert ddp["carried_hidden_detached_outside"]["log"] == ddp["carried_hidden_init_in_step"]["log"]
