"""``md.train.Checkpoint``: TensorFlow's object-based checkpoint over models, optimizers, variables.

``save(prefix)`` writes ``prefix-<n>`` (``n`` counts saves: ``save_counter``) and records it in
the directory's ``checkpoint`` index; ``write(prefix)`` writes exactly ``prefix``; ``restore``
and ``read`` load one back and return a status object. The format (``files``) is safetensors
plus a JSON object graph, one canonical copy per variable, so a checkpoint written under one
strategy restores under another, under none, or with another number of workers. Under a
multi-worker strategy every worker must call ``save``/``write`` (reading a sync-on-read variable is a
collective); only the chief's files are kept, the others write to a temporary directory and delete it.

Example:
    ckpt = md.train.Checkpoint(model=model, optimizer=optimizer, step=md.Variable(0))
    path = ckpt.save("/tmp/training_checkpoints/ckpt")      # '/tmp/training_checkpoints/ckpt-1'
    ckpt.restore(md.train.latest_checkpoint("/tmp/training_checkpoints")).assert_consumed()
"""

from __future__ import annotations

import contextlib
import os
import shutil

import torch

from multidev._core.errors import NotFoundError
from multidev.distribute.context_api import get_strategy
from multidev._core import write_errors
from multidev.train import containers, files, restorer, saver, state_file
from multidev.train import options as ckpt_options
from multidev.train import trackables as T
from multidev.train.status import CheckpointLoadStatus, InitializationOnlyStatus
from multidev.values.variables import DistributedVariable, Variable


class Checkpoint:
    """Groups trackable objects (keyword arguments; more may be assigned as attributes later).

    Args:
        root: the object graph's root, as in TensorFlow: its own state is saved at the top (a
            model's weights, a compiled model's ``optimizer``) and the keyword arguments are
            attached to it, so ``Checkpoint(model).read(prefix)`` reads what ``model.save_weights(prefix)``
            wrote. Without it, the Checkpoint itself is the root.
        **kwargs: name -> trackable (model, layer, ``torch.nn.Module``, md.keras or torch.optim
            optimizer, ``md.Variable``, md.data iterator, nested ``Checkpoint``).

    Raises:
        ValueError: a keyword's value cannot be tracked (the message names the keyword).

    ``options`` arguments (``md.train.CheckpointOptions``) are checked; files are written by the
    calling process, on its own filesystem, and the write callbacks run after ``save``/``write``.

    Example:
        >>> ckpt = md.train.Checkpoint(step=md.Variable(1))
        >>> prefix = ckpt.write("/tmp/md_ckpt_doc/step")
        >>> ckpt.step.assign(5); _ = ckpt.read(prefix); int(ckpt.step)
        1
    """

    def __init__(self, root=None, **kwargs):
        object.__setattr__(self, "_children", {})
        object.__setattr__(self, "_deferred_children", {})
        object.__setattr__(self, "_save_counter", None)
        object.__setattr__(self, "_root_object", None)
        if root is not None:
            T.check_trackable("root", root)
            object.__setattr__(self, "_root_object", root)
        for name, value in kwargs.items():
            setattr(self, name, value)

    # ----- tracking -------------------------------------------------------------------------------
    def __setattr__(self, name, value):
        if name.startswith("_"):
            object.__setattr__(self, name, value)
            return
        if name == "save_counter":
            raise AttributeError("save_counter is managed by the Checkpoint (it counts save() calls).")
        value = containers.wrap(value)
        T.check_trackable(name, value)
        self._children[name] = value
        object.__setattr__(self, name, value)
        pending = self._deferred_children.pop(name, None)
        if pending is not None:
            pending(value)       # restore a saved value that waited for this attribute

    def __delattr__(self, name):
        self._children.pop(name, None)
        object.__delattr__(self, name)

    def _trackable_children(self) -> dict:
        children = dict(self._children)
        if self._save_counter is not None:
            children["save_counter"] = self._save_counter
        return children

    def _defer_child(self, name: str, restore_fn) -> None:
        self._deferred_children[name] = restore_fn

    @property
    def save_counter(self) -> Variable:
        """How many times ``save`` ran (restored with the checkpoint); created on first use."""
        self._maybe_create_save_counter()
        return self._save_counter

    def _maybe_create_save_counter(self) -> None:
        if self._save_counter is None:
            counter = Variable(torch.tensor(0, dtype=torch.int64), trainable=False, name="save_counter")
            object.__setattr__(self, "_save_counter", counter)
            pending = self._deferred_children.pop("save_counter", None)
            if pending is not None:
                pending(counter)

    # ----- writing --------------------------------------------------------------------------------
    def write(self, file_prefix, options=None) -> str:
        """Write a checkpoint at exactly ``file_prefix``; returns it. No numbering, no ``checkpoint`` index."""
        ckpt_options.check(options)
        path = self._write_files(file_prefix)
        workers_meet(self)
        ckpt_options.after_write(options, path)
        return path

    def _write_files(self, file_prefix) -> str:
        file_prefix = _prefix(file_prefix)
        objects, tensors = saver.collect(self)
        target, temp_dir = _write_target(file_prefix, self)
        with write_errors.writing(file_prefix):
            files.write(target, {"objects": objects}, tensors)
        if temp_dir is not None:
            shutil.rmtree(temp_dir, ignore_errors=True)
        return file_prefix

    def save(self, file_prefix, options=None) -> str:
        """Write ``<file_prefix>-<n>`` (``n`` = ``save_counter`` after incrementing) and record it as the
        latest checkpoint of its directory; returns the path."""
        ckpt_options.check(options)
        file_prefix = _prefix(file_prefix)
        with counted_save(self.save_counter):
            path = self._write_files(f"{file_prefix}-{int(self.save_counter)}")
            if _is_chief(self):
                with write_errors.writing(file_prefix):
                    state_file.update_checkpoint_state(os.path.dirname(file_prefix) or ".", path, [path])
        workers_meet(self)
        ckpt_options.after_write(options, path)
        return path

    # ----- reading --------------------------------------------------------------------------------
    def read(self, save_path, options=None) -> CheckpointLoadStatus:
        """Restore a checkpoint written by ``write`` (``save_counter`` is not created or expected)."""
        ckpt_options.check(options)
        save_path = _resolve(save_path)
        graph, tensors = files.read(save_path)
        status = CheckpointLoadStatus(save_path, tensors.keys(), [])
        restorer.restore(self, graph["objects"], tensors, status)
        return status

    def restore(self, save_path, options=None):
        """Restore a checkpoint written by ``save`` (``save_counter`` included); ``None`` restores
        nothing. Values for objects created later are restored when they are created."""
        ckpt_options.check(options)
        if save_path is None:
            return InitializationOnlyStatus()
        self._maybe_create_save_counter()
        return self.read(save_path, options)

    @property
    def root(self):
        """The graph's root: the ``root`` argument, else this Checkpoint."""
        return self if self._root_object is None else self._root_object

    def __repr__(self) -> str:
        names = ([] if self._root_object is None else [f"root={type(self._root_object).__name__}"]) + list(self._children)
        return f"Checkpoint({', '.join(names)})"


@contextlib.contextmanager
def counted_save(counter: Variable):
    """``counter`` + 1 while a save writes, back to its value if the save fails (a failed save is no save)."""
    counter.assign_add(1)
    try:
        yield
    except BaseException:
        counter.assign_sub(1)
        raise


def _prefix(file_prefix) -> str:
    if isinstance(file_prefix, (bytes, bytearray)):
        file_prefix = file_prefix.decode()
    if not isinstance(file_prefix, (str, os.PathLike)):
        raise TypeError(f"A checkpoint path must be a str or os.PathLike, got {file_prefix!r} of type "
                        f"{type(file_prefix).__name__}.")
    if not os.fspath(file_prefix):
        raise ValueError("A checkpoint path must not be empty: pass a prefix such as './ckpts/ckpt'.")
    return os.fspath(file_prefix)


def _resolve(save_path) -> str:
    """A checkpoint prefix; a directory means its latest checkpoint."""
    save_path = _prefix(save_path)
    if os.path.isdir(save_path) and not files.exists(save_path):
        latest = state_file.latest_checkpoint(save_path)
        if latest is None:
            raise NotFoundError(f"Failed to restore from {save_path!r}: it is a directory without checkpoints "
                                "(no 'checkpoint' index file naming one). Pass a checkpoint prefix.")
        return latest
    return save_path


def _strategy(checkpoint):
    """The strategy of the checkpointed variables (first distributed one), else the current one."""
    for node in T.walk(checkpoint):
        obj = node.obj
        candidates = (T.module_tensors(obj).values() if node.kind == T.MODULE
                      else T.named_tensors(obj).values() if node.kind == T.TENSORS
                      else [obj] if node.kind == T.VARIABLE else ())
        for t in candidates:
            if isinstance(t, DistributedVariable):
                return t._strategy
    return get_strategy()


#: The strategy whose variables ``checkpoint`` holds (the current one if none): whose workers save it.
strategy_of = _strategy


def _is_chief(checkpoint) -> bool:
    return bool(_strategy(checkpoint).extended.should_checkpoint)


def workers_meet(checkpoint) -> None:
    """The end of a save under a multi-worker strategy, where every worker saves (TensorFlow's rule):
    the workers meet, so when a save returns on any worker the chief's files and its ``checkpoint``
    index are complete, and a worker may restore them at once."""
    collective = _strategy(checkpoint).extended.worker_collective
    if collective.spans_processes:
        collective.sum(torch.zeros(()))


def _write_target(file_prefix: str, checkpoint) -> tuple[str, str | None]:
    """Where this worker writes: the prefix itself on the chief, a temporary directory elsewhere."""
    extended = _strategy(checkpoint).extended
    if extended.should_checkpoint:
        return file_prefix, None
    directory, base = os.path.split(os.path.abspath(file_prefix))
    temp_dir = os.path.join(directory, f"workertemp_{extended.worker_index}")
    return os.path.join(temp_dir, base), temp_dir
