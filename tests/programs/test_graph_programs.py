"""Graph neural networks and recommenders as printed (``graph_programs.py``, ``graph_programs2.py``: Kipf's GCN on
a ``torch.sparse.mm`` adjacency, a GAT with a segment softmax, GraphSAGE on ``collate_fn`` subgraphs,
``EmbeddingBag`` click models with ``offsets`` and two optimizers, BPR matrix factorisation, word2vec's skip-gram
with negative sampling), ported with two lines: on MirroredStrategy (2 logical CPUs) and ``multidev launch
--workers 2`` they give DDP's weights and losses on 2 Gloo processes (float64), or are refused saying why.

The strategy's cases run in one fresh interpreter, the DDP ranks in one 2-process job and the launched workers
in another, all started together (``graph_run.py``)."""
from __future__ import annotations

import pytest

from tests.programs.graph_run import ALL as PROGRAMS, STRATEGY_ONLY
from tests.programs.test_pytutorials import _flat, _ok, run_three_ways

TOLERANCE = 1e-10   # sparse rows summed in another order than Gloo's: 1e-15 here
SUBGRAPH = "Components of a dataset element have different batch sizes"
REFUSED = {   # program -> what the error says, on every layout
    "sage_collate_as_printed": SUBGRAPH,
    "embedding_bag_collate_as_printed": SUBGRAPH,
}
DDP_REFUSES = {"gcn_adjacency_buffer": ("No support for sparse tensors", "gcn_adjacency_attribute")}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return run_three_ways(tmp_path_factory, "graph")


def _equal(got: dict, theirs: dict) -> None:
    assert got["spread"] == 0.0 and theirs["spread"] == 0.0, "every replica's (rank's) copy is the same"
    assert len(got["params"]) == len(theirs["params"])
    assert max(abs(x - y) for x, y in zip(got["params"], theirs["params"])) <= TOLERANCE
    assert _flat(got["log"]) == pytest.approx(_flat(theirs["log"]), rel=TOLERANCE, abs=TOLERANCE)


def _reference(ddp: dict, program: str) -> dict:
    """DDP's result, or (a program DDP refuses) its port's: a sparse buffer kept as a plain attribute."""
    return _ok(ddp[DDP_REFUSES[program][1]] if program in DDP_REFUSES else ddp[program], "")


def test_every_program_ran(results):
    (ours, ddp, *workers), _ = results
    assert sorted(ddp) == sorted(PROGRAMS)
    assert sorted(ours) == sorted(workers[0]) == sorted(workers[1]) == sorted({*PROGRAMS, *STRATEGY_ONLY})


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_on_mirrored_strategy_as_ddp(results, program):
    """Full-graph training (the graph a plain argument of ``strategy.run``: every replica the whole graph, as
    every rank), node splits, ``index_add_`` / ``scatter_reduce`` message passing, sparse gradients of
    ``EmbeddingBag`` / ``Embedding(sparse=True)`` under ``SparseAdam`` or ``SGD``, negatives drawn in the step."""
    (ours, ddp, *_), log = results
    _equal(_ok(ours[program], log), _reference(ddp, program))


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_under_multidev_launch_as_ddp(results, program):
    (_, ddp, *workers), log = results
    for worker in workers:
        _equal(_ok(worker[program], log), _reference(ddp, program))
    assert workers[0][program]["params"] == workers[1][program]["params"], "every worker's"


@pytest.mark.parametrize("program", sorted(REFUSED))
def test_collated_subgraphs_and_bags_through_the_global_loader_are_refused(results, program):
    """A ``collate_fn`` that returns a subgraph (node features, ``edge_index`` (2, E), seed positions) or flat
    ids with ``offsets`` makes no batch to cut along dimension 0: refused, naming
    ``distribute_datasets_from_function`` (the ``per_rank`` programs: DDP's result with one pipeline per
    replica)."""
    (ours, _, *workers), _ = results
    for got in (ours[program], *(worker[program] for worker in workers)):
        assert got.get("error", "").startswith("ValueError") and REFUSED[program] in got["error"], got
        assert "distribute_datasets_from_function" in got["error"] and "PER_REPLICA" in got["error"]


def test_ddp_refuses_a_sparse_buffer(results):
    """Why a sparse buffer is compared with DDP's port of it: DDP's buffer broadcast has no sparse support."""
    ddp = results[0][1]
    for program, (error, _) in DDP_REFUSES.items():
        assert error in ddp[program].get("error", ""), ddp[program]
