"""``md.train``: TensorFlow's ``tf.train`` names: object-based checkpoints and ``ClusterSpec``.

Example:
    ckpt = md.train.Checkpoint(model=model, optimizer=optimizer)
    manager = md.train.CheckpointManager(ckpt, "/tmp/ckpts", max_to_keep=3)
    manager.restore_or_initialize()
    ...
    manager.save()
"""

from multidev.distribute.cluster_spec import ClusterSpec
from multidev.train.checkpoint import Checkpoint
from multidev.train import keras_weights  # noqa: F401  (model.save_weights("ckpt"): registers the format)
from multidev.train.manager import CheckpointManager
from multidev.train.options import CheckpointOptions
from multidev.train.reader import CheckpointReader, list_variables, load_checkpoint, load_variable
from multidev.train.state_file import CheckpointState, get_checkpoint_state, latest_checkpoint
from multidev.train.status import CheckpointLoadStatus, InitializationOnlyStatus

__all__ = ["ClusterSpec", "Checkpoint", "CheckpointManager", "CheckpointOptions", "CheckpointState", "get_checkpoint_state",
           "latest_checkpoint", "CheckpointLoadStatus", "InitializationOnlyStatus", "CheckpointReader",
           "list_variables", "load_checkpoint", "load_variable"]


def __getattr__(name: str):
    """``multidev.train.X`` that multidev lacks: an AttributeError saying what to use instead."""
    from multidev._core.missing import missing_attribute

    raise missing_attribute("multidev.train", name, f"tf.train.{name}")
