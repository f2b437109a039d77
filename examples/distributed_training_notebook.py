"""The "Distributed training in TensorFlow" notebook (seed 004), cell by cell, with multidev.

The notebook pairs the CPU with Colab's single GPU (``MirroredStrategy(devices=["/CPU:0", "/GPU:0"])``)
to get two replicas; here the CPU is split into two logical CPU devices, so it runs anywhere:

    python examples/distributed_training_notebook.py
    python examples/distributed_training_notebook.py --epochs 20     # shorter training cells

The TPU cells are left out (there is no TPU support). The notebook only mentions
MultiWorkerMirroredStrategy; to run this kind of code on several processes, see
``examples/multi_worker.py`` and ``multidev launch --workers 2`` (docs/multi_worker.md).
"""

from __future__ import annotations

import argparse
import os
import tempfile

import multidev as md

# Configure before anything initializes the devices: two logical CPUs stand in for the notebook's CPU + GPU.
_CPU = md.config.list_physical_devices("CPU")[0]
md.config.set_logical_device_configuration(_CPU, [md.config.LogicalDeviceConfiguration()] * 2)

import torch  # noqa: E402


def cell(title: str) -> None:
    print(f"\n== {title} ==")


# -- Strategies -----------------------------------------------------------------------------------

def choose_strategy():
    cell("Choosing a strategy")
    strategy = md.distribute.MirroredStrategy(devices=["/CPU:0", "/CPU:1"])
    print("Number of replicas in strategy:", strategy.num_replicas_in_sync)  # should be 2
    return strategy


class MyClass:
    def __init__(self):
        self.weight = md.Variable(3.14, dtype=torch.float32)


def variable_placement(strategy) -> None:
    cell("Variable placement")
    nonrep = MyClass()                  # non-replicated instantiation
    print("nonrep.weight:", nonrep.weight)
    with strategy.scope():
        rep = MyClass()                 # replicated instantiation: one copy per replica
    print("rep.weight:", rep.weight)


@md.function
def add(a, b):
    return a + b


def running_code(strategy) -> None:
    cell("Running code")
    res = strategy.run(add, args=(torch.tensor([[1, 2]]), torch.tensor([[3, 4]])))
    print(res)
    print("strategy.experimental_local_results:")
    print(strategy.experimental_local_results(res))
    print("strategy.gather:")
    print(strategy.gather(res, axis=0))
    print("strategy.reduce:")
    print(strategy.reduce("SUM", res, axis=0))


# -- Data sharding --------------------------------------------------------------------------------

def return_batch(batch):
    """No-op: just returns the batch as-is."""
    return {"replica": md.distribute.get_replica_context().replica_id_in_sync_group, "batch": batch}


def dataset_distribution_experiment(strategy, dataset) -> None:
    for idx, batch in enumerate(dataset):
        print("Global batch #:", idx)
        results = strategy.experimental_local_results(strategy.run(return_batch, args=(batch,)))
        print("Results:", [{k: v.numpy() for k, v in d.items()} for d in results])


def data_sharding(strategy):
    cell("Data sharding")
    ds = md.data.Dataset.from_tensor_slices(torch.arange(16)).batch(4)
    dds = strategy.experimental_distribute_dataset(ds)
    print("Original dataset (not sharded):")
    dataset_distribution_experiment(strategy, ds)
    print("Distributed dataset:")
    dataset_distribution_experiment(strategy, dds)
    return dds


# -- Coordinated variable updates -------------------------------------------------------------------

class RunningSum:
    def __init__(self, aggregation):
        self.result = md.Variable(0, dtype=torch.int32, aggregation=aggregation)

    @md.function
    def update(self, value):
        self.result.assign_add(torch.sum(value))


def assignment_experiment(aggregation, strategy, dataset):
    with strategy.scope():
        rs = RunningSum(aggregation)
    for val in dataset:
        strategy.run(rs.update, args=(val,))
    return rs.result


def coordinated_updates(strategy, dds) -> None:
    cell("Coordinated variable updates")
    print("Per replica variables diverge without aggregation (as each device only updates according to the "
          "values it sees):")
    print(assignment_experiment(md.VariableAggregation.NONE, strategy, dds))
    print("But setting aggregation to SUM keeps the variables in sync and yields the correct result for the "
          "sum of the dataset (i.e. 120):")
    print(assignment_experiment(md.VariableAggregation.SUM, strategy, dds))


# -- Keras --------------------------------------------------------------------------------------------

def create_and_compile_model():
    model = md.keras.models.Sequential([md.keras.layers.Dense(1, input_shape=(1,))])
    loss = md.keras.losses.MeanSquaredError()
    optimizer = md.keras.optimizers.Adam(learning_rate=0.1)
    metrics = [md.keras.metrics.mean_absolute_error]
    model.compile(loss=loss, optimizer=optimizer, metrics=metrics)
    return model


def keras_data(strategy, epochs):
    X = torch.arange(0, 20, dtype=torch.float32)[:, None]
    y = 2.0 * X + 3
    train = md.data.Dataset.from_tensor_slices((X, y))
    global_batch_size = 2 * strategy.num_replicas_in_sync      # PER_REPLICA_BATCH_SIZE * replicas
    steps_per_epoch = len(train) // global_batch_size
    dist_train = strategy.experimental_distribute_dataset(train.batch(global_batch_size).repeat(epochs))
    return train, dist_train, global_batch_size, steps_per_epoch


def keras_fit(strategy, dist_train, steps_per_epoch, epochs):
    cell("Using strategies with Keras")
    with strategy.scope():          # create the model in cross-replica scope and fit, otherwise as usual
        model = create_and_compile_model()
        history = model.fit(dist_train, steps_per_epoch=steps_per_epoch, epochs=epochs, verbose=0)
    print("Training complete, final loss {:.6f}.".format(history.history["loss"][-1]))
    return model


def saving_and_loading(model, train, global_batch_size) -> None:
    cell("Saving and checkpointing")
    print(model.layers[0].kernel)             # a MirroredVariable: one copy per replica
    print(model.get_weights())                # but get_weights returns one set of weights
    with tempfile.TemporaryDirectory() as tmp:
        model.save_weights(os.path.join(tmp, "ckpt"))          # the notebook's: a checkpoint at prefix "ckpt"
        nonrep_model = create_and_compile_model()              # a new, unreplicated model
        nonrep_model.load_weights(os.path.join(tmp, "ckpt"))
        # Keras 3's form works beside it: save_weights("ckpt.weights.h5") writes one file (safetensors inside).
    perf = nonrep_model.evaluate(train.batch(global_batch_size), verbose=0)
    print("Loaded model loss: {:.6f}".format(perf[0]))


# -- Custom training loop --------------------------------------------------------------------------

def custom_training_loop(strategy, dist_train, global_batch_size, steps_per_epoch, epochs) -> None:
    cell("Custom training loop")
    pe_loss = md.keras.losses.MeanSquaredError(reduction=md.keras.losses.Reduction.NONE)   # or reduction="none"

    def compute_loss(labels, predictions):
        per_example_loss = pe_loss(labels, predictions)
        return md.nn.compute_average_loss(per_example_loss, global_batch_size=global_batch_size)

    @md.function
    def train_step(inputs, model):
        features, labels = inputs
        with md.GradientTape() as tape:
            predictions = model(features, training=True)
            loss = compute_loss(labels, predictions)
        gradients = tape.gradient(loss, model.trainable_variables)
        model.optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        return loss

    def distributed_train_step(dist_inputs, model):
        per_replica_losses = strategy.run(train_step, args=(dist_inputs, model))
        return strategy.reduce("SUM", per_replica_losses, axis=None)

    def distributed_train(dist_inputs, model, steps_per_epoch, epochs):
        for epoch in range(epochs):             # the notebook wraps range(epochs) in tqdm's progress bar
            iterator = iter(dist_inputs)        # each epoch restarts the (repeated) dataset, as the notebook does
            for step in range(steps_per_epoch):
                batch = next(iterator)
                distributed_train_step(batch, model)

    with strategy.scope():
        cust_train_model = create_and_compile_model()
    distributed_train(dist_train, cust_train_model, steps_per_epoch, epochs)
    perf = cust_train_model.evaluate(dist_train, steps=steps_per_epoch, verbose=0)
    print("Model trained, loss: {:.6f}".format(perf[0]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=100, help="epochs of the Keras and custom-loop cells (100)")
    args = parser.parse_args(argv)
    if args.epochs < 1:
        parser.error(f"--epochs must be >= 1, got {args.epochs}")
    torch.manual_seed(0)
    strategy = choose_strategy()
    variable_placement(strategy)
    running_code(strategy)
    dds = data_sharding(strategy)
    coordinated_updates(strategy, dds)
    train, dist_train, global_batch_size, steps = keras_data(strategy, args.epochs)
    model = keras_fit(strategy, dist_train, steps, args.epochs)
    saving_and_loading(model, train, global_batch_size)
    custom_training_loop(strategy, dist_train, global_batch_size, steps, args.epochs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
