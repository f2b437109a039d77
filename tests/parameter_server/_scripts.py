"""Scripts every task of a test cluster runs (workers and ps serve inside the strategy constructor)."""

REGRESSION = '''
import json, os, sys, torch
import multidev as md
from multidev.distribute.parameter_server import rpc_layer

torch.manual_seed(0)
resolver = md.distribute.cluster_resolver.TFConfigClusterResolver()
strategy = md.distribute.ParameterServerStrategy(resolver)      # workers and ps serve here, then exit
coordinator = md.distribute.coordinator.ClusterCoordinator(strategy)

X = torch.randn(512, 8)
Y = X @ torch.randn(8, 1) + 0.5 + 0.01 * torch.randn(512, 1)
STEPS, LR, BATCH = int(os.environ.get("STEPS", "240")), 0.05, 32

def full_loss(model):
    with torch.no_grad():
        return torch.nn.functional.mse_loss(model(X), Y).item()

def sync_baseline():
    """The same problem trained synchronously in one process, same steps and batch size."""
    torch.manual_seed(1)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    g = torch.Generator().manual_seed(7)
    for _ in range(STEPS):
        idx = torch.randint(0, 512, (BATCH,), generator=g)
        loss = torch.nn.functional.mse_loss(model(X[idx]), Y[idx])
        opt.zero_grad(); loss.backward(); opt.step()
    return full_loss(model)

torch.manual_seed(1)
with strategy.scope():
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=LR)

def dataset_fn():
    g = torch.Generator().manual_seed(7 + torch.initial_seed() % 1000)
    def batches():
        while True:
            idx = torch.randint(0, 512, (BATCH,), generator=g)
            yield X[idx], Y[idx]
    return batches()

iterator = iter(coordinator.create_per_worker_dataset(dataset_fn))

def train_step(iterator):
    x, y = next(iterator)
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    return loss

initial = full_loss(model)
results = []
for step in range(STEPS):
    results.append(coordinator.schedule(train_step, args=(iterator,)))
    if step == STEPS // 3 and os.environ.get("KILL_WORKER"):
        results[0].fetch()
        rpc_layer.call_async("worker:" + os.environ["KILL_WORKER"], os._exit, (3,))
coordinator.join()
values = [float(r.fetch()) for r in results]
print("RESULT", json.dumps({"initial": initial, "final": full_loss(model), "sync_final": sync_baseline(),
                            "steps_done": len(values), "weight": model.weight.numpy().tolist()}))
'''

SHARDED_KERAS = '''
import json, numpy as np, torch
import multidev as md, multidev.keras

P = md.distribute.experimental.partitioners
strategy = md.distribute.ParameterServerStrategy(md.distribute.cluster_resolver.TFConfigClusterResolver(),
                                                 variable_partitioner=P.FixedShardsPartitioner(2))
rng = np.random.default_rng(0)
x = rng.integers(0, 40, size=(512, 6)).astype("int64")
y = (x[:, 0] >= 20).astype("int64")          # the label is in the first token's embedding
with strategy.scope():
    model = md.keras.Sequential([md.keras.layers.Embedding(40, 8), md.keras.layers.Flatten(),
                                 md.keras.layers.Dense(2, activation="softmax")])
    model.build((None, 6))
    model.compile(optimizer=md.keras.optimizers.Adam(0.02), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
table = model.layers[0].embeddings           # the whole ShardedVariable (.weights lists its shards)
before = table.read_value().clone()

def dataset_fn(input_context):
    ds = md.data.Dataset.from_tensor_slices((x, y)).shuffle(512, seed=input_context.input_pipeline_id)
    return ds.repeat().batch(32)

import tempfile
backup = md.keras.callbacks.BackupAndRestore(tempfile.mkdtemp())
history = model.fit(md.keras.utils.experimental.DatasetCreator(dataset_fn), epochs=4, steps_per_epoch=25, verbose=0,
                    callbacks=[backup])
after = table.read_value()
rows_changed = (after - before).abs().sum(1) > 0
# an embedding lookup on the coordinator gathers rows from both shards
ids = torch.tensor([[1, 38]])
lookup = torch.nn.functional.embedding(ids, table)[0]
# md.Variable in scope: on the ps tasks round-robin, read and written remotely
with strategy.scope():
    counters = [md.Variable(float(i)) for i in range(3)]
counters[0].assign_add(2.0)
coordinator = md.distribute.coordinator.ClusterCoordinator(strategy)

def bump():
    counters[1].assign_add(10.0)
    return counters[1].read_value()

bumped = coordinator.schedule(bump).fetch()

def fails():
    raise ValueError("bad batch on purpose")

def exhausts(iterator):
    return next(iterator)

error = None
try:
    coordinator.schedule(fails)
    coordinator.join()
except ValueError as err:
    error = str(err) + " | " + " ".join(getattr(err, "__notes__", []))
short = iter(coordinator.create_per_worker_dataset(lambda: iter([1])))
outcomes = [coordinator.schedule(exhausts, args=(short,)) for _ in range(4)]
try:
    coordinator.join()
    out_of_range = None
except md.errors.OutOfRangeError as err:
    out_of_range = str(err)
with strategy.scope():
    local_model = torch.nn.Linear(2, 1)
    local_opt = torch.optim.SGD(local_model.parameters(), lr=0.1)

def creates_variables_on_the_worker():
    extra = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(list(local_model.parameters()) + list(extra.parameters()), lr=0.1)
    (local_model(torch.ones(1, 2)) + extra(torch.ones(1, 2))).sum().backward()
    opt.step()

try:
    coordinator.schedule(creates_variables_on_the_worker)
    coordinator.join()
    mixed = None
except ValueError as err:
    mixed = str(err)
print("RESULT", json.dumps({
    "counter_ps": [v.ps_tasks[0] for v in counters], "counter0": float(counters[0].numpy()),
    "bumped": float(bumped), "counter1": float(counters[1].numpy()),
    "error": error, "out_of_range": out_of_range, "mixed": mixed,
    "after_error_ok": float(coordinator.schedule(bump).fetch()),
    "type": type(table).__name__, "shards": [list(v.shape) for v in table.variables],
    "shard_ps": [v.ps_tasks[0] for v in table.variables], "loss": history.history["loss"],
    "metric_state": sorted({type(v).__name__ for m in model.metrics for v in m.variables}),
    "fit_accuracy": history.history["accuracy"],
    "weights_listed": [list(w.shape) for w in model.layers[0].weights],
    "accuracy": model.evaluate(x, y, verbose=0)[1], "changed_rows_per_shard": [int(rows_changed[:20].sum()), int(rows_changed[20:].sum())],
    "lookup_matches": bool(torch.equal(lookup, torch.stack([after[1], after[38]]))),
    "shard_values_match": bool(torch.equal(torch.cat([v.read_value() for v in table.variables]), after))}))
'''

CHECKPOINTED = '''
import json, os, sys, torch
import multidev as md, multidev.keras
from multidev.distribute.parameter_server import rpc_layer

resolver = md.distribute.cluster_resolver.TFConfigClusterResolver()
strategy = md.distribute.ParameterServerStrategy(resolver)
coordinator = md.distribute.coordinator.ClusterCoordinator(strategy)
torch.manual_seed(0)
X = torch.randn(256, 4)
Y = X @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]])
torch.manual_seed(1)
with strategy.scope():
    model = torch.nn.Linear(4, 1)
    opt = md.keras.optimizers.Adam(learning_rate=0.05)      # builds its torch.optim.Adam on the workers
ckpt = md.distribute.experimental.ParameterServerCheckpoint(strategy, os.environ["CKPT_DIR"])

def loss_now():
    with torch.no_grad():
        return torch.nn.functional.mse_loss(model(X), Y).item()

def train_step(i):
    """TensorFlow's style: strategy.run of a replica function with a GradientTape, then reduce."""
    def replica_fn(idx):
        with md.GradientTape() as tape:
            loss = torch.nn.functional.mse_loss(model(X[idx]), Y[idx])
        params = list(model.parameters())
        opt.apply_gradients(zip(tape.gradient(loss, params), params))
        return loss
    idx = torch.randint(0, 256, (32,), generator=torch.Generator().manual_seed(i))
    return strategy.reduce("SUM", strategy.run(replica_fn, args=(idx,)), axis=None)

start = ckpt.restore() or 0
out = {"start": start, "loss_at_start": loss_now()}
step = start
for step in range(start, start + 60):
    coordinator.schedule(train_step, args=(step,))
coordinator.join()
ckpt.save(step + 1)
out["saved_step"], out["loss_at_save"] = step + 1, loss_now()
if os.environ.get("KILL_PS"):
    rpc_layer.call_async("ps:0", os._exit, (3,))
    try:
        for i in range(50):
            coordinator.schedule(train_step, args=(i,))
        coordinator.join()
        out["error"] = None
    except md.errors.UnavailableError as err:
        out["error"] = str(err)
print("RESULT", json.dumps(out), flush=True)
os._exit(0) if os.environ.get("KILL_PS") else None
'''
