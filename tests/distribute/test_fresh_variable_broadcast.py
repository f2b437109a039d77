"""Variables made after others were collected still take the chief's values at the next run.

``_prepare_variables`` broadcasts the variables created since the last run (several workers: the
chief's initial values). The list it indexes drops dead variables after a run; the count of those
broadcast did not follow, so a model built after an earlier one was collected was skipped on a worker
whose garbage collector had run (a collective mismatch across workers, found by the optimizer matrix's
MultiWorkerMirroredStrategy job, or workers starting from different values)."""

import gc

import torch

import multidev as md


def test_a_model_built_after_another_was_collected_is_broadcast(monkeypatch):
    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    broadcast = []
    monkeypatch.setattr(strategy.extended._workers, "broadcast_initial_values",
                        lambda primaries: broadcast.append([p.shape for p in primaries]))
    noop = lambda: None   # noqa: E731
    with strategy.scope():
        models = [torch.nn.Linear(2, 3)]
    strategy.run(noop)
    with strategy.scope():
        kept = torch.nn.Linear(3, 4)
    strategy.run(noop)

    def collect():   # the first model is collected during a run (a cycle freed by a GC pass there)
        if models:
            models.pop()
        gc.collect()
    strategy.run(collect)   # after it the dead variables leave the list
    with strategy.scope():
        new = torch.nn.Linear(5, 6)
    strategy.run(noop)
    assert broadcast == [[(3, 2), (3,)], [(4, 3), (4,)], [(6, 5), (6,)]]
    assert kept.weight.shape == (4, 3) and new.weight.shape == (6, 5)
