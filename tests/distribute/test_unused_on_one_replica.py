"""A head only some replicas' batches reach (a multi-task loss added only when the shard has that task's labels,
``AdaptiveLogSoftmaxWithLoss``'s tail clusters, a head for the rows a mask selects): DDP with
``find_unused_parameters=True`` counts zeros for the ranks that did not use it; ``loss.backward()`` on
MirroredStrategy must do the same. The replica that reached every leaf and the one that missed some met
again in different collectives when the latter filled in its zeros first (the two read one shared dict):
``CollectiveMismatchError``, in most runs (``tests/programs/loss_programs4.py``)."""

import torch

import multidev as md

F64 = torch.float64


def _halves(t):
    return md.distribute.PerReplica(tuple(torch.tensor_split(t, 2)))


def _build():
    torch.manual_seed(0)
    return torch.nn.Linear(5, 5).to(F64), torch.nn.Linear(5, 1).to(F64)


def _expected(x, skip_on):
    trunk, head = _build()
    per_replica = []
    for r, part in enumerate(torch.tensor_split(x, 2)):
        trunk.zero_grad()
        head.zero_grad()
        h = trunk(part)
        (h.sum() if r == skip_on else h.sum() + head(h).pow(2).mean()).backward()
        per_replica.append([torch.zeros_like(p) if p.grad is None else p.grad.clone()
                            for m in (trunk, head) for p in m.parameters()])
    return [(g0 + g1) / 2 for g0, g1 in zip(*per_replica)]


def test_a_head_one_replica_skips_gets_the_mean_with_zeros_every_run():
    """Replica 1 (then replica 0) skips the head; the other reaches every leaf. Thirty runs each: every one
    gives DDP's mean, counting the skipping replica's zeros."""
    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        trunk, head = _build()
    x = torch.randn(8, 5, generator=torch.Generator().manual_seed(1), dtype=F64)

    def step(part, skip_on):
        trunk.zero_grad()
        head.zero_grad()
        h = trunk(part)
        skip = int(md.distribute.get_replica_context().replica_id_in_sync_group) == skip_on
        (h.sum() if skip else h.sum() + head(h).pow(2).mean()).backward()
        return [p.grad.clone() for m in (trunk, head) for p in m.parameters()]

    for skip_on in (1, 0):
        expected = _expected(x, skip_on)
        for _ in range(30):
            got = strategy.experimental_local_results(strategy.run(step, args=(_halves(x), skip_on)))
            for replica in got:
                for g, e in zip(replica, expected):
                    torch.testing.assert_close(g, e, rtol=0, atol=1e-14)
