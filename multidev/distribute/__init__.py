"""``md.distribute``: TensorFlow's ``tf.distribute`` on torch tensors and modules.

    strategy = md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        model = torch.nn.Linear(4, 1)             # parameters become MirroredVariables
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    strategy.run(train_step, args=(batch,))      # one call per replica, gradients summed
"""

from multidev._core.enums import ReduceOp
from multidev.distribute import cluster_resolver, experimental
from multidev.distribute.central_storage_strategy import CentralStorageStrategy
from multidev.distribute.context_api import (
    get_cross_replica_context,
    get_replica_context,
    get_strategy,
    has_strategy,
    in_cross_replica_context,
)
from multidev.distribute.extended import StrategyExtended
from multidev.distribute.cross_device_ops import (
    CrossDeviceOps,
    HierarchicalCopyAllReduce,
    NcclAllReduce,
    ReductionToOneDevice,
)
from multidev.distribute.input_lib import DistributedDataset, DistributedIterator
from multidev.distribute.input_options import InputContext, InputOptions, InputReplicationMode
from multidev.distribute.mirrored_strategy import MirroredStrategy
from multidev.distribute.multi_worker_mirrored_strategy import MultiWorkerMirroredStrategy
from multidev.distribute.one_device_strategy import OneDeviceStrategy
from multidev.distribute.parameter_server import ParameterServerStrategy, Server
from multidev.distribute import coordinator
from multidev.distribute.replica_context import ReplicaContext
from multidev.distribute.run_options import RunOptions
from multidev.distribute.strategy import Strategy
from multidev.distribute.set_strategy import experimental_set_strategy
from multidev.distribute.tpu_strategy import TPUStrategy
from multidev.values import Mirrored, MirroredVariable, PerReplica, SyncOnReadVariable
from multidev.values import AnyDistributedValue as DistributedValues  # values and distributed variables

__all__ = [
    "ReduceOp",
    "Strategy",
    "StrategyExtended",
    "MirroredStrategy",
    "MultiWorkerMirroredStrategy",
    "OneDeviceStrategy",
    "CentralStorageStrategy",
    "ReplicaContext",
    "CrossDeviceOps",
    "ReductionToOneDevice",
    "NcclAllReduce",
    "HierarchicalCopyAllReduce",
    "DistributedValues",
    "PerReplica",
    "Mirrored",
    "MirroredVariable",
    "SyncOnReadVariable",
    "get_strategy",
    "has_strategy",
    "get_replica_context",
    "get_cross_replica_context",
    "in_cross_replica_context",
    "experimental",
    "cluster_resolver",
    "ParameterServerStrategy",
    "Server",
    "coordinator",
    "InputContext",
    "InputOptions",
    "InputReplicationMode",
    "RunOptions",
    "DistributedDataset",
    "DistributedIterator",
    "experimental_set_strategy",
    "TPUStrategy",
]

# torchmetrics' Metric objects on replicas (patched while strategies live, once torchmetrics is imported)
from multidev.distribute import front_end as _front_end, replica_metrics as _replica_metrics  # noqa: E402

_front_end.register(_replica_metrics.FRONT_END)
