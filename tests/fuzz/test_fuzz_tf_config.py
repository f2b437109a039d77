"""Fuzzed TF_CONFIG documents and resolver overrides: a valid cluster, or a ValueError that shows the value."""

from __future__ import annotations

import json
import os

import pytest

pytest.importorskip("hypothesis")
from hypothesis import given, settings, strategies as st  # noqa: E402

from multidev.distribute.cluster_resolver import TFConfigClusterResolver, collective_world  # noqa: E402
from multidev.distribute.cluster_resolver.tfconfig import parse_tf_config  # noqa: E402
from multidev.distribute.cluster_resolver.validation import parse_address, same_host_key  # noqa: E402
from tests.fuzz._checks import FAILED, outcome  # noqa: E402

pytestmark = pytest.mark.timeout(300 if settings().max_examples < 1000 else 3600)  # the long profile runs for minutes

HOSTS = st.one_of(
    st.sampled_from(["localhost", "127.0.0.1", "127.1", "LOCALHOST", "[::1]", "::1", "10.0.0.2", "host-a", "h_b.example",
                     "my host", "a\nb", " localhost", "localhost ", "ｈｏｓｔ", "dañ", "[localhost]", "[::1", "", "*", "a:b"]),
    st.text(max_size=12),
)
PORTS = st.one_of(st.integers(-5, 70000).map(str), st.sampled_from(["١٢٣", "²", "12 ", "0x10", "", "2222", "02222", "1e3"]))
ADDRESSES = st.one_of(st.tuples(HOSTS, PORTS).map(":".join), st.text(max_size=20), st.integers(), st.none(),
                      st.lists(st.text(max_size=3), max_size=2))
ROLES = st.sampled_from(["chief", "worker", "ps", "evaluator", "Worker", "master", "", "w o"])
CLUSTERS = st.one_of(st.dictionaries(ROLES, st.one_of(st.lists(ADDRESSES, max_size=4), ADDRESSES,
                                                      st.dictionaries(st.integers(0, 5).map(str), ADDRESSES, max_size=3)),
                                     max_size=3),
                     st.lists(ADDRESSES, max_size=2), st.text(max_size=5), st.none())
INDICES = st.one_of(st.integers(-2, 5), st.sampled_from(["0", "1", "x", "١", "²", " 1", "1.0", ""]), st.floats(0, 3),
                    st.booleans(), st.none(), st.lists(st.integers(0, 2), max_size=1))
TASKS = st.one_of(st.fixed_dictionaries({"type": ROLES, "index": INDICES}),
                  st.dictionaries(st.sampled_from(["type", "index", "x"]), st.one_of(ROLES, INDICES), max_size=3),
                  st.text(max_size=4), st.none())
DOCUMENTS = st.one_of(
    st.fixed_dictionaries({"cluster": CLUSTERS, "task": TASKS}).map(json.dumps),
    st.fixed_dictionaries({"cluster": CLUSTERS}, optional={"task": TASKS, "rpc_layer": st.one_of(st.text(max_size=4), st.integers()),
                                                           "environment": st.one_of(st.text(max_size=4), st.none())}).map(json.dumps),
    st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5)),
                 lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)),
                 max_leaves=10).map(json.dumps),
    st.integers(1, 50_000).map(lambda n: "[" * n + "]" * n),
    st.integers(1, 50_000).map(lambda n: '{"a":' * n + "1" + "}" * n),
    st.text(max_size=40),
)


def _check_accepted(config) -> None:
    seen = set()
    for job in config.cluster.jobs:
        for index in config.cluster.task_indices(job):
            address = config.cluster.task_address(job, index)
            host, port = parse_address(address)
            assert address.isascii() and not any(c.isspace() for c in address), f"accepted {address!r}"
            assert (same_host_key(host), port) not in seen, f"duplicate {address!r} accepted"
            seen.add((same_host_key(host), port))
    assert config.task_id is None or (type(config.task_id) is int and config.task_id >= 0)


@given(DOCUMENTS)
def test_tf_config_documents_parse_to_a_valid_cluster_or_raise_value_error(text):
    config = outcome(lambda: parse_tf_config(text))
    if config is not FAILED:
        _check_accepted(config)


@given(ADDRESSES)
def test_addresses_parse_or_show_the_value(address):
    result = outcome(lambda: parse_address(address), address)
    if result is not FAILED:
        host, port = result
        assert 0 < port < 65536 and host and host.isascii() and not any(c.isspace() for c in host)


@given(task_type=st.one_of(ROLES, st.none(), st.integers()), task_id=INDICES)
def test_resolver_overrides_are_checked(task_type, task_id):
    saved = os.environ.get("TF_CONFIG")
    os.environ["TF_CONFIG"] = json.dumps({"cluster": {"worker": ["localhost:1", "localhost:2"], "chief": ["localhost:3"]},
                                          "task": {"type": "worker", "index": 0}})
    try:
        resolver = outcome(lambda: TFConfigClusterResolver(task_type=task_type, task_id=task_id), task_type, task_id)
        if resolver is FAILED:
            return
        assert type(resolver.task_id) is int and resolver.task_id in (0, 1, 2)
        world = outcome(lambda: collective_world(resolver))   # pure: no network
        expected_size = 1 if resolver.task_type == "evaluator" else 3   # an evaluator is a cluster of its own
        assert world is FAILED or 0 <= world.rank < world.world_size == expected_size
    finally:
        if saved is None:
            os.environ.pop("TF_CONFIG", None)
        else:
            os.environ["TF_CONFIG"] = saved


@pytest.mark.parametrize("a, b", [("localhost", "127.0.0.1"), ("127.1", "127.0.0.1"), ("LOCALHOST.", "localhost"),
                                  ("[::1]", "[0:0::1]")])
def test_one_address_spelled_twice_is_a_duplicate(a, b):
    with pytest.raises(ValueError, match="Duplicate address"):
        parse_tf_config(json.dumps({"cluster": {"worker": [f"{a}:5000", f"{b}:5000"]}, "task": {"type": "worker", "index": 0}}))
