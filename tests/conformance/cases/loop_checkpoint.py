"""Checkpoints in a custom loop ("Custom training with tf.distribute.Strategy", the checkpoint guide):
``tf.train.Checkpoint(optimizer=..., model=...)`` + ``CheckpointManager`` in a relative directory,
restored into a model built with no strategy, under another number of replicas, and training
continued from it equals training without the interruption."""

import os

from conformance_support import (InTempDirectory, loop_dataset, loop_model, loop_replica_step, one_cpu, two_cpus, val,
                                 weights)

GLOBAL_BATCH = 4


def _build(tf, s=None, build=True):
    """Model, optimizer (SGD with momentum: its slots must travel too) and checkpoint, in ``s``'s scope."""
    def make():
        model = loop_model(tf)
        optimizer = tf.keras.optimizers.SGD(learning_rate=0.2, momentum=0.9)
        if build:
            optimizer.build(model.trainable_variables)
        return model, optimizer, tf.train.Checkpoint(optimizer=optimizer, model=model)
    if s is None:
        return make()
    with s.scope():
        return make()


def _epoch(tf, s, model, optimizer):
    """One epoch of the tutorial's step over the ten examples; its per-step losses."""
    train_step = loop_replica_step(tf, model, optimizer, GLOBAL_BATCH)
    if s is None:   # no strategy: the plain loop over the global batches
        return [val(train_step(x, y)) for x, y in loop_dataset(tf, GLOBAL_BATCH)]

    @tf.function
    def step(x, y):
        return s.reduce("SUM", s.run(train_step, args=(x, y)), axis=None)
    return [val(step(x, y)) for x, y in s.experimental_distribute_dataset(loop_dataset(tf, GLOBAL_BATCH))]


def _saved_after_one_epoch(tf, s):
    """Train one epoch on ``s``, save with a manager in ./ckpts, train a second epoch."""
    model, optimizer, checkpoint = _build(tf, s)
    manager = tf.train.CheckpointManager(checkpoint, "ckpts", max_to_keep=2)
    _epoch(tf, s, model, optimizer)
    path = manager.save()
    second = _epoch(tf, s, model, optimizer)
    return path, {"second_epoch": second, "weights": weights(model)}


def _resumed(tf, saved_on, restore_on, build=True):
    with InTempDirectory():
        path, uninterrupted = _saved_after_one_epoch(tf, saved_on)
        model, optimizer, checkpoint = _build(tf, restore_on, build)
        status = checkpoint.restore(tf.train.latest_checkpoint("ckpts"))
        resumed = {"second_epoch": _epoch(tf, restore_on, model, optimizer), "weights": weights(model)}
        status.assert_existing_objects_matched()
        return {"path": [os.path.isabs(path), os.path.basename(path)], "uninterrupted": uninterrupted,
                "resumed": resumed, "iterations": val(optimizer.iterations.numpy())}


def case_resume_same_replicas(tf):
    return _resumed(tf, two_cpus(tf), two_cpus(tf))


def case_resume_without_strategy(tf):
    return _resumed(tf, two_cpus(tf), None)


def case_resume_on_one_replica(tf):
    return _resumed(tf, two_cpus(tf), one_cpu(tf))


def case_resume_one_to_two_replicas(tf):
    return _resumed(tf, one_cpu(tf), two_cpus(tf))


def case_resume_slots_not_built(tf):
    """The restoring optimizer has not made its slots yet: they are created by the first step."""
    return _resumed(tf, two_cpus(tf), None, build=False)


def case_manager_files(tf):
    with InTempDirectory():
        s = two_cpus(tf)
        model, optimizer, checkpoint = _build(tf, s)
        manager = tf.train.CheckpointManager(checkpoint, "ckpts", max_to_keep=2)
        paths = [manager.save() for _ in range(3)]
        with open(os.path.join("ckpts", "checkpoint")) as f:   # paths, not timestamps
            state = [line for line in f.read().splitlines() if "checkpoint_path" in line]
        return [paths, manager.checkpoints, manager.latest_checkpoint, tf.train.latest_checkpoint("ckpts"), state]


def _one_device(tf):
    return tf.distribute.OneDeviceStrategy("/cpu:0")


def case_resume_on_one_device_strategy(tf):
    """The save_and_load tutorial's move: trained on two replicas, continued under OneDeviceStrategy."""
    return _resumed(tf, two_cpus(tf), _one_device(tf))


def case_resume_one_device_strategy_on_two_replicas(tf):
    return _resumed(tf, _one_device(tf), two_cpus(tf))
