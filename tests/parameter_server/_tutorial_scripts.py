"""TensorFlow's parameter-server tutorial (custom loop), ported: metrics on the ps, sharded embedding."""

TUTORIAL_METRICS = '''
import json, numpy as np, torch
import multidev as md, multidev.keras

torch.manual_seed(0)
P = md.distribute.experimental.partitioners
strategy = md.distribute.ParameterServerStrategy(
    md.distribute.cluster_resolver.TFConfigClusterResolver(),
    variable_partitioner=P.MinSizePartitioner(min_shard_bytes=256 << 10, max_shards=2))
coordinator = md.distribute.coordinator.ClusterCoordinator(strategy)

# The tutorial's data: 8 vocabulary ids; the label is 1 for ids 0-3.
rng = np.random.default_rng(0)
features = rng.integers(0, 8, size=(64, 1)).astype("int64")
labels = (features[:, 0] < 4).astype("int64")

with strategy.scope():
    emb_layer = md.keras.layers.Embedding(input_dim=8, output_dim=16384)
    model = md.keras.Sequential([md.keras.layers.Input(shape=(1,), dtype="int64"), emb_layer,
                                 md.keras.layers.Flatten(), md.keras.layers.Dense(1, activation="sigmoid")])
    optimizer = md.keras.optimizers.SGD(learning_rate=0.5)
    accuracy = md.keras.metrics.Accuracy()
    examples = md.keras.metrics.Sum()

shards = [{"shape": list(w.shape), "device": w.device} for w in emb_layer.weights]

def dataset_fn():
    return md.data.Dataset.from_tensor_slices((features, labels)).shuffle(64, seed=1).repeat().batch(16)

per_worker_iterator = iter(coordinator.create_per_worker_dataset(dataset_fn))

def step_fn(iterator):
    def replica_fn(batch_data, batch_labels):
        with md.GradientTape() as tape:
            pred = model(batch_data, training=True)[:, 0]
            loss = torch.nn.functional.binary_cross_entropy(pred, batch_labels.float())
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        accuracy.update_state(batch_labels, (pred > 0.5).long())
        examples.update_state(float(batch_labels.shape[0]))
        return loss
    batch_data, batch_labels = next(iterator)
    return strategy.run(replica_fn, args=(batch_data, batch_labels))

epoch_accuracy, epoch_counts, epoch_examples = [], [], []
for epoch in range(4):
    accuracy.reset_state()
    examples.reset_state()
    for _ in range(5):
        coordinator.schedule(step_fn, args=(per_worker_iterator,))
    coordinator.join()
    epoch_accuracy.append(float(accuracy.result().numpy()))
    epoch_counts.append(float(accuracy.count.numpy()))
    epoch_examples.append(float(examples.result().numpy()))

# The tutorial's distributed evaluation: 16 examples in batches of 8, two scheduled steps.
with strategy.scope():
    eval_accuracy = md.keras.metrics.Accuracy()

def eval_dataset_fn():
    return md.data.Dataset.from_tensor_slices((features[:16], labels[:16])).repeat().batch(8)

per_worker_eval_iterator = iter(coordinator.create_per_worker_dataset(eval_dataset_fn))

def eval_step(iterator):
    def replica_fn(batch_data, batch_labels):
        pred = model(batch_data, training=False)[:, 0]
        eval_accuracy.update_state(batch_labels, (pred > 0.5).long())
    batch_data, batch_labels = next(iterator)
    strategy.run(replica_fn, args=(batch_data, batch_labels))

for _ in range(2):
    coordinator.schedule(eval_step, args=(per_worker_eval_iterator,))
coordinator.join()
with torch.no_grad():
    local = ((model(torch.from_numpy(features[:16]))[:, 0] > 0.5).long() == torch.from_numpy(labels[:16])).float()
# set_weights through the listed shards reaches the ps (a worker reads the new rows)
emb_layer.set_weights([np.full((4, 16384), 0.5, "float32"), np.full((4, 16384), -0.5, "float32")])
rows = coordinator.schedule(lambda: emb_layer.embeddings[[0, 7], :2].clone()).fetch()
print("RESULT", json.dumps({
    "got_weights": [list(w.shape) for w in emb_layer.get_weights()], "rows_after_set": rows.tolist(),
    "shards": shards, "num_weights": len(emb_layer.weights), "count_params": emb_layer.count_params(),
    "epoch_accuracy": epoch_accuracy, "epoch_counts": epoch_counts, "epoch_examples": epoch_examples,
    "eval_accuracy": float(eval_accuracy.result()), "eval_count": float(eval_accuracy.count.numpy()),
    "eval_total": float(eval_accuracy.total.numpy()), "local_correct": float(local.sum()),
    "metric_on_ps": type(accuracy.total).__name__}), flush=True)
'''
