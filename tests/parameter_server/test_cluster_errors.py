"""Malformed parameter-server clusters fail with clear errors before any connection is attempted."""

from __future__ import annotations

import json

import pytest
import torch.distributed.rpc as rpc

import multidev as md
from multidev.distribute.cluster_spec import ClusterSpec
from multidev.distribute.cluster_resolver import SimpleClusterResolver, TFConfigClusterResolver
from multidev.distribute.parameter_server import rpc_layer

CHIEF, W0, W1, PS0 = "127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3", "127.0.0.1:4"


def _resolver(cluster: dict, task_type: str = "chief", task_id: int = 0):
    return SimpleClusterResolver(ClusterSpec(cluster), task_type=task_type, task_id=task_id)


def _no_agent() -> bool:
    return not rpc.api._is_current_rpc_agent_set()


@pytest.mark.parametrize("cluster, needle", [
    ({"chief": [CHIEF], "worker": [W0]}, r"\['ps'\] missing"),
    ({"worker": [W0, W1], "ps": [PS0]}, r"\['chief'\] missing"),
    ({"chief": [CHIEF], "ps": [PS0]}, r"\['worker'\] missing"),
    ({"chief": [CHIEF]}, r"\['worker', 'ps'\] missing"),
])
def test_missing_roles_are_named(cluster, needle):
    with pytest.raises(ValueError, match=needle):
        md.distribute.ParameterServerStrategy(_resolver(cluster))
    assert _no_agent()


def test_unknown_role_and_duplicate_address():
    with pytest.raises(ValueError, match="Unknown role 'trainer'"):
        md.distribute.ParameterServerStrategy(
            _resolver({"chief": [CHIEF], "worker": [W0], "ps": [PS0], "trainer": ["127.0.0.1:9"]}))
    with pytest.raises(ValueError, match="Duplicate address"):
        md.distribute.ParameterServerStrategy(_resolver({"chief": [CHIEF], "worker": [W0], "ps": [W0]}))
    assert _no_agent()


def test_task_outside_the_cluster():
    with pytest.raises(ValueError, match="out of range"):
        md.distribute.ParameterServerStrategy(
            _resolver({"chief": [CHIEF], "worker": [W0], "ps": [PS0]}, task_type="worker", task_id=3))
    assert _no_agent()


def test_malformed_tf_config(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"chief": [CHIEF], "worker": [W0]},
                                                "task": {"type": "chief", "index": 0}}))
    with pytest.raises(ValueError, match="'ps'"):
        md.distribute.ParameterServerStrategy(TFConfigClusterResolver())
    monkeypatch.setenv("TF_CONFIG", "{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        md.distribute.ParameterServerStrategy(TFConfigClusterResolver())
    assert _no_agent()


def test_bad_arguments():
    with pytest.raises(TypeError, match="cluster resolver"):
        md.distribute.ParameterServerStrategy({"chief": [CHIEF]})
    with pytest.raises(TypeError, match="variable_partitioner"):
        md.distribute.ParameterServerStrategy(_resolver({"chief": [CHIEF], "worker": [W0], "ps": [PS0]}),
                                              variable_partitioner=3)
    with pytest.raises(ValueError, match="evaluator"):
        md.distribute.ParameterServerStrategy(
            _resolver({"chief": [CHIEF], "worker": [W0], "ps": [PS0], "evaluator": ["127.0.0.1:8"]},
                      task_type="evaluator"))
    with pytest.raises(ValueError, match="ParameterServerStrategy"):
        md.distribute.coordinator.ClusterCoordinator(md.distribute.OneDeviceStrategy("/cpu:0"))
    assert _no_agent()


def test_server_is_for_workers_and_ps_only():
    with pytest.raises(ValueError, match="'worker' and 'ps' tasks"):
        md.distribute.Server(ClusterSpec({"chief": [CHIEF], "worker": [W0], "ps": [PS0]}),
                             job_name="chief", task_index=0, start=False)
    with pytest.raises(TypeError, match="ClusterResolver or a ClusterSpec"):
        md.distribute.Server("localhost:1")


def test_rpc_timeout_setting(monkeypatch):
    monkeypatch.setenv(rpc_layer.TIMEOUT_ENV, "2.5")
    assert rpc_layer.rpc_timeout() == 2.5
    for bad in ("soon", "0"):
        monkeypatch.setenv(rpc_layer.TIMEOUT_ENV, bad)
        with pytest.raises(ValueError, match=rpc_layer.TIMEOUT_ENV):
            rpc_layer.rpc_timeout()


def test_a_second_task_in_one_process_is_refused(monkeypatch):
    """TF's in-process cluster (several Servers in one process) is refused before any connection."""
    from multidev.distribute.parameter_server import server as server_mod
    monkeypatch.delenv("TF_CONFIG", raising=False)
    monkeypatch.setattr(server_mod, "_process_task", [])
    spec = ClusterSpec({"chief": [CHIEF], "worker": [W0, "127.0.0.1:9"], "ps": [PS0]})
    md.distribute.Server(spec, job_name="worker", task_index=0, start=False)
    md.distribute.Server(spec, job_name="worker", task_index=0, start=False)   # the same task again: fine
    with pytest.raises(ValueError, match="for ps 0 in a process that is worker 0.*one task per process"):
        md.distribute.Server(spec, job_name="ps", task_index=0, start=False)
    assert _no_agent()
