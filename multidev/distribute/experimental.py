"""``md.distribute.experimental``: TensorFlow's experimental strategy names."""

from multidev.distribute.central_storage_strategy import CentralStorageStrategy
from multidev.distribute.multi_worker_mirrored_strategy import (
    ExperimentalMultiWorkerMirroredStrategy as MultiWorkerMirroredStrategy)
from multidev.distribute.communication import CommunicationImplementation, CommunicationOptions
from multidev.distribute.strategy import ValueContext
from multidev.distribute import coordinator
from multidev.distribute.parameter_server import partitioners
from multidev.distribute.parameter_server.checkpoint import ParameterServerCheckpoint
from multidev.distribute.parameter_server.strategy import ParameterServerStrategy
from multidev.distribute.tpu_strategy import TPUStrategy

# TensorFlow's older alias of CommunicationImplementation.
CollectiveCommunication = CommunicationImplementation

__all__ = [
    "CentralStorageStrategy",
    "MultiWorkerMirroredStrategy",
    "PreemptionCheckpointHandler",
    "TerminationConfig",
    "CommunicationImplementation",
    "CollectiveCommunication",
    "CommunicationOptions",
    "ValueContext",
    "ParameterServerStrategy",
    "ParameterServerCheckpoint",
    "partitioners",
    "coordinator",
    "TPUStrategy",
]


def __getattr__(name: str):
    """The preemption handler lives with checkpoints (``multidev.train``, a layer below ``distribute``):
    imported on first use under TensorFlow's name. Other names: an error saying what multidev has."""
    if name in ("PreemptionCheckpointHandler", "TerminationConfig"):
        from multidev.train import preemption

        return getattr(preemption, name)
    raise AttributeError(
        f"module 'multidev.distribute.experimental' has no attribute {name!r} (TensorFlow's "
        f"tf.distribute.experimental.{name} is not part of multidev); it has {sorted(__all__)}.")
