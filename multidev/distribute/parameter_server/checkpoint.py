"""Checkpoints of parameter-server training: every variable and the optimizer state on the ps tasks.

A checkpoint is a directory ``ckpt-<step>`` with ``variables.safetensors`` (one tensor per shard),
``optimizers.safetensors`` (optimizer slots) and ``checkpoint.json`` (step, variables' names,
shapes and layout, optimizer classes and hyperparameters), written last so a directory counts only
when complete. Nothing is pickled. Restoring needs the same program (variables created in the same
order), on any cluster with the same number of ps tasks.

Safety: a checkpoint directory is built under a temporary name and swapped in
(``_core.atomic_files``), so a kill never leaves a half-written ``ckpt-<step>``; the safetensors
files carry checksums, verified on restore. ``checkpoint.json`` names optimizer classes; only
``torch.optim``'s optimizers, multidev's and the ``custom_optimizers`` passed to the constructor are
restored, by name (a file never chooses code to run).

Example:
    ckpt = md.distribute.experimental.ParameterServerCheckpoint(strategy, "/tmp/ckpt")
    start = ckpt.restore() or 0          # after a relaunch: the last saved step
    ...
    ckpt.save(step)
"""

from __future__ import annotations

import inspect
import json
import os
import re
from typing import Any

import torch

from multidev._core import atomic_files, checked_safetensors
from multidev._core.errors import DataLossError, NotFoundError
from multidev.distribute.parameter_server.ps_service import OptimizerSpec

_DIR = re.compile(r"^ckpt-(\d+)$")
_OLD = re.compile(r"^(ckpt-\d+)\.old-")
_META = "checkpoint.json"
_FILES = ("variables.safetensors", "optimizers.safetensors")


def _json_value(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.item()
    if isinstance(value, tuple):
        return list(value)
    return value


def _split_state(ps: int, k: int, state: dict) -> tuple[dict, dict]:
    """An optimizer state_dict -> (tensors for safetensors, JSON-able rest)."""
    tensors, scalars = {}, {}
    for index, entry in state["state"].items():
        for slot, value in entry.items():
            if isinstance(value, torch.Tensor):
                tensors[f"ps{ps}/opt{k}/{index}/{slot}"] = value.detach().cpu().contiguous()
            else:
                scalars[f"{index}/{slot}"] = value
    groups = [{key: _json_value(v) for key, v in g.items()} for g in state["param_groups"]]
    return tensors, {"param_groups": groups, "scalars": scalars}


class ParameterServerCheckpoint:
    """Saves and restores a ParameterServerStrategy's variables and optimizer state (safetensors + JSON).

    Args:
        strategy: the ``ParameterServerStrategy``.
        directory: where the ``ckpt-<step>`` directories go.
        max_to_keep: how many checkpoints to keep (None: all).
        custom_optimizers: optimizer classes of your own (``torch.optim.Optimizer`` subclasses) that
            ``restore`` may rebuild, besides ``torch.optim``'s and multidev's.
        verify_checksum: check the files' SHA-256 on restore (False: faster, damage goes unnoticed).
    """

    def __init__(self, strategy: Any, directory: str, max_to_keep: int = 3, custom_optimizers=(),
                 verify_checksum: bool = True):
        if max_to_keep is not None and max_to_keep < 1:
            raise ValueError(f"max_to_keep must be >= 1 or None; got {max_to_keep!r}.")
        for cls in custom_optimizers:
            if not (inspect.isclass(cls) and issubclass(cls, torch.optim.Optimizer)):
                raise TypeError(f"custom_optimizers must be torch.optim.Optimizer subclasses; got {cls!r}.")
        self._extended = strategy.extended
        self.directory = os.fspath(directory)
        self.max_to_keep = max_to_keep
        self._custom = {_class_name(cls): cls for cls in custom_optimizers}
        self.verify_checksum = verify_checksum

    def _steps(self) -> list[int]:
        if not os.path.isdir(self.directory):
            return []
        for name in os.listdir(self.directory):   # a save killed between its two renames
            if (m := _OLD.match(name)) and _DIR.match(m.group(1)):
                atomic_files.recover_directory(os.path.join(self.directory, m.group(1)))
        steps = [int(m.group(1)) for name in os.listdir(self.directory) if (m := _DIR.match(name))
                 and os.path.exists(os.path.join(self.directory, name, _META))]
        return sorted(steps)

    @property
    def latest_checkpoint(self) -> str | None:
        """The newest complete checkpoint directory, or None."""
        steps = self._steps()
        return os.path.join(self.directory, f"ckpt-{steps[-1]}") if steps else None

    def save(self, step: int) -> str:
        """Write checkpoint ``ckpt-<step>`` (after ``coordinator.join()`` for a consistent state)."""
        self._extended.push_stale()
        path = os.path.join(self.directory, f"ckpt-{int(step)}")
        variables, optimizers, meta_opt = {}, {}, []
        for ps, (vars_, opts) in sorted(self._extended.client.export_state().items()):
            variables.update({f"v{vid}": t.contiguous() for vid, t in vars_.items()})
            for k, (key, state) in enumerate(opts):
                tensors, rest = _split_state(ps, k, state)
                optimizers.update(tensors)
                meta_opt.append({"ps": ps, "index": k, "module": key[0], "class": key[1],
                                 "ids": [list(ids) for ids in key[2]], **rest})
        specs = [{"vid": v._spec.vid, "name": v._spec.name, "shape": list(v._spec.shape),
                  "layout": [[s.ps, s.vid, s.start, s.end] for s in v._spec.layout]}
                 for v in self._extended.variables_list()]
        meta = {"step": int(step), "num_ps": self._extended.num_ps, "variables": specs, "optimizers": meta_opt}
        with atomic_files.atomic_directory(path) as tmp:
            for name, tensors in zip(_FILES, (variables, optimizers)):
                atomic_files.atomic_write(os.path.join(tmp, name), checked_safetensors.dumps(tensors))
            atomic_files.atomic_write_text(os.path.join(tmp, _META), json.dumps(meta))
        self._prune()
        return path

    def _prune(self) -> None:
        if self.max_to_keep is None:
            return
        for step in self._steps()[:-self.max_to_keep]:
            atomic_files.remove_tree(os.path.join(self.directory, f"ckpt-{step}"))

    def restore(self, path: str | None = None) -> int | None:
        """Load ``path`` (default: the latest) into the ps tasks and the local copies; returns its step,
        or None when there is no checkpoint yet."""
        path = path or self.latest_checkpoint
        if path is None:
            return None
        meta_path = os.path.join(path, _META)
        if not os.path.exists(meta_path):
            raise NotFoundError(f"No complete checkpoint at {path!r} (missing {_META}).")
        meta = _read_meta(meta_path)
        variables, optimizers = (self._load(os.path.join(path, name)) for name in _FILES)
        per_ps: dict[int, tuple[dict, list]] = {ps: ({}, []) for ps in range(self._extended.num_ps)}
        try:
            self._check_layout(meta, path)
            for spec in meta["variables"]:
                for ps, vid, _, _ in spec["layout"]:
                    per_ps[ps][0][vid] = variables[f"v{vid}"]
            entries = [(entry["ps"], _optimizer_entry(entry, optimizers, self._custom)) for entry in meta["optimizers"]]
        except (KeyError, TypeError, IndexError, AttributeError) as err:
            raise DataLossError(f"Checkpoint {path!r} is damaged: {type(err).__name__}: {err} in {_META} or its "
                                "tensors. Restore from another checkpoint.") from err
        for ps, entry in entries:
            per_ps[ps][1].append(entry)
        self._extended.client.import_state(per_ps)
        self._extended.pull_all()
        return int(meta["step"])

    def _load(self, file: str) -> dict:
        if not os.path.isfile(file):
            raise DataLossError(f"Checkpoint file {file!r} is missing. Restore from another checkpoint.")
        with open(file, "rb") as f:
            tensors, _ = checked_safetensors.loads(f.read(), file, self.verify_checksum)
        return tensors

    def _check_layout(self, meta: dict, path: str) -> None:
        if meta["num_ps"] != self._extended.num_ps:
            raise ValueError(f"Checkpoint {path!r} was written with {meta['num_ps']} ps tasks; this cluster has "
                             f"{self._extended.num_ps}. Relaunch with the same number of ps tasks.")
        mine = {v._spec.vid: v for v in self._extended.variables_list()}
        for spec in meta["variables"]:
            var = mine.get(spec["vid"])
            if var is None or list(var._spec.shape) != spec["shape"]:
                raise ValueError(
                    f"Checkpoint {path!r} has variable {spec['name']!r} (id {spec['vid']}, shape {spec['shape']}) "
                    "that this program did not create the same way: create the same variables in the same "
                    "order before restoring."
                )


def _read_meta(meta_path: str) -> dict:
    try:
        with open(meta_path, encoding="utf-8") as f:
            meta = json.load(f)
    except (OSError, ValueError) as err:
        raise DataLossError(f"Cannot read {meta_path!r} ({err}). Restore from another checkpoint.") from err
    missing = [k for k in ("step", "num_ps", "variables", "optimizers") if not isinstance(meta, dict) or k not in meta]
    if missing:
        raise DataLossError(f"{meta_path!r} lacks {missing}. Restore from another checkpoint.")
    return meta


def _class_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _optimizer_classes(custom: dict) -> dict[str, type]:
    """The optimizer classes a checkpoint may name: torch.optim's public ones, multidev's (those imported:
    the program creates its optimizers before restoring) and ``custom``. Nothing is imported by name."""
    allowed = {_class_name(c): c for c in vars(torch.optim).values()
               if inspect.isclass(c) and issubclass(c, torch.optim.Optimizer) and c is not torch.optim.Optimizer}
    todo = list(torch.optim.Optimizer.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.__module__.split(".")[0] == "multidev":
            allowed[_class_name(cls)] = cls
    return {**allowed, **custom}


def allowed_optimizer(module: Any, name: Any, custom: dict | None = None) -> type:
    """The optimizer class ``module.name`` if it is allowed (see module doc), else ValueError listing those allowed."""
    full = f"{module}.{name}"
    allowed = _optimizer_classes(custom or {})
    if full not in allowed:
        raise ValueError(f"Checkpoint names optimizer class {full!r}, which is not allowed to be restored. Allowed: "
                         f"{sorted(allowed)}. For an optimizer class of your own, pass "
                         "ParameterServerCheckpoint(..., custom_optimizers=[YourOptimizer]).")
    return allowed[full]


def _optimizer_entry(entry: dict, tensors: dict, custom: dict) -> tuple[OptimizerSpec, dict]:
    cls = allowed_optimizer(entry["module"], entry["class"], custom)
    live = iter(entry["param_groups"])  # the ps built groups only for ids it holds
    groups = [({k: v for k, v in next(live).items() if k != "params"} if ids else {}, ids) for ids in entry["ids"]]
    state: dict = {}
    prefix = f"ps{entry['ps']}/opt{entry['index']}/"
    for name, value in tensors.items():
        if name.startswith(prefix):
            index, slot = name[len(prefix):].split("/", 1)
            state.setdefault(int(index), {})[slot] = value
    for name, value in entry["scalars"].items():
        index, slot = name.split("/", 1)
        state.setdefault(int(index), {})[slot] = value
    spec = OptimizerSpec(cls, {}, [(hyper, ids) for hyper, ids in groups])
    return spec, {"state": state, "param_groups": entry["param_groups"]}


__all__ = ["ParameterServerCheckpoint"]
