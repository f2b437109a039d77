"""Interrupted and resumed training gives the uninterrupted run's result, on two replicas: the custom
loop of "Custom training with tf.distribute.Strategy" over two passes of the ten examples (global batch
4: batches of 4, 4, 2, 4, 4, 2), interrupted mid-pass and resumed by a new program from a checkpoint;
Keras's ``fit`` with ``BackupAndRestore(save_freq=<int>)`` interrupted mid-epoch. TensorFlow's numbers
for restoring before the model is built are tf.keras 2's (``tf_keras``: TF 2.21's Keras 3 leaves an
unbuilt model's values unrestored, see docs/checkpoints.md), the Keras whose names md.keras keeps."""

from conformance_support import (LOOP_X, LOOP_Y, InTempDirectory, loop_dataset, loop_model, loop_replica_step, one_cpu,
                                 two_cpus, val, weights)

GLOBAL_BATCH = 4
STEPS = 6


def _keras2(tf):
    """tf.keras 2: ``tf_keras`` beside TensorFlow 2.21, md.keras in multidev."""
    if tf.__name__ == "tensorflow":
        import tf_keras
        return tf_keras
    return tf.keras


def _build(tf, s, k=None):
    """The loop's model and SGD with momentum in ``s``'s scope; with ``k`` (tf.keras 2) built from it."""
    with s.scope():
        model = loop_model(tf) if k is None else _model(tf, k)
        optimizer = (k or tf.keras).optimizers.SGD(learning_rate=0.2, momentum=0.9)
        if k is None:
            optimizer.build(model.trainable_variables)
    return model, optimizer


def _model(tf, k, built: bool = True):
    """``loop_model``'s network in Keras ``k``; ``built=False``: no input shape, no weights yet."""
    layers = [k.layers.Dense(4, activation="relu"), k.layers.Dense(2)]
    if not built:
        return k.Sequential(layers)
    model = k.Sequential([k.Input((3,)), *layers])
    model.set_weights([tf.constant(w) for w in _WEIGHTS])
    return model


_WEIGHTS = ([[0.2, -0.3, 0.5, 0.1], [-0.4, 0.6, 0.2, -0.1], [0.3, 0.1, -0.2, 0.7]], [0.05, 0.1, 0.15, 0.2],
            [[0.5, -0.6], [-0.3, 0.4], [0.2, 0.1], [-0.7, 0.3]], [0.05, 0.1])


def _stepper(tf, s, model, optimizer):
    train_step = loop_replica_step(tf, model, optimizer, GLOBAL_BATCH)

    @tf.function
    def step(inputs):
        return s.reduce("SUM", s.run(train_step, args=inputs), axis=None)
    return step


def _batches(tf, s, skip: int = 0):
    """The two passes as one distributed iterator, from batch ``skip`` on (TF's resume idiom without an
    iterator in the checkpoint: skip what the restored step counter says was trained)."""
    return iter(s.experimental_distribute_dataset(loop_dataset(tf, GLOBAL_BATCH).repeat(2).skip(skip)))


def case_loop_uninterrupted(tf):
    s = two_cpus(tf)
    model, optimizer = _build(tf, s)
    step, batches = _stepper(tf, s, model, optimizer), _batches(tf, s)
    return {"losses": [val(step(next(batches))) for _ in range(STEPS)], "weights": weights(model)}


def case_loop_distributed_iterator_mid_pass(tf):
    """The iterator in the checkpoint (TF 2.21 refuses a distributed iterator: KNOWN, SAME_AS the
    uninterrupted loop), saved one batch into the second pass and restored by a new program."""
    s = two_cpus(tf)
    with InTempDirectory():
        model, optimizer = _build(tf, s)
        step, batches = _stepper(tf, s, model, optimizer), _batches(tf, s)
        ckpt = tf.train.Checkpoint(model=model, optimizer=optimizer, iterator=batches)
        losses = [val(step(next(batches))) for _ in range(4)]
        path = ckpt.write("mid")
        model, optimizer = _build(tf, s)
        batches = _batches(tf, s)
        tf.train.Checkpoint(model=model, optimizer=optimizer, iterator=batches).read(path).assert_consumed()
        step = _stepper(tf, s, model, optimizer)
        losses += [val(step(next(batches))) for _ in range(STEPS - 4)]
        return {"losses": losses, "weights": weights(model)}


def case_loop_manager_interval_resume(tf):
    """``CheckpointManager(step_counter=optimizer.iterations, checkpoint_interval=2)``, ``save()`` after
    every step (it writes at steps 1 and 3), the program stopped after step 4; a new
    program under another number of replicas restores the latest, skips the batches its step counter
    says were trained, and ends with ``save(check_interval=False)``."""
    with InTempDirectory():
        s = two_cpus(tf)
        model, optimizer = _build(tf, s)
        ckpt = tf.train.Checkpoint(model=model, optimizer=optimizer)
        manager = tf.train.CheckpointManager(ckpt, "ckpts", max_to_keep=2, step_counter=optimizer.iterations,
                                             checkpoint_interval=2)
        step, batches = _stepper(tf, s, model, optimizer), _batches(tf, s)
        saved = []
        for _ in range(4):
            step(next(batches))
            saved.append(manager.save())
        s = one_cpu(tf)
        model, optimizer = _build(tf, s)
        ckpt = tf.train.Checkpoint(model=model, optimizer=optimizer)
        manager = tf.train.CheckpointManager(ckpt, "ckpts", max_to_keep=2, step_counter=optimizer.iterations,
                                             checkpoint_interval=2)
        ckpt.restore(manager.latest_checkpoint).assert_consumed()
        start = int(val(optimizer.iterations.numpy()))
        step, batches = _stepper(tf, s, model, optimizer), _batches(tf, s, skip=start)
        losses = []
        for _ in range(STEPS - start):
            losses.append(val(step(next(batches))))
            saved.append(manager.save())
        saved.append(manager.save(check_interval=False))
        return {"saved": saved, "restored_at": start, "losses": losses, "weights": weights(model),
                "checkpoints": list(manager.checkpoints), "latest": tf.train.latest_checkpoint("ckpts")}


def case_restore_before_build(tf):
    """Deferred restoration under a strategy: the checkpoint of the loop's third step restored into a
    model with no input shape and an optimizer without slots, in the scope; the layers are built by the
    first call and the momentum slots by the first step, where the waiting values land."""
    k = _keras2(tf)
    s = two_cpus(tf)
    with InTempDirectory():
        model, optimizer = _build(tf, s, k)
        step, batches = _stepper(tf, s, model, optimizer), _batches(tf, s)
        for _ in range(3):
            step(next(batches))
        path = tf.train.Checkpoint(model=model, optimizer=optimizer).write("third")
        with s.scope():
            model = _model(tf, k, built=False)
            optimizer = k.optimizers.SGD(learning_rate=0.2, momentum=0.9)
        status = tf.train.Checkpoint(model=model, optimizer=optimizer).read(path)
        with s.scope():
            model(tf.constant(LOOP_X[:1]))
        step = _stepper(tf, s, model, optimizer)
        losses = [val(step(next(batches))) for _ in range(STEPS - 3)]
        status.assert_consumed()
        return {"losses": losses, "weights": weights(model)}


class _Interrupt:
    """A callback standing for a preemption: raises after batch ``batch`` of epoch ``epoch``."""

    def __init__(self, k, epoch, batch):
        class Stop(k.callbacks.Callback):
            def on_epoch_begin(self, e, logs=None):
                self.epoch = e

            def on_train_batch_end(self, b, logs=None):
                if self.epoch == epoch and b == batch:
                    raise RuntimeError("preempted")
        self.callback = Stop()


def _fit_model(tf, k, s):
    with s.scope():
        model = _model(tf, k)
        model.compile(optimizer=k.optimizers.SGD(learning_rate=0.2, momentum=0.9),
                      loss=k.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


_FIT = dict(batch_size=2, epochs=3, shuffle=False, verbose=0)   # 5 steps an epoch


def case_fit_uninterrupted(tf):
    import numpy as np
    model = _fit_model(tf, tf.keras, two_cpus(tf))
    model.fit(np.array(LOOP_X, dtype="float32"), np.array(LOOP_Y, dtype="int64"), **_FIT)
    return {"weights": weights(model), "iterations": int(val(model.optimizer.iterations.numpy()))}


def case_fit_backup_and_restore_mid_epoch(tf):
    """``BackupAndRestore(save_freq=3)``, the fit stopped after the fourth batch of the second epoch (step 9
    of 15, just backed up), then a new model's ``fit`` with the callback. multidev resumes at step 9 (the
    uninterrupted weights: SAME_AS ``fit_uninterrupted``); TF 2.21's Keras 3 restarts the second epoch
    (KNOWN), and tf.keras 2 (``tf_keras``), which resumes at the step, also ends elsewhere."""
    import numpy as np
    k = tf.keras
    s = two_cpus(tf)
    x, y = np.array(LOOP_X, dtype="float32"), np.array(LOOP_Y, dtype="int64")
    with InTempDirectory():
        model = _fit_model(tf, k, s)
        try:
            model.fit(x, y, callbacks=[k.callbacks.BackupAndRestore("backup", save_freq=3),
                                       _Interrupt(k, 1, 3).callback], **_FIT)
        except RuntimeError:
            pass
        model = _fit_model(tf, k, s)
        model.fit(x, y, callbacks=[k.callbacks.BackupAndRestore("backup", save_freq=3)], **_FIT)
        return {"weights": weights(model), "iterations": int(val(model.optimizer.iterations.numpy()))}
