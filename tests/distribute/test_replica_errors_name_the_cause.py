"""When several replicas of one run fail, the error raised names the cause, whichever replica failed first.

A forward hook storing its output in a dict every replica shares: the replica that writes second is refused
(``hook_state``: "stored a tensor in activation['tanh'] in replica 0 and in replica 1"), but the other replica may
already have read that tensor, and its ``loss.backward()`` then fails reaching the other replica's weights
("reached replica 1's copy"), a consequence. Which of the two came first was a matter of timing (a CI run of the
hook programs raised the consequence twice); the refusal is raised now.
"""

from __future__ import annotations

import pytest
import torch

import multidev as md
from multidev.distribute.backward_reduce import crossed_error


@pytest.mark.parametrize("consequence_in", [0, 1])
def test_the_refusal_wins_over_a_crossed_backward(consequence_in):
    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])

    def step():
        replica = md.distribute.get_replica_context().replica_id_in_sync_group
        if replica == consequence_in:
            raise crossed_error(replica, 1 - replica, "'Linear.weight:0'")
        raise ValueError("The module hook stored a tensor in activation['tanh'] in replica 0 and in replica 1")

    with pytest.raises(ValueError, match="stored a tensor in activation"):
        strategy.run(step)


def test_a_crossed_backward_alone_is_raised_as_it_is():
    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])

    def step():
        replica = md.distribute.get_replica_context().replica_id_in_sync_group
        if replica == 0:
            raise crossed_error(0, 1, "'Linear.weight:0'")
        return torch.ones(())

    with pytest.raises(RuntimeError, match="reached replica 1's copy"):
        strategy.run(step)
