"""``md.distribute.experimental.PreemptionCheckpointHandler`` and ``TerminationConfig``: TensorFlow's
checkpoint on preemption for custom training loops.

A worker is preempted when it gets SIGTERM (or when a ``termination_watcher_fn`` returns True). At the
start of every ``run`` call the workers agree whether any of them was: one 2-element sum over the
workers' processes (nothing with one worker). TensorFlow's order is kept (TF 2.21, checked: SIGTERM
after the 3rd call): the call that was starting still runs, the next one saves a checkpoint holding
``total_run_calls`` (4) on every worker at the same call, and ``exit_fn`` ends the process (default
``sys.exit(42)``, TensorFlow's restart code). A new handler over the same directory restores the
latest checkpoint, ``total_run_calls`` included, so ``while handler.total_run_calls < STEPS`` resumes.
With ``grace_period`` > 0 the workers save, keep training while the preempted worker expects time for
two more calls (three times the mean call time each), then save again and exit, as TensorFlow does.

*Differs:* TensorFlow's workers agree through its coordination service and pay nothing per call;
multidev's pay one tiny all-reduce per ``run`` call when there are several workers.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import threading
import time

import torch

from multidev._core.errors import InvalidArgumentError
from multidev.train.checkpoint import Checkpoint, strategy_of
from multidev.train.manager import CheckpointManager
from multidev.values.base_variable import Variable

logger = logging.getLogger("multidev.preemption")

#: The name of the run counter in the checkpoint (TensorFlow's).
RUN_COUNTER = "checkpointed_runs"
RESTART_CODE = 42


class TerminationConfig:
    """How a platform signals termination and what to do after the preemption checkpoint.

    Args:
        termination_watcher_fn: returns True once termination is coming (called at each ``run``; keep it
            light and non-blocking). None: SIGTERM.
        exit_fn: called after the checkpoint is saved (default ``sys.exit(42)``).
        grace_period: seconds between the notice and the kill; > 0 trains on and saves again just before.
        save_fn: called instead of the checkpoint manager's ``save`` (with ``run``'s save arguments).
    """

    def __init__(self, termination_watcher_fn=None, exit_fn=None, grace_period=None, save_fn=None):
        for name, fn in (("termination_watcher_fn", termination_watcher_fn), ("exit_fn", exit_fn),
                         ("save_fn", save_fn)):
            if fn is not None and not callable(fn):
                raise TypeError(f"TerminationConfig {name} must be callable or None, got {fn!r}.")
        if grace_period is not None and (isinstance(grace_period, bool) or not isinstance(grace_period, (int, float))
                                         or grace_period < 0):
            raise ValueError(f"TerminationConfig grace_period must be a number of seconds >= 0, got {grace_period!r}.")
        self.termination_watcher_fn = termination_watcher_fn
        self.exit_fn = exit_fn or (lambda: sys.exit(RESTART_CODE))
        self.grace_period = float(grace_period or 0)
        self.save_fn = save_fn


class PreemptionCheckpointHandler:
    """Saves a checkpoint on every worker when any worker is preempted, then exits; restores on creation.

    Args:
        cluster_resolver: the strategy's ``cluster_resolver`` (kept for TensorFlow's signature; the workers
            are those of the strategy whose variables the checkpoint holds).
        checkpoint_or_checkpoint_manager: a ``md.train.Checkpoint`` (then ``checkpoint_dir`` is required) or a
            ``md.train.CheckpointManager``.
        checkpoint_dir: where checkpoints are saved and restored from.
        termination_config: a ``TerminationConfig``.

    Example:
        >>> handler = md.distribute.experimental.PreemptionCheckpointHandler(
        ...     strategy.cluster_resolver, checkpoint, "ckpt")
        >>> while handler.total_run_calls < STEPS:
        ...     handler.run(distributed_train_step, next(iterator))
    """

    def __init__(self, cluster_resolver, checkpoint_or_checkpoint_manager, checkpoint_dir=None,
                 termination_config=None):
        target = checkpoint_or_checkpoint_manager
        if isinstance(target, Checkpoint) and not checkpoint_dir:
            raise InvalidArgumentError("When a checkpoint is passed, a checkpoint_dir must be passed as well.")
        if not isinstance(target, (Checkpoint, CheckpointManager)):
            raise TypeError("checkpoint_or_checkpoint_manager must be a md.train.Checkpoint or "
                            f"md.train.CheckpointManager, got {target!r}.")
        if termination_config is not None and not isinstance(termination_config, TerminationConfig):
            raise TypeError(f"termination_config must be a md.distribute.experimental.TerminationConfig, "
                            f"got {termination_config!r}.")
        if cluster_resolver is not None and "ps" in (cluster_resolver.cluster_spec().as_dict() or {}):
            raise NotImplementedError("PreemptionCheckpointHandler does not support ParameterServerStrategy: save "
                                      "with md.train.CheckpointManager from the coordinator instead.")
        config = termination_config or TerminationConfig()
        self._config = config
        self._manager = target if isinstance(target, CheckpointManager) else \
            CheckpointManager(target, checkpoint_dir, max_to_keep=1)
        checkpoint = self._manager.checkpoint
        self._counter = getattr(checkpoint, RUN_COUNTER, None)
        if self._counter is None:
            self._counter = Variable(torch.zeros((), dtype=torch.int64), trainable=False, name=RUN_COUNTER)
            setattr(checkpoint, RUN_COUNTER, self._counter)
        self._workers = strategy_of(checkpoint).extended.worker_collective
        self._manager.restore_or_initialize()
        self._run_counter = int(self._counter.numpy())
        self._preempted_at: float | None = None     # when this worker got its notice (monotonic)
        self._save_at: int | None = None            # the run count at which every worker saves
        self._counting_down = False                 # saved once; training through the grace period
        self._mean_run_time = 0.0
        self._runs_timed = 0
        if config.termination_watcher_fn is None:
            self._watch_sigterm()

    def _watch_sigterm(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            raise ValueError("PreemptionCheckpointHandler watches SIGTERM, which only the main thread can do: create "
                             "it on the main thread, or pass TerminationConfig(termination_watcher_fn=...).")
        signal.signal(signal.SIGTERM, self._on_sigterm)

    def _on_sigterm(self, signum, frame) -> None:
        if self._preempted_at is None:
            self._preempted_at = time.monotonic()
            logger.info("PreemptionCheckpointHandler: SIGTERM received; saving at the next agreed run call.")

    @property
    def total_run_calls(self) -> int:
        """Calls of ``run`` (and ``save_checkpoint_if_preempted``) so far, those before a restart included."""
        return self._run_counter

    def run(self, distributed_train_function, *args, **kwargs):
        """``distributed_train_function(*args, **kwargs)``, after saving and exiting if a worker was preempted."""
        self._check_preemption_and_maybe_save()
        start = time.monotonic()
        result = distributed_train_function(*args, **kwargs)
        self._run_counter += 1
        self._runs_timed += 1
        self._mean_run_time += (time.monotonic() - start - self._mean_run_time) / self._runs_timed
        return result

    def save_checkpoint_if_preempted(self, *args, **kwargs) -> None:
        """For loops that do not call ``run``: the same check (and save, with ``args`` for the manager's
        ``save``), counted as one call."""
        self._check_preemption_and_maybe_save(*args, **kwargs)
        self._run_counter += 1

    @contextlib.contextmanager
    def watch_preemption_scope(self):
        """TensorFlow needs it for TPUs only; with multidev it adds nothing."""
        yield

    def _check_preemption_and_maybe_save(self, *args, **kwargs) -> None:
        watcher = self._config.termination_watcher_fn
        if watcher is not None and self._preempted_at is None and watcher():
            self._preempted_at = time.monotonic()
        preempted, final_due = self._agree()
        if self._save_at is None and ((preempted and not self._counting_down) or (self._counting_down and final_due)):
            self._save_at = self._run_counter + 1     # every worker finishes the call it is starting (TF's order)
            return
        if self._save_at is None or self._run_counter != self._save_at:
            return
        self._save(*args, **kwargs)
        if self._config.grace_period <= 0 or self._counting_down:
            logger.info("PreemptionCheckpointHandler: checkpoint saved; exiting.")
            self._config.exit_fn()
            return
        self._counting_down, self._save_at = True, None
        logger.info("PreemptionCheckpointHandler: checkpoint saved; training on through the grace period.")

    def _agree(self) -> tuple[bool, bool]:
        """(some worker was preempted, the preempted worker says it is time for the final save)."""
        mine = torch.tensor([float(self._preempted_at is not None), float(self._final_save_due())])
        if self._workers.spans_processes:
            mine = self._workers.sum(mine)
        return bool(mine[0] > 0), bool(mine[1] > 0)

    def _final_save_due(self) -> bool:
        if not self._counting_down or self._preempted_at is None:
            return False
        deadline = self._preempted_at + self._config.grace_period - 3 * 2 * self._mean_run_time
        return time.monotonic() >= deadline

    def _save(self, *args, **kwargs) -> None:
        self._counter.assign(self._run_counter)
        if self._config.save_fn is not None:
            self._config.save_fn(*args, **kwargs)
        else:
            self._manager.save(*args, **kwargs)
