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

# The tutorial's custom loop (its model, RMSprop(0.1), loss with the L2 term) on ONE worker, whose
# steps then run in order: it must equal the same steps run locally, without parameter servers, from
# the same initial weights (no stale reads, lost pushes, misplaced shards or optimizer slots on the ps).
TUTORIAL_ONE_WORKER = '''
import json, random, numpy as np, torch
import multidev as md

md.random.set_seed(0)
P = md.distribute.experimental.partitioners
strategy = md.distribute.ParameterServerStrategy(
    md.distribute.cluster_resolver.TFConfigClusterResolver(),
    variable_partitioner=P.MinSizePartitioner(min_shard_bytes=256 << 10, max_shards=2))
coordinator = md.distribute.coordinator.ClusterCoordinator(strategy)

vocab = ["avenger", "ironman", "batman", "hulk", "spiderman", "kingkong", "wonder_woman"]
rng = random.Random(0)
rows = [rng.sample(vocab, 3) for _ in range(200)]
features = np.array([[vocab.index(w) + 1 for w in r] for r in rows], "int64")     # id 0: out of vocabulary
labels = np.array([[0 if "avenger" in r else 1] for r in rows], "int64")         # "yes" is id 0

def build():
    layers = md.keras.layers
    model_input = layers.Input(shape=(3,), dtype="int64")
    emb_layer = layers.Embedding(input_dim=8, output_dim=16384)
    emb_output = layers.GlobalAveragePooling1D()(emb_layer(model_input))
    dense = layers.Dense(units=1, activation="sigmoid", kernel_regularizer=md.keras.regularizers.L2(1e-4))
    return md.keras.Model(model_input, dense(emb_output)), emb_layer, dense, md.keras.optimizers.RMSprop(0.1)

def train_step(model, optimizer, batch_data, batch_labels):
    with md.GradientTape() as tape:
        pred = model(batch_data, training=True)
        per_example_loss = md.keras.losses.BinaryCrossentropy(
            reduction=md.keras.losses.Reduction.NONE)(batch_labels, pred)
        loss = md.nn.compute_average_loss(per_example_loss)
        model_losses = model.losses
        if model_losses:
            loss += md.nn.scale_regularization_loss(md.add_n(model_losses))
    gradients = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(gradients, model.trainable_variables))
    return loss

with strategy.scope():
    model, emb_layer, dense, optimizer = build()
local_model, local_emb, local_dense, local_optimizer = build()
with torch.no_grad():
    for mine, theirs in ((local_emb.embeddings, emb_layer.embeddings), (local_dense.kernel, dense.kernel),
                         (local_dense.bias, dense.bias)):
        mine.copy_(theirs.read_value())

def dataset_fn():
    return md.data.Dataset.from_tensor_slices((features, labels)).batch(32).repeat()

@md.function
def step_fn(iterator):
    batch_data, batch_labels = next(iterator)
    losses = strategy.run(lambda x, y: train_step(model, optimizer, x, y), args=(batch_data, batch_labels))
    return strategy.reduce(md.distribute.ReduceOp.SUM, losses, axis=None)

per_worker_iterator = iter(coordinator.create_per_worker_dataset(dataset_fn))
results = [coordinator.schedule(step_fn, args=(per_worker_iterator,)) for _ in range(20)]
coordinator.join()
local_iterator = iter(dataset_fn())
local_losses = [float(train_step(local_model, local_optimizer, *next(local_iterator)).detach()) for _ in range(20)]
final = [emb_layer.embeddings.read_value(), dense.kernel.read_value(), dense.bias.read_value()]
local_final = [local_emb.embeddings, local_dense.kernel, local_dense.bias]
print("RESULT", json.dumps({
    "ps_losses": [float(r.fetch()) for r in results], "local_losses": local_losses,
    "max_weight_diff": max(float((a - b).abs().max()) for a, b in zip(final, local_final)),
    "shards": [list(w.shape) for w in emb_layer.weights]}), flush=True)
'''
