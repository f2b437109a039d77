"""Keras's ``BackupAndRestore(backup_dir)`` with its default ``save_freq="epoch"``: a fit on two replicas
stopped in the middle of its second epoch (a preemption) and resumed by a new model's fit on two replicas,
or on one: the restarted epoch and the third give the uninterrupted fit's weights, the iteration count is
15, and the backup directory is gone after the fit ends."""

import os

from conformance_support import LOOP_X, LOOP_Y, InTempDirectory, loop_model, one_cpu, two_cpus, val, weights


def _model(tf, s):
    with s.scope():
        model = loop_model(tf)
        model.compile(optimizer=tf.keras.optimizers.SGD(learning_rate=0.2, momentum=0.9),
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def _fit(model, callbacks):
    import numpy as np
    x, y = np.array(LOOP_X, dtype="float32"), np.array(LOOP_Y, dtype="int64")
    return model.fit(x, y, batch_size=2, epochs=3, shuffle=False, verbose=0, callbacks=callbacks)


def _preempted(tf):
    class Stop(tf.keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.epoch = epoch

        def on_train_batch_end(self, batch, logs=None):
            if self.epoch == 1 and batch == 2:
                raise RuntimeError("preempted")
    return Stop()


def _resumed(tf, resume_on):
    with InTempDirectory():
        model = _model(tf, two_cpus(tf))
        try:
            _fit(model, [tf.keras.callbacks.BackupAndRestore("backup"), _preempted(tf)])
        except RuntimeError:
            pass
        model = _model(tf, resume_on(tf))
        history = _fit(model, [tf.keras.callbacks.BackupAndRestore("backup")])
        return {"epochs": history.epoch, "iterations": int(val(model.optimizer.iterations.numpy())),
                "backup_left": os.path.exists("backup"), "weights": weights(model)}


def case_uninterrupted(tf):
    model = _model(tf, two_cpus(tf))
    _fit(model, [])
    return weights(model)


def case_resumed_on_two_replicas(tf):
    return _resumed(tf, two_cpus)


def case_resumed_on_one_replica(tf):
    return _resumed(tf, one_cpu)
