"""Public PyTorch sequence and attention programs (``sequence_programs*.py``: ``nn.MultiheadAttention`` used
directly, ``nn.TransformerEncoder`` with nested tensors, the nn.Transformer translation tutorial with
``greedy_decode``, a GRU seq2seq with teacher forcing drawn from Python's ``random`` in the step, the
char-RNN name classifier's one name per step), ported with two lines: on MirroredStrategy (2 logical CPUs)
and ``multidev launch --workers 2`` they give DDP's weights, logged numbers and evaluations on 2 Gloo
processes (float64), or are refused saying why.

The strategies' cases run in one fresh interpreter, the DDP ranks in one 2-process job and the launched
workers in another, all started together (``sequence_run.py``)."""
from __future__ import annotations


import pytest

from tests.programs.sequence_run import ALL as PROGRAMS, AS_PRINTED
from tests.programs.test_pytutorials import _flat, _ok, run_three_ways

TIMEOUT_S = 240
TOLERANCE = 1e-10   # the same ops on the same slices, 2 gradients averaged (fast and slow attention paths: 1e-16)
REFUSED = {   # program -> what the error says (MirroredStrategy and the launched workers alike)
    "translation_as_printed": "ValueError: experimental_distribute_dataset: batch 0 of the torch DataLoader holds "
                              "8 examples, but its tensors have 7 rows along dimension 0",
    "char_rnn_as_printed": "ValueError: experimental_distribute_dataset got a torch DataLoader with batch_size=1 "
                           "for 2 replicas",
}
COMPARED = sorted(set(PROGRAMS) - set(AS_PRINTED))


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    loaded, logs = run_three_ways(tmp_path_factory, "sequence")
    return loaded, logs


def _equal(got: dict, theirs: dict) -> None:
    assert got["spread"] == 0.0 and theirs["spread"] == 0.0, "every replica's (rank's) copy is the same"
    assert len(got["params"]) == len(theirs["params"])
    assert max(abs(x - y) for x, y in zip(got["params"], theirs["params"])) <= TOLERANCE
    for key in sorted(set(theirs) - {"params", "spread"}):   # logs, evaluations, decoded tokens
        assert _numbers(got[key]) == pytest.approx(_numbers(theirs[key]), rel=TOLERANCE, abs=TOLERANCE), key


def _numbers(value) -> list:
    if isinstance(value, dict):
        return [x for k in sorted(value) for x in _numbers(value[k])]
    return _flat(value) if isinstance(value, list) else [value]


def test_every_program_ran(results):
    (ours, ddp, *workers), _ = results
    assert sorted(ours) == sorted(workers[0]) == sorted(PROGRAMS) and sorted(ddp) == COMPARED


@pytest.mark.parametrize("program", COMPARED)
def test_on_mirrored_strategy_as_ddp(results, program):
    """Training, the attention weights logged, eval under ``no_grad`` / ``inference_mode`` (torch's fused
    fast paths: nested tensors' zeros at padded positions), greedy decoding inside and outside the run."""
    (ours, ddp, *_), log = results
    _equal(_ok(ours[program], log), _ok(ddp[program], ""))


@pytest.mark.parametrize("program", COMPARED)
def test_under_multidev_launch_as_ddp(results, program):
    (_, ddp, *workers), log = results
    first = _ok(workers[0][program], log)
    assert _ok(workers[1][program], log)["params"] == first["params"], "every worker's"
    _equal(first, ddp[program])


@pytest.mark.parametrize("program", sorted(AS_PRINTED))
def test_as_printed_refused_saying_why(results, program):
    """The translation tutorial's sequence-first ``collate_fn`` (its split would cut the sentences) and the
    char-RNN's batch of one through ``experimental_distribute_dataset`` (a replica idle every step)."""
    (ours, _, *workers), _ = results
    for got in (ours[program], *(w[program] for w in workers)):
        assert got.get("error", "").startswith(REFUSED[program]), got


def test_the_programs_exercise_what_they_name(results):
    """Nested tensors gave zeros at padded positions in eval; teacher forcing drew from Python's random."""
    ddp = results[0][1]
    assert ddp["encoder_nested"]["whole"][2] == 0.0
    assert ddp["gru_seq2seq_teacher_forcing"]["after"] == results[0][0]["gru_seq2seq_teacher_forcing"]["after"]
    assert all(len(t) > 2 for t in ddp["translation_batch_first"]["translations"])
