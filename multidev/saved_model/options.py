"""``md.saved_model.SaveOptions`` / ``LoadOptions``: TensorFlow's option objects for SavedModels.

The "Save and load a model using a distribution strategy" tutorial saves and loads "from a local
device" with ``SaveOptions(experimental_io_device='/job:localhost')``: under a multi-worker
TensorFlow the files go through that device. multidev reads and writes a SavedModel in the calling
process, on its own filesystem, which is what ``'/job:localhost'`` asks for; so the options are
accepted, checked and recorded, and change nothing. A value TensorFlow rejects is rejected too.

Example:
    >>> options = md.saved_model.SaveOptions(experimental_io_device="/job:localhost")
    >>> md.saved_model.save(model, "/tmp/export", options=options)
    >>> md.saved_model.load("/tmp/export", options=md.saved_model.LoadOptions(experimental_io_device="/job:localhost"))
"""

from __future__ import annotations

import dataclasses

#: TensorFlow's ``tf.saved_model.experimental.VariablePolicy`` values.
VARIABLE_POLICIES = (None, "none", "save_variable_devices", "expand_distributed_variables")


def _check_io_device(value) -> None:
    if value is not None and not isinstance(value, str):
        raise TypeError(f"experimental_io_device must be a device string such as '/job:localhost' or None, got "
                        f"{value!r} of type {type(value).__name__}.")


def _check_policy(value) -> None:
    name = getattr(value, "value", value)      # an enum member or its string
    if name not in VARIABLE_POLICIES:
        raise ValueError(f"Received invalid VariablePolicy value: {value!r}. Valid values: "
                         f"{list(VARIABLE_POLICIES)}.")


@dataclasses.dataclass
class SaveOptions:
    """Options for ``md.saved_model.save`` (TensorFlow's fields; see the module docstring).

    Example:
        >>> md.saved_model.save(model, "/tmp/export", options=md.saved_model.SaveOptions(
        ...     experimental_io_device="/job:localhost"))
    """

    namespace_whitelist: list | None = None
    save_debug_info: bool = False
    function_aliases: dict | None = None
    experimental_debug_stripper: bool = False
    experimental_io_device: str | None = None
    experimental_variable_policy: str | None = None
    experimental_custom_gradients: bool = True
    experimental_image_format: bool = False
    experimental_skip_saver: bool = False
    experimental_sharding_callback: object = None
    extra_tags: list | None = None

    def __post_init__(self):
        _check_io_device(self.experimental_io_device)
        _check_policy(self.experimental_variable_policy)


@dataclasses.dataclass
class LoadOptions:
    """Options for ``md.saved_model.load`` (TensorFlow's fields; see the module docstring).

    Example:
        >>> md.saved_model.load("/tmp/export", options=md.saved_model.LoadOptions(
        ...     experimental_io_device="/job:localhost"))
    """

    allow_partial_checkpoint: bool = False
    experimental_io_device: str | None = None
    experimental_skip_checkpoint: bool = False
    experimental_variable_policy: str | None = None
    experimental_load_function_aliases: bool = False

    def __post_init__(self):
        _check_io_device(self.experimental_io_device)
        _check_policy(self.experimental_variable_policy)


def check(options, expected: type, where: str) -> None:
    """``options`` is None or an ``expected`` instance; TypeError naming the right class otherwise."""
    if options is not None and not isinstance(options, expected):
        raise TypeError(f"{where} takes options=md.saved_model.{expected.__name__}(...) or None, got {options!r} of "
                        f"type {type(options).__name__}.")
