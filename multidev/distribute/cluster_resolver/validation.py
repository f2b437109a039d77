"""The rules a multi-worker cluster must follow, checked before any network activity.

TensorFlow's rules: roles are ``chief``, ``worker``, ``ps`` and ``evaluator``; at most one chief
and one evaluator; the task named in ``TF_CONFIG`` must exist. multidev adds: every address is a
parsable ``host:port`` and no two tasks share one (two processes cannot listen on one port).
"""

from __future__ import annotations

import ipaddress
import re
import socket

from multidev.distribute.cluster_spec import ClusterSpec

VALID_ROLES = ("chief", "worker", "ps", "evaluator")
_SINGLE_TASK_ROLES = ("chief", "evaluator")


_HOST_NAME = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.\-]*[A-Za-z0-9_.])?")


def parse_address(address: object, where: str = "address") -> tuple[str, int]:
    """``"host:port"`` or ``"[v6]:port"`` -> ``(host, port)``; ValueError naming ``where`` otherwise.

    Hosts are ASCII names (``[A-Za-z0-9._-]``) or IP addresses; ports ASCII digits in 1..65535.
    Whitespace anywhere is refused (a TF_CONFIG built by string pasting, not a host).

    Example:
        >>> parse_address("10.0.0.1:2222")
        ('10.0.0.1', 2222)
    """
    hint = "expected 'host:port' such as 'localhost:12345' or '[::1]:12345'"
    if not isinstance(address, str) or not address.strip():
        raise ValueError(f"Unparsable {where} {address!r}: {hint}.")
    text = address
    if "://" in text:
        raise ValueError(f"Unparsable {where} {address!r}: {hint}, without a protocol prefix.")
    if any(c.isspace() or not c.isprintable() for c in text):
        raise ValueError(f"Unparsable {where} {address!r}: {hint}; it contains whitespace or control characters.")
    if text.startswith("["):
        host, sep, port_text = text[1:].partition("]:")
        if sep and not _is_ipv6(host):
            raise ValueError(f"Unparsable {where} {address!r}: {host!r} in brackets is not an IPv6 address.")
    else:
        host, sep, port_text = text.rpartition(":")
        if ":" in host:
            raise ValueError(f"Unparsable {where} {address!r}: {hint} (IPv6 hosts need brackets).")
        if host and not _HOST_NAME.fullmatch(host):
            raise ValueError(
                f"Unparsable {where} {address!r}: host {host!r} is not a host name ([A-Za-z0-9._-], ASCII; "
                "write internationalized names in their xn-- form) nor an IP address."
            )
    if not sep or not host or not (port_text.isascii() and port_text.isdigit()):
        raise ValueError(f"Unparsable {where} {address!r}: {hint} (the port must be ASCII digits).")
    port = int(port_text)
    if not 0 < port < 65536:
        raise ValueError(f"Unparsable {where} {address!r}: port {port} is outside 1..65535.")
    return host, port


def _is_ipv6(text: str) -> bool:
    try:
        return ipaddress.ip_address(text).version == 6
    except ValueError:
        return False


def same_host_key(host: str) -> str:
    """A host as compared for duplicates, without DNS: ``localhost`` = ``127.0.0.1`` = ``127.1``.

    Example:
        >>> same_host_key("localhost") == same_host_key("127.1") == same_host_key("127.0.0.1")
        True
    """
    name = host.strip("[]").lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return "127.0.0.1"
    try:
        return str(ipaddress.ip_address(name.split("%", 1)[0]))
    except ValueError:
        pass
    try:
        return socket.inet_ntoa(socket.inet_aton(name))  # IPv4 short forms (127.1, 0x7f.1): no DNS
    except OSError:
        return name


def validate_cluster(spec: ClusterSpec) -> None:
    """Check roles, task counts, addresses and duplicates of a multi-worker cluster."""
    for job in spec.jobs:
        if job not in VALID_ROLES:
            raise ValueError(
                f"Unknown role {job!r} in the cluster: valid roles are {list(VALID_ROLES)}. "
                "Rename the job in TF_CONFIG['cluster']."
            )
        if job in _SINGLE_TASK_ROLES and spec.num_tasks(job) > 1:
            raise ValueError(
                f"The cluster has {spec.num_tasks(job)} {job!r} tasks; at most one is allowed. "
                "Use 'worker' for the other tasks."
            )
    seen: dict[tuple[str, int], str] = {}
    for job in spec.jobs:
        for index in spec.task_indices(job):
            address = spec.task_address(job, index)
            host, port = parse_address(address, f"address of task {job}:{index}")
            key = (same_host_key(host), port)
            if key in seen:
                raise ValueError(
                    f"Duplicate address {address!r}: used by {seen[key]} and {job}:{index}. "
                    "Every task needs its own host:port."
                )
            seen[key] = f"{job}:{index}"


def validate_task(spec: ClusterSpec, task_type: object, task_id: object) -> tuple[str, int]:
    """Check that ``(task_type, task_id)`` names a task of ``spec``; returns them normalized."""
    if task_type is None or task_id is None:
        raise ValueError(
            f"The task is incomplete (type={task_type!r}, index={task_id!r}): a cluster with "
            f"jobs {spec.jobs} needs 'task': {{'type': <role>, 'index': <int>}} in TF_CONFIG."
        )
    if not isinstance(task_type, str) or task_type not in VALID_ROLES:
        raise ValueError(f"Unknown task type {task_type!r}: valid roles are {list(VALID_ROLES)}.")
    index = _task_index(task_id)
    if task_type not in spec.jobs:
        if task_type == "evaluator" and index == 0:
            return task_type, index  # TensorFlow: the evaluator may sit outside the cluster
        raise ValueError(f"Task type {task_type!r} is not a job of the cluster; jobs: {spec.jobs}.")
    if index not in spec.task_indices(task_type):
        raise ValueError(
            f"Task index {_shown(task_id)} is out of range for job {task_type!r}, which has "
            f"{spec.num_tasks(task_type)} task(s) with indices {spec.task_indices(task_type)}."
        )
    return task_type, index


_MAX_INDEX_DIGITS = 18   # an index that fits in int64; longer ones are typos (and Python refuses 4300+ digits)


def _shown(task_id: object) -> str:
    """``task_id!r``, except that an integer too long to print is described by its length."""
    if isinstance(task_id, int) and task_id.bit_length() > 64:
        return f"<an integer of about {int(task_id.bit_length() * 0.30103) + 1} digits>"
    if isinstance(task_id, str) and len(task_id) > 40:
        return f"{task_id[:20]!r}... ({len(task_id)} characters)"
    return repr(task_id)


def _task_index(task_id: object) -> int:
    bad = ValueError(f"Task index {_shown(task_id)} must be a non-negative int (at most {_MAX_INDEX_DIGITS} digits).")
    if isinstance(task_id, bool):
        raise bad
    if isinstance(task_id, str) and task_id.isascii() and task_id.strip().isdigit():
        if len(task_id.strip()) > _MAX_INDEX_DIGITS:
            raise bad
        return int(task_id)
    if isinstance(task_id, int) and 0 <= task_id < 10**_MAX_INDEX_DIGITS:
        return task_id
    raise bad


def check_task_index(task_id: object) -> int | None:
    """A task-index override (``task_id=``) as an int; None stays None; ValueError otherwise."""
    return None if task_id is None else _task_index(task_id)


__all__ = ["VALID_ROLES", "parse_address", "same_host_key", "validate_cluster", "validate_task", "check_task_index"]
