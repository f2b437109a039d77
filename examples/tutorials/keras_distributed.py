"""TensorFlow's "Distributed training with Keras" tutorial, ported to multidev.

``Model.fit`` under ``MirroredStrategy`` on 2 logical CPUs with the tutorial's callbacks: TensorBoard,
ModelCheckpoint (weights every epoch), LearningRateScheduler (a step decay) and a custom callback
printing the learning rate; then ``load_weights`` of the latest checkpoint, ``evaluate``, and
``model.save`` loaded back without a strategy and under ``OneDeviceStrategy``.

    python examples/tutorials/keras_distributed.py [--epochs 4] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import os
import tempfile

import _common
import multidev as md

_common.use_logical_cpus(2)


def decay(epoch: int) -> float:
    """The tutorial's step decay (1e-3, then 1e-4, then 1e-5), its boundaries moved for a short run."""
    if epoch < 2:
        return 1e-3
    if epoch < 3:
        return 1e-4
    return 1e-5


def compile_model(model) -> None:
    model.compile(loss=md.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  optimizer=md.keras.optimizers.Adam(), metrics=["accuracy"])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--workdir", default=None, help="checkpoints, logs, saved model (default: a temporary dir)")
    args = parser.parse_args(argv)
    workdir = args.workdir or tempfile.mkdtemp(prefix="keras_distributed_")
    md.random.set_seed(0)

    (x_train, y_train), (x_test, y_test) = _common.load_images("mnist", 512, 256)
    strategy = md.distribute.MirroredStrategy()
    print(f"Number of devices: {strategy.num_replicas_in_sync}")

    buffer_size = 10000
    batch_size = 32 * strategy.num_replicas_in_sync
    train_dataset = md.data.Dataset.from_tensor_slices((x_train, y_train)).cache().shuffle(
        buffer_size, seed=0).batch(batch_size)
    eval_dataset = md.data.Dataset.from_tensor_slices((x_test, y_test)).batch(batch_size)

    with strategy.scope():
        model = _common.conv_model()
        compile_model(model)

    checkpoint_dir = os.path.join(workdir, "training_checkpoints")
    # Keras 3 names weights files "*.weights.h5". TF 2.15's Keras 2 spelling, "ckpt_{epoch}" (no suffix),
    # works too: checkpoints read back with model.load_weights(md.train.latest_checkpoint(checkpoint_dir)).
    checkpoint_prefix = os.path.join(checkpoint_dir, "ckpt_{epoch}.weights.h5")

    class PrintLR(md.keras.callbacks.Callback):
        """Prints the optimizer's learning rate at the end of each epoch."""

        def on_epoch_end(self, epoch, logs=None):
            print(f"\nLearning rate for epoch {epoch + 1} is {float(model.optimizer.learning_rate.numpy()):g}")

    callbacks = [
        md.keras.callbacks.TensorBoard(log_dir=os.path.join(workdir, "logs")),
        md.keras.callbacks.ModelCheckpoint(filepath=checkpoint_prefix, save_weights_only=True),
        md.keras.callbacks.LearningRateScheduler(decay),
        PrintLR(),
    ]
    history = model.fit(train_dataset, epochs=args.epochs, callbacks=callbacks, verbose=2)
    print("Training losses:", " ".join(f"{v:.4f}" for v in history.history["loss"]))
    print("Checkpoints:", sorted(os.listdir(checkpoint_dir)))

    # Keras 3 files are named (a suffix-less prefix would be found by md.train.latest_checkpoint).
    model.load_weights(checkpoint_prefix.format(epoch=args.epochs))
    eval_loss, eval_acc = model.evaluate(eval_dataset, verbose=0)
    print(f"Eval loss: {eval_loss:.6f}, Eval accuracy: {eval_acc:.6f}")
    logs = sorted(os.listdir(os.path.join(workdir, "logs")))
    print("TensorBoard logs:", logs)

    path = os.path.join(workdir, "saved_model")
    model.save(path)

    unreplicated_model = md.keras.models.load_model(path)
    compile_model(unreplicated_model)
    eval_loss, eval_acc = unreplicated_model.evaluate(eval_dataset, verbose=0)
    print(f"Eval loss (no strategy): {eval_loss:.6f}, Eval Accuracy: {eval_acc:.6f}")

    another_strategy = md.distribute.OneDeviceStrategy("/cpu:0")
    with another_strategy.scope():
        loaded_model = md.keras.models.load_model(path)
        compile_model(loaded_model)
        eval_loss, eval_acc = loaded_model.evaluate(eval_dataset, verbose=0)
        print(f"Eval loss (OneDeviceStrategy): {eval_loss:.6f}, Eval Accuracy: {eval_acc:.6f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
