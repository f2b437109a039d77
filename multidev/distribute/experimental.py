"""``md.distribute.experimental``: TensorFlow's experimental strategy names."""

from multidev.distribute.central_storage_strategy import CentralStorageStrategy
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
