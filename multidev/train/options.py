"""``md.train.CheckpointOptions``: TensorFlow's options for ``Checkpoint.save/write/read/restore``.

multidev writes checkpoints synchronously in the calling process: ``experimental_io_device``
(which device does the I/O) and ``enable_async`` (TensorFlow then returns before the files are
written; a synchronous write gives the same files) change nothing. ``experimental_write_callbacks``
run after each ``save``/``write``, with the checkpoint's path when they take an argument, as in
TensorFlow. What multidev cannot honour raises ``NotImplementedError`` saying so, rather than
writing a checkpoint other than the one asked for.

Example:
    >>> options = md.train.CheckpointOptions(experimental_io_device="/job:localhost")
    >>> md.train.Checkpoint(v=md.Variable(1.0)).write("/tmp/md_opts/v", options=options)
    '/tmp/md_opts/v'
"""

from __future__ import annotations

import dataclasses
import inspect


@dataclasses.dataclass
class CheckpointOptions:
    """Options for saving and restoring checkpoints (TensorFlow's fields; see the module docstring).

    Example:
        >>> options = md.train.CheckpointOptions(experimental_write_callbacks=[print])
        >>> ckpt.save("/tmp/md_opts/ckpt", options=options)      # prints the path after writing
    """

    experimental_io_device: str | None = None
    experimental_enable_async_checkpoint: bool = False
    experimental_write_callbacks: list | None = None
    enable_async: bool = False
    experimental_skip_slot_variables: bool = False
    experimental_sharding_callback: object = None

    def __post_init__(self):
        if self.experimental_io_device is not None and not isinstance(self.experimental_io_device, str):
            raise TypeError(f"experimental_io_device must be a device string such as '/job:localhost' or None, "
                            f"got {self.experimental_io_device!r}.")
        if self.experimental_skip_slot_variables:
            raise NotImplementedError("CheckpointOptions(experimental_skip_slot_variables=True) is not supported by "
                                      "multidev: its checkpoints always hold the optimizer's slots. Leave it False, "
                                      "or checkpoint the model without its optimizer.")
        if self.experimental_sharding_callback is not None:
            raise NotImplementedError("CheckpointOptions(experimental_sharding_callback=...) is not supported by "
                                      "multidev: a checkpoint is one safetensors file.")
        if self.experimental_write_callbacks is not None and not all(
                callable(cb) for cb in self.experimental_write_callbacks):
            raise TypeError(f"experimental_write_callbacks must be a list of callables, got "
                            f"{self.experimental_write_callbacks!r}.")


def check(options) -> CheckpointOptions:
    """``options`` as CheckpointOptions (None: the defaults); TypeError for anything else."""
    if options is None:
        return CheckpointOptions()
    if not isinstance(options, CheckpointOptions):
        raise TypeError(f"options must be md.train.CheckpointOptions(...) or None, got {options!r} of type "
                        f"{type(options).__name__}.")
    return options


def after_write(options, save_path: str) -> None:
    """Run the write callbacks: with the path when the callback takes an argument (TensorFlow's rule)."""
    for callback in check(options).experimental_write_callbacks or ():
        if inspect.signature(callback).parameters:
            callback(save_path)
        else:
            callback()
