"""A TensorFlow-style custom loop that checkpoints its distributed iterator, run in phases.

``python resume_tf_loop.py MODE RESUME STOP OUT``: a subclassed md.keras model (built by its first
call, inside ``strategy.run``), Adam, ``compute_average_loss`` over a shuffled, repeated dataset
(5 global batches a pass); ``md.train.Checkpoint(model, optimizer, iterator, step)`` with
``CheckpointManager(step_counter=step, checkpoint_interval=2)`` saved after every step (it writes
every second one). With ``RESUME`` = 1 the phase restores the latest checkpoint before the model is
built (deferred values land when the first step builds it) and continues from its step to ``STOP``.
``MODE``: ``mirrored`` (every local device), ``one`` (OneDeviceStrategy), ``mwms`` (under ``multidev
launch``). The chief writes ``OUT``: the first step, the global losses, the weights.
"""

from __future__ import annotations

import json
import sys

import torch

import multidev as md

GLOBAL_BATCH = 8


class Net(md.keras.Model):
    def __init__(self):
        super().__init__()
        self.d1 = md.keras.layers.Dense(8, activation="relu", kernel_initializer=md.keras.initializers.GlorotUniform(1))
        self.d2 = md.keras.layers.Dense(2, kernel_initializer=md.keras.initializers.GlorotUniform(2))

    def call(self, x):
        return self.d2(self.d1(x))


def dataset():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(40, 3, generator=gen)
    return md.data.Dataset.from_tensor_slices((x, (x.sum(1) > 0).long())).shuffle(40, seed=3).repeat(3).batch(GLOBAL_BATCH)


def main(mode: str, resume: bool, stop: int, out: str) -> None:
    strategy = {"mirrored": md.distribute.MirroredStrategy, "mwms": md.distribute.MultiWorkerMirroredStrategy,
                "one": lambda: md.distribute.OneDeviceStrategy("/cpu:0")}[mode]()
    with strategy.scope():
        model = Net()
        optimizer = md.keras.optimizers.Adam(0.05)
        loss_object = md.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
    iterator = iter(strategy.experimental_distribute_dataset(dataset()))
    ckpt = md.train.Checkpoint(model=model, optimizer=optimizer, iterator=iterator, step=md.Variable(0))
    manager = md.train.CheckpointManager(ckpt, "ckpts", max_to_keep=2, step_counter=ckpt.step, checkpoint_interval=2)
    status = ckpt.restore(manager.latest_checkpoint) if resume else None
    start = int(ckpt.step)

    def train_step(x, y):
        with md.GradientTape() as tape:
            loss = md.nn.compute_average_loss(loss_object(y, model(x)), global_batch_size=GLOBAL_BATCH)
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    losses = []
    for _ in range(start, stop):
        losses.append(float(strategy.reduce("SUM", strategy.run(train_step, args=next(iterator)), axis=None)))
        ckpt.step.assign_add(1)
        manager.save()
    if status is not None:
        status.assert_consumed()                  # the model's and the slots' values all landed
    if mode != "mwms" or strategy.extended.worker_index == 0:
        with open(out, "w") as f:
            json.dump({"start": start, "losses": losses, "iterations": int(optimizer.iterations),
                       "weights": [float(v) for w in model.trainable_variables for v in w.numpy().reshape(-1)]}, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] == "1", int(sys.argv[3]), sys.argv[4])
