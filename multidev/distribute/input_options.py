"""``InputOptions``, ``InputReplicationMode`` and ``InputContext``: how strategies feed replicas."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class InputReplicationMode(enum.Enum):
    """Whether ``distribute_datasets_from_function`` builds one dataset per worker or per replica."""

    PER_WORKER = "PER_WORKER"
    PER_REPLICA = "PER_REPLICA"


@dataclass(frozen=True)
class InputOptions:
    """Options for ``experimental_distribute_dataset`` / ``distribute_datasets_from_function``.

    Args:
        experimental_fetch_to_device: copy each replica's batch to its device ahead of time
            (default True, as TensorFlow; ``None`` means True).
        experimental_replication_mode: PER_WORKER (default) or PER_REPLICA datasets.
        experimental_place_dataset_on_device: run the dataset on the replica device (PER_REPLICA only).
        experimental_per_replica_buffer_size: batches prefetched per replica device.
    """

    experimental_fetch_to_device: bool | None = True
    experimental_replication_mode: InputReplicationMode = InputReplicationMode.PER_WORKER
    experimental_place_dataset_on_device: bool = False
    experimental_per_replica_buffer_size: int = 1

    def __post_init__(self) -> None:
        if self.experimental_fetch_to_device is None:   # TensorFlow: None stands for the default, True
            object.__setattr__(self, "experimental_fetch_to_device", True)
        if not isinstance(self.experimental_replication_mode, InputReplicationMode):
            raise ValueError(
                f"experimental_replication_mode must be a md.distribute.InputReplicationMode "
                f"(PER_WORKER or PER_REPLICA), got {self.experimental_replication_mode!r}."
            )
        size = self.experimental_per_replica_buffer_size
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"experimental_per_replica_buffer_size must be a positive integer, got {size!r}.")


def check_for_datasets_from_function(options: InputOptions) -> None:
    """TensorFlow's checks of ``experimental_place_dataset_on_device`` for
    ``distribute_datasets_from_function``, in its order. They live here, not in ``InputOptions``:
    TensorFlow builds any combination and ``experimental_distribute_dataset`` ignores the flag.

    Raises:
        ValueError: placement on the device without PER_REPLICA mode, or with fetch_to_device.
    """
    if not options.experimental_place_dataset_on_device:
        return
    if options.experimental_replication_mode is not InputReplicationMode.PER_REPLICA:
        raise ValueError(
            "When `experimental_place_dataset_on_device` is set for dataset placement, you must also specify "
            "`PER_REPLICA` for the replication mode: pass experimental_replication_mode="
            "md.distribute.InputReplicationMode.PER_REPLICA (and experimental_fetch_to_device=False)."
        )
    if options.experimental_fetch_to_device:
        raise ValueError(
            "`experimental_place_dataset_on_device` can not be set to True when experimental_fetch_to_device is "
            "True and replication mode is set to `PER_REPLICA`: a dataset placed on the device is already there. "
            "Pass experimental_fetch_to_device=False with it."
        )


class InputContext:
    """What a dataset function learns about its input pipeline (``tf.distribute.InputContext``).

    Example:
        >>> def dataset_fn(ctx):
        ...     batch = ctx.get_per_replica_batch_size(64)
        ...     return md.data.Dataset.range(1000).shard(ctx.num_input_pipelines, ctx.input_pipeline_id).batch(batch)
    """

    def __init__(self, num_input_pipelines: int = 1, input_pipeline_id: int = 0, num_replicas_in_sync: int = 1):
        for name, value, low in (("num_input_pipelines", num_input_pipelines, 1),
                                 ("input_pipeline_id", input_pipeline_id, 0),
                                 ("num_replicas_in_sync", num_replicas_in_sync, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"InputContext: {name} must be an integer >= {low}, got {value!r}.")
        if input_pipeline_id >= num_input_pipelines:
            raise ValueError(
                f"InputContext: input_pipeline_id {input_pipeline_id} is out of range for "
                f"{num_input_pipelines} input pipelines (valid: 0..{num_input_pipelines - 1})."
            )
        self._num_input_pipelines = num_input_pipelines
        self._input_pipeline_id = input_pipeline_id
        self._num_replicas_in_sync = num_replicas_in_sync

    @property
    def num_input_pipelines(self) -> int:
        return self._num_input_pipelines

    @property
    def input_pipeline_id(self) -> int:
        return self._input_pipeline_id

    @property
    def num_replicas_in_sync(self) -> int:
        return self._num_replicas_in_sync

    def get_per_replica_batch_size(self, global_batch_size: int) -> int:
        """``global_batch_size // num_replicas_in_sync``; raises if it does not divide evenly."""
        if isinstance(global_batch_size, bool) or not isinstance(global_batch_size, int) or global_batch_size < 0:
            raise ValueError(f"global_batch_size must be a non-negative integer, got {global_batch_size!r}.")
        if global_batch_size % self._num_replicas_in_sync:
            raise ValueError(
                f"The `global_batch_size` {global_batch_size} is not divisible by `num_replicas_in_sync` "
                f"{self._num_replicas_in_sync}. Choose a multiple of {self._num_replicas_in_sync}."
            )
        return global_batch_size // self._num_replicas_in_sync

    def __str__(self) -> str:
        """TensorFlow's text, with multidev's prefix: ``md.distribute.InputContext(input pipeline id 1, total: 2)``."""
        return f"md.distribute.InputContext(input pipeline id {self._input_pipeline_id}, total: {self._num_input_pipelines})"

    def __repr__(self) -> str:
        return (f"InputContext(num_input_pipelines={self._num_input_pipelines}, "
                f"input_pipeline_id={self._input_pipeline_id}, num_replicas_in_sync={self._num_replicas_in_sync})")
