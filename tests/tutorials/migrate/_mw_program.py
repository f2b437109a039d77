"""Guide "Migrate multi-worker CPU/GPU training" (guide/migrate/multi_worker_cpu_gpu_training), TF2 half,
with the guide's ``MultiWorkerMirroredStrategy`` in place of ``ParameterServerStrategy`` (as it says).

``python _mw_program.py tf|md OUT_DIR`` in each of 2 worker processes (TF_CONFIG set) writes
``OUT_DIR/worker<i>.json``. The guide's ``dataset_fn`` (``get_per_replica_batch_size(64)``, ``shard`` by
input pipeline, ``repeat``) through ``tf.keras.utils.experimental.DatasetCreator`` into ``fit(x,
epochs=..., steps_per_epoch=...)``, and the same ``dataset_fn`` in a custom loop
(``distribute_datasets_from_function``, ``strategy.run``, ``strategy.reduce``). Substitutions (the same
on both sides): no ``shuffle(10)`` (a fixed order), the model built and its weights set from a fixed
pattern, ``epochs=5, steps_per_epoch=10`` -> 2 and 3. TensorFlow's numbers: ``record_mw.py``
(tf_keras 2.21: Keras 3 has no DatasetCreator and its fit fails under MultiWorkerMirroredStrategy).
"""

import json
import os
import sys

import numpy as np

if sys.argv[1] == "tf":
    import tensorflow as tf
else:
    import multidev as tf

OUT = sys.argv[2]
features = [[1., 1.5], [2., 2.5], [3., 3.5]]
labels = [[0.3], [0.5], [0.7]]


def dataset_fn(input_context):
    batch_size = input_context.get_per_replica_batch_size(global_batch_size=64)
    dataset = tf.data.Dataset.from_tensor_slices(
        (features, labels)).repeat()
    dataset = dataset.shard(
        input_context.num_input_pipelines, input_context.input_pipeline_id)
    return dataset.batch(batch_size).prefetch(2)


def fixed_weights(model):
    model.build((None, 2))
    model.set_weights([np.array([[0.3], [-0.2]], "float32"), np.array([0.1], "float32")])


def weights(model):
    return [np.asarray(w, "float64").ravel().tolist() for w in model.get_weights()]


def keras_fit(strategy):
    x = tf.keras.utils.experimental.DatasetCreator(dataset_fn)

    with strategy.scope():
        model = tf.keras.models.Sequential([tf.keras.layers.Dense(1)])
        optimizer = tf.keras.optimizers.Adagrad(learning_rate=0.05)
        model.compile(optimizer, "mse")
        fixed_weights(model)

    h = model.fit(x, epochs=2, steps_per_epoch=3, verbose=0)
    return {"loss": [float(v) for v in h.history["loss"]], "weights": weights(model)}


def custom_loop(strategy):
    with strategy.scope():
        model = tf.keras.models.Sequential([tf.keras.layers.Dense(1)])
        optimizer = tf.keras.optimizers.Adagrad(learning_rate=0.05)
        fixed_weights(model)
        optimizer.build(model.trainable_variables)
    dist_dataset = strategy.distribute_datasets_from_function(dataset_fn)

    @tf.function
    def train_step(iterator):
        def step_fn(inputs):
            x, y = inputs
            with tf.GradientTape() as tape:
                per_example_loss = tf.reduce_sum(tf.square(model(x, training=True) - y), axis=-1)
                loss = tf.nn.compute_average_loss(per_example_loss, global_batch_size=64)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss
        return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(step_fn, args=(next(iterator),)), axis=None)

    iterator = iter(dist_dataset)
    losses = [float(train_step(iterator)) for _ in range(3)]
    return {"loss": losses, "weights": weights(model)}


def main():
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    task = json.loads(os.environ["TF_CONFIG"])["task"]
    result = {"replicas": strategy.num_replicas_in_sync, "fit": keras_fit(strategy), "ctl": custom_loop(strategy)}
    with open(os.path.join(OUT, f"worker{task['index']}.json"), "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
