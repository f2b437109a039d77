"""From a resolver to torch.distributed ranks: TensorFlow's order, the rendezvous, the ps variant."""

import json

import pytest

from multidev.distribute.cluster_resolver import (
    SimpleClusterResolver,
    TFConfigClusterResolver,
    TorchrunClusterResolver,
    collective_world,
    default_cluster_resolver,
    parameter_server_world,
)
from multidev.distribute.cluster_spec import ClusterSpec

CLUSTER = {"chief": ["10.0.0.1:2222"], "worker": ["10.0.0.2:2222", "10.0.0.2:2223"],
           "ps": ["10.0.0.3:2222"], "evaluator": ["10.0.0.4:2222"]}


def simple(task_type, task_id, cluster=CLUSTER):
    return SimpleClusterResolver(ClusterSpec(cluster), task_type=task_type, task_id=task_id)


@pytest.mark.parametrize("task, rank", [(("chief", 0), 0), (("worker", 0), 1), (("worker", 1), 2)])
def test_collective_world_puts_the_chief_first(task, rank):
    world = collective_world(simple(*task))
    assert world.rank == rank and world.world_size == 3
    assert world.init_method == "tcp://10.0.0.1:2222"
    assert [m.describe() for m in world.members] == [
        "chief 0 (10.0.0.1:2222)", "worker 0 (10.0.0.2:2222)", "worker 1 (10.0.0.2:2223)"]
    assert not world.is_loopback


def test_local_rank_counts_earlier_tasks_on_the_same_host():
    assert collective_world(simple("worker", 1)).local_rank == 1
    assert collective_world(simple("worker", 0)).local_rank == 0


def test_without_chief_worker_zero_hosts_the_rendezvous():
    world = collective_world(simple("worker", 1, {"worker": ["127.0.0.1:5000", "127.0.0.1:5001"]}))
    assert (world.rank, world.world_size, world.init_method) == (1, 2, "tcp://127.0.0.1:5000")
    assert world.is_loopback and world.bind_host == "127.0.0.1"


def test_parameter_server_world_appends_ps_tasks():
    world = parameter_server_world(simple("ps", 0))
    assert world.rank == 3 and world.world_size == 4
    assert [(m.role, m.index) for m in world.members] == [("chief", 0), ("worker", 0), ("worker", 1), ("ps", 0)]


def test_parameter_server_world_needs_chief_worker_and_ps():
    with pytest.raises(ValueError, match=r"needs 'chief', 'worker' and 'ps'.*\['ps'\] missing"):
        parameter_server_world(simple("worker", 0, {"chief": ["a:1"], "worker": ["b:1"]}))


def test_ps_task_takes_no_part_in_the_all_reduce():
    with pytest.raises(ValueError, match=r"ps:0 takes no part"):
        collective_world(simple("ps", 0))


def test_evaluator_and_empty_cluster_are_one_process_worlds(monkeypatch):
    world = collective_world(simple("evaluator", 0))
    assert world.world_size == 1 and world.me.describe() == "evaluator 0 (10.0.0.4:2222)"
    monkeypatch.delenv("TF_CONFIG", raising=False)
    assert collective_world(TFConfigClusterResolver()).world_size == 1


def test_world_from_tf_config(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": CLUSTER, "task": {"type": "worker", "index": 0}}))
    assert collective_world(TFConfigClusterResolver()).rank == 1


TORCHRUN = {"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2",
            "MASTER_ADDR": "node0", "MASTER_PORT": "29500", "TORCHELASTIC_USE_AGENT_STORE": "True",
            "TORCHELASTIC_RESTART_COUNT": "2", "TORCHELASTIC_RUN_ID": "job7"}


def test_torchrun_resolver_and_world():
    r = TorchrunClusterResolver(TORCHRUN)
    assert (r.task_type, r.task_id, r.local_rank) == ("worker", 1, 1)
    assert r.cluster_spec().num_tasks("worker") == 4
    assert r.master() == "node0:29500"
    world = collective_world(r)
    assert (world.rank, world.world_size, world.init_method) == (1, 4, "tcp://node0:29500")
    assert world.store_is_external and world.key_prefix == "multidev/job7/2" and world.local_rank == 1
    # The agent's store is on the agent's host, not necessarily rank 0's: addresses come from the
    # ranks themselves once they join (process_hosts), not from MASTER_ADDR.
    assert world.describe(0) == "worker 0" and world.describe(3) == "worker 3"
    # Without the agent's store (multidev launch), rank 0 hosts a fresh store per rendezvous round
    # at MASTER_ADDR: its address is known, and restart counts (which agents may disagree on) stay out of keys.
    own = collective_world(TorchrunClusterResolver(dict(TORCHRUN, TORCHELASTIC_USE_AGENT_STORE="False")))
    assert not own.store_is_external and own.key_prefix == "multidev/job7"
    assert own.describe(0) == "worker 0 (node0:29500)"


@pytest.mark.parametrize("change, message", [
    ({"RANK": None}, r"RANK is not set"),
    ({"WORLD_SIZE": "two"}, r"WORLD_SIZE='two' must be an integer"),
    ({"RANK": "4"}, r"RANK=4 is out of range for WORLD_SIZE=4"),
    ({"MASTER_ADDR": ""}, r"MASTER_ADDR is not set"),
    ({"MASTER_PORT": "99999"}, r"outside 1..65535"),
])
def test_torchrun_env_errors(change, message):
    env = dict(TORCHRUN)
    for key, value in change.items():
        if value is None:
            env.pop(key)
        else:
            env[key] = value
    with pytest.raises(ValueError, match=message):
        TorchrunClusterResolver(env)


def test_default_resolver_prefers_tf_config_then_torchrun(monkeypatch):
    for key, value in TORCHRUN.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("TF_CONFIG", raising=False)
    assert isinstance(default_cluster_resolver(), TorchrunClusterResolver)
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 0}}))
    assert isinstance(default_cluster_resolver(), TFConfigClusterResolver)
