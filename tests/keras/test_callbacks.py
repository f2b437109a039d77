"""Callbacks: progress bar format, History, checkpoints, early stopping, LR, CSV, NaN, TensorBoard, backups."""

import csv
import io
import os
import re

import numpy as np
import pytest

import multidev.keras as keras
from multidev.keras import callbacks, layers, models


def regression(n=64):
    rng = np.random.RandomState(0)
    x = rng.randn(n, 3).astype("float32")
    return x, (x.sum(1, keepdims=True)).astype("float32")


def linear_model(lr=0.05, metrics=("mae",)):
    model = models.Sequential([layers.Dense(1, input_shape=(3,))])
    model.compile(keras.optimizers.SGD(lr), "mse", metrics=list(metrics))
    return model


def test_progress_bar_one_line_per_epoch_when_not_a_terminal(capsys):
    x, y = regression()
    linear_model().fit(x, y, batch_size=16, epochs=2, validation_data=(x, y))
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "Epoch 1/2" and out[2] == "Epoch 2/2"
    pattern = (r"^4/4 \[==============================\] - \d+s \d+(ms|s|us)/step - loss: \d+\.\d{4}(e[-+]\d+)? "
               r"- mae: \S+ - val_loss: \S+ - val_mae: \S+$")
    assert re.match(pattern, out[1]), out[1]
    assert len(out) == 4


def test_progbar_live_updates_on_a_terminal():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    stream = Tty()
    bar = keras.utils.Progbar(3, stream=stream, interval=0)
    bar.update(1, [("loss", 0.5)])
    bar.update(3, [("loss", 0.25)])
    text = stream.getvalue()
    assert "\r1/3 [=========>....................] - ETA:" in text and "loss: 0.5000" in text
    assert "\r3/3 [==============================] - " in text and text.endswith("loss: 0.2500\n")


def test_history_and_lambda_callback_hooks():
    x, y = regression()
    events = []
    cb = callbacks.LambdaCallback(on_train_begin=lambda logs: events.append("begin"),
                                  on_epoch_end=lambda epoch, logs: events.append(("epoch", epoch, "loss" in logs)),
                                  on_batch_end=lambda batch, logs: events.append(("batch", batch)))
    hist = linear_model().fit(x, y, batch_size=32, epochs=2, verbose=0, callbacks=[cb])
    assert events == ["begin", ("batch", 0), ("batch", 1), ("epoch", 0, True), ("batch", 0), ("batch", 1),
                      ("epoch", 1, True)]
    assert isinstance(hist, callbacks.History) and len(hist.history["loss"]) == 2
    with pytest.raises(TypeError, match="unknown hook 'on_epoch_ending'"):
        callbacks.LambdaCallback(on_epoch_ending=print)


def test_model_checkpoint_formats_epoch_and_saves_best_only(tmp_path):
    x, y = regression()
    pattern = str(tmp_path / "w.{epoch:02d}-{loss:.2f}.weights.h5")
    linear_model().fit(x, y, epochs=3, verbose=0, callbacks=[callbacks.ModelCheckpoint(pattern, monitor="loss",
                                                                                       save_weights_only=True)])
    files = sorted(os.listdir(tmp_path))
    assert len(files) == 3 and files[0].startswith("w.01-") and files[0].endswith(".weights.h5")
    best = str(tmp_path / "best.safetensors")
    model = linear_model(lr=0.0)                      # loss never improves after epoch 1
    ckpt = callbacks.ModelCheckpoint(best, monitor="loss", save_best_only=True, save_weights_only=True, verbose=1)
    model.fit(x, y, epochs=3, verbose=0, callbacks=[ckpt])
    assert os.path.exists(best) and ckpt.best is not None
    full = str(tmp_path / "full_model")
    model.fit(x, y, epochs=1, verbose=0, callbacks=[callbacks.ModelCheckpoint(full)])
    assert os.path.isfile(os.path.join(full, "config.json"))


def test_early_stopping_patience_and_restore_best_weights():
    x, y = regression()
    model = linear_model(lr=0.05)
    # diverging learning rate after epoch 2 makes the loss worse
    sched = callbacks.LearningRateScheduler(lambda epoch, lr: 0.05 if epoch < 2 else 1.5)
    stop = callbacks.EarlyStopping(monitor="loss", patience=2, restore_best_weights=True)
    hist = model.fit(x, y, epochs=20, verbose=0, callbacks=[sched, stop])
    assert len(hist.epoch) < 20 and stop.stopped_epoch == hist.epoch[-1]
    assert model.evaluate(x, y, verbose=0)[0] <= min(hist.history["loss"])   # weights of the best epoch are back
    assert hist.history["learning_rate"][0] == pytest.approx(0.05) and "lr" not in hist.history   # Keras 3's key


def test_learning_rate_scheduler_passes_a_float_and_assigns_the_variable():
    x, y = regression()
    model = linear_model(lr=0.05)
    lr_variable, seen = model.optimizer.learning_rate, []
    sched = callbacks.LearningRateScheduler(lambda epoch, lr: seen.append(lr) or lr * 0.5)
    hist = model.fit(x, y, epochs=3, verbose=0, callbacks=[sched])
    assert all(type(v) is float for v in seen) and seen == pytest.approx([0.05, 0.025, 0.0125])
    assert hist.history["learning_rate"] == pytest.approx([0.025, 0.0125, 0.00625])
    assert model.optimizer.learning_rate is lr_variable and lr_variable.numpy() == pytest.approx(0.00625)


def test_early_stopping_min_delta_and_mode_max():
    stop = callbacks.EarlyStopping(monitor="val_accuracy", min_delta=0.1, patience=1)
    assert stop.mode == "max"
    stop.set_model(linear_model())
    stop.on_train_begin()
    for epoch, acc in enumerate([0.5, 0.55]):      # +0.05 is below min_delta: no improvement
        stop.on_epoch_end(epoch, {"val_accuracy": acc})
    assert stop.model.stop_training and stop.stopped_epoch == 1


def test_reduce_lr_on_plateau():
    model = linear_model(lr=1.0)
    cb = callbacks.ReduceLROnPlateau(monitor="loss", factor=0.5, patience=1, min_lr=0.3)
    cb.set_model(model)
    cb.on_train_begin()
    logs = [{"loss": 1.0} for _ in range(4)]
    for epoch in range(4):
        cb.on_epoch_end(epoch, logs[epoch])
    assert model.optimizer.learning_rate.numpy() == pytest.approx(0.3)
    # Keras 3 logs the rate the epoch ran with, under `learning_rate`
    assert [log["learning_rate"] for log in logs] == pytest.approx([1.0, 1.0, 0.5, 0.3])
    with pytest.raises(ValueError, match="factor >= 1.0"):
        callbacks.ReduceLROnPlateau(factor=1.5)


def test_csv_logger(tmp_path):
    x, y = regression()
    path = tmp_path / "log.csv"
    linear_model().fit(x, y, epochs=2, verbose=0, validation_split=0.25, callbacks=[callbacks.CSVLogger(str(path))])
    rows = list(csv.DictReader(open(path)))
    assert [r["epoch"] for r in rows] == ["0", "1"]
    assert set(rows[0]) == {"epoch", "loss", "mae", "val_loss", "val_mae"}


def test_terminate_on_nan(capsys):
    x, y = regression()
    y[5] = np.nan
    hist = linear_model().fit(x, y, batch_size=8, epochs=3, verbose=0, shuffle=False,
                              callbacks=[callbacks.TerminateOnNaN()])
    assert len(hist.epoch) == 1
    assert "Batch 0: Invalid loss nan, terminating training" in capsys.readouterr().out
    with pytest.raises(FloatingPointError, match="Invalid loss nan"):
        linear_model().fit(x, y, batch_size=8, verbose=0, callbacks=[callbacks.TerminateOnNaN(raise_error=True)])


def test_tensorboard_writes_event_files(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    x, y = regression()
    linear_model().fit(x, y, epochs=2, verbose=0, validation_split=0.25,
                       callbacks=[callbacks.TensorBoard(log_dir=str(tmp_path))])
    train = EventAccumulator(str(tmp_path / "train"))
    train.Reload()
    assert {"epoch_loss", "epoch_mae"} <= set(train.Tags()["scalars"])
    assert [e.step for e in train.Scalars("epoch_loss")] == [0, 1]
    val = EventAccumulator(str(tmp_path / "validation"))
    val.Reload()
    assert "epoch_loss" in val.Tags()["scalars"]


def test_backup_and_restore_resumes_after_interruption(tmp_path):
    x, y = regression()
    backup = str(tmp_path / "backup")

    class Interrupt(callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            if epoch == 1:
                raise KeyboardInterrupt

    model = linear_model()
    with pytest.raises(KeyboardInterrupt):
        model.fit(x, y, epochs=4, verbose=0, callbacks=[callbacks.BackupAndRestore(backup), Interrupt()])
    assert sorted(os.listdir(backup)) == ["ckpt-2", "state.json"]    # one committed backup (epoch 1's)
    saved = model.get_weights()
    resumed = linear_model()
    hist = resumed.fit(x, y, epochs=4, verbose=0, callbacks=[callbacks.BackupAndRestore(backup)])
    assert hist.epoch == [2, 3]
    assert not os.path.exists(backup)                    # deleted after a successful fit
    assert not np.allclose(resumed.get_weights()[0], saved[0])


def test_model_checkpoint_prints_minus_inf_as_the_first_best_of_a_maximised_metric(tmp_path, capsys):
    """tf.keras: 'val_accuracy improved from -inf to ...' (md printed 'inf' whatever the mode)."""
    import numpy as np
    import multidev as md
    model = md.keras.Sequential([md.keras.Input(shape=(2,)), md.keras.layers.Dense(2)])
    model.compile("sgd", md.keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    save = md.keras.callbacks.ModelCheckpoint(str(tmp_path / "b.weights.h5"), monitor="val_accuracy",
                                              save_best_only=True, save_weights_only=True, verbose=1)
    x = np.random.RandomState(0).randn(8, 2).astype("float32")
    model.fit(x, (x[:, 0] > 0).astype("int64"), validation_split=0.25, epochs=1, verbose=0, callbacks=[save])
    assert "val_accuracy improved from -inf to" in capsys.readouterr().out


def test_csv_logger_writes_keras_columns_and_cells(tmp_path):
    """tf.keras 2 (and Keras 3): validation's columns from the first row (NA until validation runs), a list-valued
    metric as "[a, b]", a second fit appended under the same header. md wrote no val_ columns and numpy's
    '[0.8333333 0.       ]'. The file below is TF 2.21's (tf.keras 2), the numbers md's own."""
    import multidev as md
    x = np.random.RandomState(0).randn(8, 2).astype("float32")
    y = np.eye(2, dtype="float32")[(x[:, 0] > 0).astype(int)]
    model = md.keras.Sequential([md.keras.Input(shape=(2,)), md.keras.layers.Dense(2, activation="softmax",
                                                                                   kernel_initializer="ones")])
    model.compile("sgd", "categorical_crossentropy",
                  metrics=[md.keras.metrics.Recall(thresholds=[0.3, 0.9], name="rec")])
    log = md.keras.callbacks.CSVLogger(str(tmp_path / "log.csv"), separator=";", append=True)
    model.fit(x, y, epochs=1, verbose=0, callbacks=[log])
    model.fit(x, y, epochs=2, initial_epoch=1, verbose=0, callbacks=[log], validation_data=(x, y))
    rows = (tmp_path / "log.csv").read_text().splitlines()
    assert rows[0] == "epoch;loss;rec;val_loss;val_rec"
    assert re.fullmatch(r'0;[0-9.]+;"""\[1\.0, 0\.0\]""";NA;NA', rows[1]), rows[1]
    assert re.fullmatch(r'1;[0-9.]+;"""\[1\.0, 0\.0\]""";[0-9.]+;"""\[1\.0, 0\.0\]"""', rows[2]), rows[2]
