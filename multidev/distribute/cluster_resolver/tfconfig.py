"""``TFConfigClusterResolver``: the cluster from the ``TF_CONFIG`` environment variable.

``TF_CONFIG`` is JSON: ``{"cluster": {"chief": [...], "worker": ["host:port", ...], "ps": [...]},
"task": {"type": "worker", "index": 0}}``, optionally with ``rpc_layer``, ``session_master`` and
``environment``. It is parsed and checked when the resolver is created, so a malformed value fails
with a ValueError before any network activity.
"""

from __future__ import annotations

import dataclasses
import json
import os

from multidev.distribute.cluster_resolver.base import ClusterResolver, format_master_url
from multidev.distribute.cluster_resolver.validation import check_task_index, validate_cluster, validate_task
from multidev.distribute.cluster_spec import ClusterSpec

TF_CONFIG_ENV = "TF_CONFIG"
_KNOWN_KEYS = ("cluster", "task", "rpc_layer", "session_master", "environment")


@dataclasses.dataclass(frozen=True)
class TFConfig:
    """The parsed, validated content of a ``TF_CONFIG`` value."""

    cluster: ClusterSpec
    task_type: str | None = None
    task_id: int | None = None
    rpc_layer: str | None = None
    session_master: str | None = None
    environment: str | None = None


def _bounded_int(digits: str) -> int:
    """JSON integers of TF_CONFIG (task indices): no more digits than an int64 has."""
    if len(digits.lstrip("-")) > 18:
        raise ValueError(f"an integer of {len(digits.lstrip('-'))} digits ({digits[:12]}...) where a task index "
                         f"(at most 18 digits) was expected")
    return int(digits)


def _load_json(text: str) -> dict:
    try:
        config = json.loads(text, parse_int=_bounded_int)
    except json.JSONDecodeError as err:
        raise ValueError(
            f"TF_CONFIG is not valid JSON ({err.msg} at line {err.lineno}, column {err.colno}): {text!r}. "
            'Expected e.g. {"cluster": {"worker": ["localhost:12345"]}, "task": {"type": "worker", "index": 0}}.'
        ) from None
    except ValueError as err:  # e.g. an integer of more than 4300 digits
        raise ValueError(f"TF_CONFIG could not be read as JSON ({err}): {text[:200]!r}.") from None
    except RecursionError:
        raise ValueError(
            f"TF_CONFIG nests too deeply to be a cluster description: {text[:80]!r}... "
            'Expected e.g. {"cluster": {"worker": ["localhost:12345"]}, "task": {"type": "worker", "index": 0}}.'
        ) from None
    if not isinstance(config, dict):
        raise ValueError(f"TF_CONFIG must be a JSON object with 'cluster' and 'task'; got {config!r}.")
    return config


def _parse_cluster(config: dict) -> ClusterSpec:
    cluster = config.get("cluster", {})
    if not isinstance(cluster, dict):
        raise ValueError(f"TF_CONFIG['cluster'] must be an object {{role: ['host:port', ...]}}; got {cluster!r}.")
    try:
        spec = ClusterSpec(cluster)
    except TypeError as err:
        raise ValueError(f"Malformed TF_CONFIG['cluster']: {err}") from None
    validate_cluster(spec)
    return spec


def _parse_task(config: dict, spec: ClusterSpec) -> tuple[str | None, int | None]:
    if "task" not in config:
        if spec:
            raise ValueError(
                f"TF_CONFIG has a cluster with jobs {spec.jobs} but no 'task': add "
                "'task': {'type': <role>, 'index': <int>} naming this process."
            )
        return None, None
    task = config["task"]
    if not isinstance(task, dict):
        raise ValueError(f"TF_CONFIG['task'] must be an object {{'type': ..., 'index': ...}}; got {task!r}.")
    if not spec:
        raise ValueError(f"TF_CONFIG names a task {task!r} but has no 'cluster'; add the cluster's addresses.")
    if "type" not in task or "index" not in task:
        raise ValueError(f"TF_CONFIG['task'] needs both 'type' and 'index'; got {task!r}.")
    return validate_task(spec, task["type"], task["index"])


def _optional_str(config: dict, key: str) -> str | None:
    value = config.get(key)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"TF_CONFIG[{key!r}] must be a string; got {value!r}.")
    return value


def parse_tf_config(text: str | None) -> TFConfig:
    """Parse and validate a ``TF_CONFIG`` value; empty or None means no cluster (a single process).

    Example:
        >>> cfg = parse_tf_config('{"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 1}}')
        >>> cfg.task_type, cfg.task_id, cfg.cluster.num_tasks("worker")
        ('worker', 1, 2)
    """
    if text is None or not text.strip():
        return TFConfig(cluster=ClusterSpec({}))
    config = _load_json(text)
    spec = _parse_cluster(config)
    task_type, task_id = _parse_task(config, spec)
    return TFConfig(
        cluster=spec,
        task_type=task_type,
        task_id=task_id,
        rpc_layer=_optional_str(config, "rpc_layer"),
        session_master=_optional_str(config, "session_master"),
        environment=_optional_str(config, "environment"),
    )


class TFConfigClusterResolver(ClusterResolver):
    """Cluster resolver reading ``TF_CONFIG`` (TensorFlow's default for multi-worker strategies).

    ``task_type``, ``task_id``, ``rpc_layer`` and ``environment`` override the values of
    ``TF_CONFIG``. The variable is read once, here.

    Example:
        >>> os.environ["TF_CONFIG"] = json.dumps({"cluster": {"worker": ["localhost:12345", "localhost:23456"]},
        ...                                       "task": {"type": "worker", "index": 0}})
        >>> resolver = TFConfigClusterResolver()
        >>> resolver.task_type, resolver.task_id, resolver.master()
        ('worker', 0, 'localhost:12345')
    """

    def __init__(self, task_type: str | None = None, task_id: int | None = None, rpc_layer: str | None = None,
                 environment: str | None = None):
        self._config = parse_tf_config(os.environ.get(TF_CONFIG_ENV))
        self._task_type = task_type
        self._task_id = check_task_index(task_id)
        self._rpc_layer = rpc_layer
        self._environment = environment
        if (task_type is not None or task_id is not None) and self._config.cluster:
            validate_task(self._config.cluster, self.task_type, self.task_id)

    @property
    def task_type(self) -> str | None:
        return self._config.task_type if self._task_type is None else str(self._task_type)

    @task_type.setter
    def task_type(self, value: str | None) -> None:
        self._task_type = value

    @property
    def task_id(self) -> int | None:
        return self._config.task_id if self._task_id is None else self._task_id

    @task_id.setter
    def task_id(self, value: int | None) -> None:
        self._task_id = check_task_index(value)

    @property
    def rpc_layer(self) -> str | None:
        return self._config.rpc_layer if self._rpc_layer is None else self._rpc_layer

    @rpc_layer.setter
    def rpc_layer(self, value: str | None) -> None:
        self._rpc_layer = value

    @property
    def environment(self) -> str:
        if self._environment is not None:
            return self._environment
        return self._config.environment or ""

    def cluster_spec(self) -> ClusterSpec:
        """The cluster of ``TF_CONFIG`` (empty when the variable is unset)."""
        return ClusterSpec(self._config.cluster)

    def master(self, task_type: str | None = None, task_id: int | None = None, rpc_layer: str | None = None) -> str:
        """``session_master`` if set; ``""`` for a one-task cluster; else this (or the given) task's address."""
        if self._config.session_master is not None:
            return self._config.session_master
        spec = self._config.cluster
        if not spec or (len(spec.jobs) == 1 and spec.num_tasks(spec.jobs[0]) == 1):
            return ""
        task_type = self.task_type if task_type is None else task_type
        task_id = self.task_id if task_id is None else task_id
        return format_master_url(spec.task_address(task_type, task_id), rpc_layer or self.rpc_layer)


__all__ = ["TF_CONFIG_ENV", "TFConfig", "parse_tf_config", "TFConfigClusterResolver"]
