"""Layering of the strategy surface: values/ talks to strategies only through its Protocol, nothing outside
the implementation (distribute_lib.py) reaches ``extended._*`` (inside distribute/ too: reducers, contexts
and buckets get the typed ``ReplicaGroup``), every ``strategy.extended`` is a final implementation of the abstract
``md.distribute.StrategyExtended`` with an injected worker collective."""

from __future__ import annotations

import ast
import pathlib
import re

import pytest
import torch

import multidev as md
from multidev.distribute.worker_collective import LocalWorkers, WorkerCollective
from multidev.values.strategy_protocol import StrategyLike, VariableOwner, WorkerCollectiveLike

PACKAGE = pathlib.Path(md.__file__).parent
PRIVATE_EXTENDED = re.compile(r"extended(\([^)]*\))?\)?\._[A-Za-z]|getattr\(.*extended.*[\"']_[A-Za-z]")


def _sources(under: pathlib.Path):
    return sorted(p for p in under.rglob("*.py") if "__pycache__" not in p.parts)


#: The files that implement ``strategy.extended`` (their own private state is theirs to read).
EXTENDED_IMPLEMENTATION = {"distribute/distribute_lib.py", "distribute/extended.py"}


def test_no_private_extended_access_outside_its_implementation():
    offenders = [f"{p.relative_to(PACKAGE.parent)}:{n}: {line.strip()}"
                 for p in _sources(PACKAGE) if p.relative_to(PACKAGE).as_posix() not in EXTENDED_IMPLEMENTATION
                 for n, line in enumerate(p.read_text().splitlines(), 1) if PRIVATE_EXTENDED.search(line)]
    assert offenders == [], "use the public StrategyExtended surface (or its replica_group):\n" + "\n".join(offenders)


def test_the_check_above_can_fail():
    assert PRIVATE_EXTENDED.search("n = strategy.extended._num_workers")
    assert PRIVATE_EXTENDED.search('getattr(getattr(s, "extended", None), "_create_metric_variable", None)')
    assert PRIVATE_EXTENDED.search("_extended(model)._worker_index")
    assert not PRIVATE_EXTENDED.search("n = strategy.extended.num_workers")


def test_values_imports_nothing_from_distribute():
    imported = []
    for path in _sources(PACKAGE / "values"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            imported += [(path.name, n) for n in names if n.startswith(("multidev.distribute", "multidev.collectives",
                                                                        "multidev.keras"))]
    assert imported == []


@pytest.mark.parametrize("make", [
    lambda: md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]),
    lambda: md.distribute.OneDeviceStrategy("/cpu:0"),
    lambda: md.distribute.experimental.CentralStorageStrategy(["/cpu:0", "/cpu:1"]),
    lambda: md.distribute.get_strategy(),
], ids=["mirrored", "one_device", "central_storage", "default"])
def test_every_extended_is_a_final_implementation_with_a_local_collective(make):
    strategy = make()
    extended = strategy.extended
    assert isinstance(extended, md.distribute.StrategyExtended)
    assert getattr(type(extended), "__final__", False), f"{type(extended).__name__} is not typing.final"
    assert isinstance(strategy, StrategyLike) and isinstance(extended, VariableOwner)
    assert isinstance(extended.worker_collective, LocalWorkers)
    assert isinstance(extended.worker_collective, WorkerCollectiveLike)
    assert (extended.num_workers, extended.worker_index, extended.replica_offset) == (1, 0, 0)
    assert extended.num_local_replicas == len(extended.worker_devices) == len(extended.torch_devices)
    t = torch.arange(3.0)
    assert extended.worker_collective.sum(t) is t and extended.worker_collective.broadcast(t) is t
    assert extended.worker_collective.gather(t, 0) is t


def test_variable_layout_is_injected_not_flagged():
    mirrored = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]).extended
    one = md.distribute.OneDeviceStrategy("/cpu:0").extended
    central = md.distribute.experimental.CentralStorageStrategy(["/cpu:0", "/cpu:1"]).extended
    assert mirrored.distributes_variables and central.distributes_variables and not one.distributes_variables
    assert central.parameter_devices == (central.worker_devices[0],)      # logical CPUs share memory
    assert mirrored.parameter_devices == mirrored.worker_devices


def test_the_abstract_interface_cannot_be_instantiated():
    with pytest.raises(TypeError, match="abstract"):
        md.distribute.StrategyExtended()
    with pytest.raises(TypeError, match="abstract"):
        WorkerCollective()


def test_parameter_server_extended_is_final():
    from multidev.distribute.parameter_server.cluster import ParameterServerExtended

    assert issubclass(ParameterServerExtended, md.distribute.StrategyExtended)
    assert getattr(ParameterServerExtended, "__final__", False)


def test_multi_worker_extended_has_a_process_collective(fresh):
    out = fresh("""
        import multidev as md
        from multidev.distribute.worker_collective import ProcessWorkers
        ext = md.distribute.MultiWorkerMirroredStrategy().extended
        assert isinstance(ext, md.distribute.StrategyExtended) and type(ext).__final__
        assert isinstance(ext.worker_collective, ProcessWorkers)
        print(ext.num_workers, ext.worker_index, ext.replica_offset, ext.should_checkpoint)
    """)
    assert out.stdout.split() == ["1", "0", "0", "True"]


def test_tpu_strategy_is_a_strategy_that_refuses_to_build():
    assert issubclass(md.distribute.TPUStrategy, md.distribute.Strategy)
    with pytest.raises(ValueError, match="no TPU backend"):
        md.distribute.TPUStrategy()
