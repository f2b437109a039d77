"""``md.DeviceSpec``: TensorFlow's immutable device name, parsed, formatted and merged.

A full name reads ``/job:<job>/replica:<r>/task:<t>/device:<TYPE>:<index>``; every part is
optional, so ``/GPU:0``, ``gpu:0``, ``/cpu:0``, ``GPU:1`` and ``/device:GPU:*`` are all names.
Device types are upper-cased (``cpu`` -> ``CPU``). Nested ``md.device`` scopes merge specs
field by field with :meth:`DeviceSpec.make_merged_spec`.
"""

from __future__ import annotations

import re
from typing import Any

# Types accepted in the short-hand form ("gpu:0", "/CPU"). The "device:TYPE:N" form takes any type.
SHORT_HAND_TYPES = ("CPU", "GPU", "TPU")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # ASCII only; used with fullmatch (no trailing newline)
_JOB = re.compile(r"[A-Za-z0-9_.\-]+")
_FIELDS = ("job", "replica", "task", "device_type", "device_index")
_GRAMMAR_HINT = (
    "expected '/job:<name>/replica:<int>/task:<int>/device:<TYPE>:<int or *>' with every part "
    "optional, or a short-hand such as '/GPU:0', 'gpu:0', '/cpu:0', 'CPU'"
)


def _bad(spec: str, why: str) -> ValueError:
    return ValueError(f"Malformed device name {spec!r}: {why}; {_GRAMMAR_HINT}.")


def _parse_int(spec: str, field: str, text: str) -> int:
    if not (text.isascii() and text.isdigit()):  # str.isdigit alone takes '١' and '²'
        raise _bad(spec, f"{field} must be a non-negative integer (ASCII digits), got {text!r}")
    return int(text)


def _parse_type(spec: str, text: str) -> str | None:
    if text == "*":
        return None  # any device type, as in TensorFlow's '/device:*:0'
    if not _IDENT.fullmatch(text):
        raise _bad(spec, f"device type must be a name such as 'CPU' or 'GPU', got {text!r}")
    return text.upper()


def _parse_index(spec: str, text: str) -> int | None:
    return None if text == "*" else _parse_int(spec, "device index", text)


def _parse_part(spec: str, part: str, out: dict[str, Any]) -> None:
    """Parse one '/'-separated part of ``spec`` into ``out`` (field name -> value)."""
    pieces = part.split(":")
    head, n = pieces[0], len(pieces)
    names_type = (head.lower() == "device" and n == 3) or (head.upper() in SHORT_HAND_TYPES and n in (1, 2))
    if names_type and "device_type" in out:
        raise _bad(spec, f"more than one device type (a second one in {part!r})")
    if head == "job" and n == 2 and pieces[1]:
        if not _JOB.fullmatch(pieces[1]):
            raise _bad(spec, f"job name {pieces[1]!r} has characters outside [A-Za-z0-9_.-]")
        out["job"] = pieces[1]
    elif head == "replica" and n == 2:
        out["replica"] = _parse_int(spec, "replica", pieces[1])
    elif head == "task" and n == 2:
        out["task"] = _parse_int(spec, "task", pieces[1])
    elif head.lower() == "device" and n == 3:
        out["device_type"] = _parse_type(spec, pieces[1])
        out["device_index"] = _parse_index(spec, pieces[2])
    elif head.upper() in SHORT_HAND_TYPES and n in (1, 2):
        out["device_type"] = head.upper()
        out["device_index"] = _parse_index(spec, pieces[1]) if n == 2 else None
    else:
        raise _bad(spec, f"cannot parse the part {part!r}")


def _check_field(name: str, value: Any) -> Any:
    """Validate one constructor argument; ``None`` means 'unspecified'."""
    if value is None:
        return None
    if name == "job":
        if not isinstance(value, str) or not value:
            raise TypeError(f"DeviceSpec job must be a non-empty str or None, got {value!r}.")
        if not _JOB.fullmatch(value):
            raise ValueError(f"DeviceSpec job {value!r} has characters outside [A-Za-z0-9_.-] (it must read back "
                             "from the device name).")
        return value
    if name == "device_type":
        if not isinstance(value, str) or not _IDENT.fullmatch(value):
            raise ValueError(
                f"DeviceSpec device_type must be a name such as 'CPU' or 'GPU', got {value!r}."
            )
        return value.upper()
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"DeviceSpec {name} must be an int or None, got {value!r}.")
    if value < 0:
        raise ValueError(f"DeviceSpec {name} must be >= 0, got {value!r}.")
    return value


class DeviceSpec:
    """An immutable (possibly partial) device name, as TensorFlow's ``tf.DeviceSpec``.

    Example:
        >>> spec = md.DeviceSpec.from_string("/job:localhost/gpu:1")
        >>> spec.device_type, spec.device_index
        ('GPU', 1)
        >>> spec.to_string()
        '/job:localhost/device:GPU:1'
    """

    __slots__ = ("_job", "_replica", "_task", "_device_type", "_device_index", "_hash")

    def __init__(
        self,
        job: str | None = None,
        replica: int | None = None,
        task: int | None = None,
        device_type: str | None = None,
        device_index: int | None = None,
    ) -> None:
        values = [_check_field(n, v) for n, v in zip(_FIELDS, (job, replica, task, device_type, device_index))]
        for name, value in zip(_FIELDS, values):
            object.__setattr__(self, "_" + name, value)
        object.__setattr__(self, "_hash", hash(tuple(values)))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"DeviceSpec is immutable; use spec.replace({name}=...) to get a changed copy.")

    @classmethod
    def from_string(cls, spec: str) -> "DeviceSpec":
        """Parse a device name (full or short-hand) into a spec.

        Raises:
            TypeError: ``spec`` is not a string.
            ValueError: ``spec`` does not follow the device-name grammar (the message quotes it).
        """
        if not isinstance(spec, str):
            raise TypeError(f"A device name must be a str, got {type(spec).__name__} {spec!r}.")
        fields: dict[str, Any] = {}
        for part in spec.strip().split("/"):
            if part:
                _parse_part(spec, part, fields)
        return cls(**fields)

    def to_string(self) -> str:
        """Format as ``/job:j/replica:r/task:t/device:TYPE:i``, leaving out unset parts."""
        out = []
        if self._job is not None:
            out.append(f"/job:{self._job}")
        if self._replica is not None:
            out.append(f"/replica:{self._replica}")
        if self._task is not None:
            out.append(f"/task:{self._task}")
        if self._device_type is not None or self._device_index is not None:
            index = "*" if self._device_index is None else str(self._device_index)
            out.append(f"/device:{self._device_type or '*'}:{index}")  # any type: '/device:*:1', as TF parses
        return "".join(out)

    def make_merged_spec(self, dev: "DeviceSpec") -> "DeviceSpec":
        """Return a spec with ``dev``'s set fields overriding this spec's fields, one by one.

        As in TensorFlow every field merges on its own, so ``/GPU:1`` merged with ``/cpu``
        is ``/device:CPU:1``.
        """
        if not isinstance(dev, DeviceSpec):
            raise TypeError(f"make_merged_spec expects a DeviceSpec, got {dev!r}.")
        merged = {n: getattr(self, n) for n in _FIELDS}
        for name in _FIELDS:
            value = getattr(dev, name)
            if value is not None:
                merged[name] = value
        return DeviceSpec(**merged)

    def replace(self, **kwargs: Any) -> "DeviceSpec":
        """Return a copy with the given fields replaced (``spec.replace(device_index=1)``)."""
        unknown = sorted(set(kwargs) - set(_FIELDS))
        if unknown:
            raise TypeError(f"DeviceSpec.replace got unknown fields {unknown!r}; valid fields: {list(_FIELDS)}.")
        fields = {n: getattr(self, n) for n in _FIELDS}
        fields.update(kwargs)
        return DeviceSpec(**fields)

    @property
    def job(self) -> str | None:
        return self._job

    @property
    def replica(self) -> int | None:
        return self._replica

    @property
    def task(self) -> int | None:
        return self._task

    @property
    def device_type(self) -> str | None:
        return self._device_type

    @property
    def device_index(self) -> int | None:
        return self._device_index

    def _key(self) -> tuple:
        return (self._job, self._replica, self._task, self._device_type, self._device_index)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DeviceSpec) and self._key() == other._key()

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"<DeviceSpec(job={self._job!r}, replica={self._replica!r}, task={self._task!r}, device_type={self._device_type!r}, device_index={self._device_index!r})>"

    def __str__(self) -> str:
        return self.to_string()


__all__ = ["DeviceSpec", "SHORT_HAND_TYPES"]
