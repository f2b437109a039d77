"""What ``Checkpoint.restore``/``read`` return: checks of how the checkpoint matched the objects.

``assert_consumed()``: every value in the checkpoint went into an object and every tracked object
got a value (deferred values not yet created count as unconsumed). ``assert_existing_objects_matched()``:
every variable that exists now got a value (the checkpoint may hold more). ``assert_nontrivial_match()``:
at least one value was restored. ``expect_partial()``: no warning about unused values. Each
returns the status, so calls chain. The checks are live: they see deferred values as they land.

Example:
    status = ckpt.restore(manager.latest_checkpoint)
    status.assert_existing_objects_matched()
"""

from __future__ import annotations

import logging

_log = logging.getLogger("multidev.train")


class CheckpointLoadStatus:
    """The result of restoring a checkpoint into an object graph.

    Example:
        >>> ckpt.restore(path).assert_existing_objects_matched()
    """

    def __init__(self, save_path: str, all_keys, unmatched: list[str]):
        self.save_path = save_path
        self._all_keys = set(all_keys)
        self._consumed: set = set()
        self._unmatched = list(unmatched)   # objects/variables of the graph the checkpoint has no value for
        self._pending: list = []            # deferred.PendingValue / restorer.PendingChild (waiting_keys())
        self._silenced = False
        self._matched: set = set()          # paths of objects the checkpoint had an entry for

    def _consume(self, key: str) -> None:
        self._consumed.add(key)

    def _unused(self) -> list[str]:
        return sorted(self._all_keys - self._consumed)

    def _waiting(self) -> list[str]:
        """Unconsumed keys that wait for objects not created yet."""
        unused = set(self._unused())
        return sorted(set().union(*(p.waiting_keys(unused) for p in self._pending)))

    def assert_consumed(self) -> "CheckpointLoadStatus":
        """AssertionError unless every checkpoint value was restored and every object matched."""
        unused, waiting = self._unused(), self._waiting()
        if unused or self._unmatched:
            parts = []
            if waiting:
                parts.append(f"values waiting for objects not created yet: {waiting}")
            others = sorted(set(unused) - set(waiting))
            if others:
                parts.append(f"unresolved values in the checkpoint (nothing in the program to restore them into): "
                             f"{others}")
            if self._unmatched:
                parts.append(f"objects not found in the checkpoint (changed program?): {self._unmatched}")
            raise AssertionError(f"Checkpoint {self.save_path!r} was not fully consumed: " + "; ".join(parts)
                                 + ". Use assert_existing_objects_matched() or expect_partial() for a partial restore.")
        return self

    def assert_existing_objects_matched(self) -> "CheckpointLoadStatus":
        """AssertionError if a variable or object that exists now got no value from the checkpoint."""
        if self._unmatched:
            raise AssertionError(f"Some objects were not bound to values in checkpoint {self.save_path!r}, likely "
                                 f"because the program changed: {self._unmatched}")
        return self

    def assert_nontrivial_match(self) -> "CheckpointLoadStatus":
        """AssertionError unless at least one object besides the root matched the checkpoint."""
        if not self._matched - {""} and not self._consumed:     # (a root model's own weights count)
            raise AssertionError(f"Nothing in checkpoint {self.save_path!r} matched the objects being restored "
                                 f"(checkpoint holds {sorted(self._all_keys)}).")
        return self

    def expect_partial(self) -> "CheckpointLoadStatus":
        """Silence the warning about values that were not restored."""
        self._silenced = True
        return self

    def run_restore_ops(self, session=None) -> None:
        """No-op: values are restored eagerly (TF's graph-mode call, kept for ported code)."""

    def initialize_or_restore(self, session=None) -> None:
        """No-op: values are restored eagerly (TF's graph-mode call, kept for ported code)."""

    def __del__(self):
        """TensorFlow's warning when values of a partial restore were never used (its coordinator's
        deleter): the status is dropped, and nothing waits for objects not created yet (a waiting
        value holds the status), unless ``expect_partial()`` was called."""
        try:
            unused = self._unused()
            if unused and not self._silenced:
                _log.warning(_PARTIAL_WARNING, self.save_path)
                for key in unused:
                    _log.warning("Value in checkpoint could not be found in the restored object: %s", _tf_name(key))
        except Exception:  # interpreter shutdown
            pass


_PARTIAL_WARNING = ("Detecting that an object or model or md.train.Checkpoint is being deleted with unrestored values "
                    "of checkpoint %s. See the following logs for the specific values in question. To silence these "
                    "warnings, use `status.expect_partial()`: the status object returned by restore()/read().")


def _tf_name(key: str) -> str:
    """A storage key as TensorFlow names the object: ``w:value`` -> ``(root).w``,
    ``model:layers.0.kernel`` -> ``(root).model.layers.0.kernel``, an optimizer slot
    ``optimizer:model:layers.0.bias/momentum`` -> ``(root).optimizer.model.layers.0.bias/momentum``."""
    path, _, local = key.partition(":")
    parts = [p for p in path.split("/") if p] + ([] if local == "value" else [local.replace(":", ".")])
    return ".".join(["(root)", *parts])


class InitializationOnlyStatus:
    """What ``restore(None)`` returns: nothing was restored, every variable keeps its initial value.

    Example:
        >>> ckpt.restore(manager.latest_checkpoint)    # None before the first save: initialize only
    """

    save_path = None

    def _fail(self):
        raise AssertionError("No checkpoint specified (save_path=None); nothing is being restored.")

    def assert_consumed(self):
        self._fail()

    def assert_existing_objects_matched(self):
        self._fail()

    def assert_nontrivial_match(self):
        self._fail()

    def expect_partial(self) -> "InitializationOnlyStatus":
        return self

    def run_restore_ops(self, session=None) -> None:
        """No-op (eager)."""

    def initialize_or_restore(self, session=None) -> None:
        """No-op: variables are initialized at creation."""
