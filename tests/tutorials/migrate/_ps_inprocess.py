"""guide/migrate/multi_worker_cpu_gpu_training's ParameterServerStrategy part, typed as printed: an
in-process cluster (``tf.distribute.Server`` for 3 workers and 2 parameter servers in the coordinator's
process), ``DatasetCreator(dataset_fn)`` and ``fit(x, epochs=5, steps_per_epoch=10)``.

Substitutions: ``portpicker`` (not installed) -> a loopback port picker; ``tf.compat.v1.ConfigProto()``
-> ``None`` (multidev has no tf.compat; it says so); ``epochs=5, steps_per_epoch=10`` -> 2 and 3.
Asynchronous training with ``shuffle(10)``: what is compared is that it trains (steps, history).
``python _ps_inprocess.py tf|md`` prints one JSON line.
"""

import json
import os
import socket
import sys

if sys.argv[1] == "tf":
    import tensorflow as tf
else:
    import multidev as tf

features = [[1., 1.5], [2., 2.5], [3., 3.5]]
labels = [[0.3], [0.5], [0.7]]
eval_features = [[4., 4.5], [5., 5.5], [6., 6.5]]
eval_labels = [[0.8], [0.9], [1.]]


def pick_unused_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def main():
    chief_port = pick_unused_port()
    worker_ports = [pick_unused_port() for _ in range(3)]
    ps_ports = [pick_unused_port() for _ in range(2)]

    # Dump the cluster information to `TF_CONFIG`.
    tf_config = {
        'cluster': {
            'chief': ["localhost:%s" % chief_port],
            'worker': ["localhost:%s" % port for port in worker_ports],
            'ps': ["localhost:%s" % port for port in ps_ports],
        },
        'task': {'type': 'chief', 'index': 0}
    }
    os.environ['TF_CONFIG'] = json.dumps(tf_config)

    # Use a cluster resolver to bridge the info to the strategy created below.
    cluster_resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()

    worker_config = None
    for i in range(3):
        tf.distribute.Server(
            cluster_resolver.cluster_spec(),
            job_name="worker",
            task_index=i,
            config=worker_config)

    for i in range(2):
        tf.distribute.Server(
            cluster_resolver.cluster_spec(),
            job_name="ps",
            task_index=i)

    strategy = tf.distribute.experimental.ParameterServerStrategy(cluster_resolver)

    def dataset_fn(input_context):
        batch_size = input_context.get_per_replica_batch_size(global_batch_size=64)
        dataset = tf.data.Dataset.from_tensor_slices(
            (features, labels)).shuffle(10).repeat()
        dataset = dataset.shard(
            input_context.num_input_pipelines, input_context.input_pipeline_id)
        return dataset.batch(batch_size).prefetch(2)

    x = tf.keras.utils.experimental.DatasetCreator(dataset_fn)

    with strategy.scope():
        model = tf.keras.models.Sequential([tf.keras.layers.Dense(1)])
        optimizer = tf.keras.optimizers.Adagrad(learning_rate=0.05)
        model.compile(optimizer, "mse")

    h = model.fit(x, epochs=2, steps_per_epoch=3, verbose=0)
    print(json.dumps({"history": {k: len(v) for k, v in h.history.items()},
                      "finite": all(v == v for vs in h.history.values() for v in vs),
                      "iterations": int(model.optimizer.iterations.numpy())}))


if __name__ == "__main__":
    main()
