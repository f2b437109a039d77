"""Seed 004, "Distributed training in TensorFlow" (a Colab notebook): its code cells In[1]..In[13], ported
mechanically (``tf.`` -> ``md.``, TensorFlow tensors -> torch: ``tf.range`` -> ``torch.arange``,
``tf.newaxis`` -> ``None``), nothing else changed. Its TPU section is not ported (tests/seeds/test_seed_004.py).
"""

CELLS = [
    ("In[1]", r'''import multidev as md
import torch  # the port's tensors (tf.range -> torch.arange)
from tqdm.notebook import tqdm

print("TensorFlow version:", md.__version__)
'''),
    ("In[2]", r'''strategy = md.distribute.MirroredStrategy(devices=["/CPU:0", "/GPU:0"])
'''),
    ("In[3]", r'''print("Number of replicas in strategy:", strategy.num_replicas_in_sync) # should be 2
'''),
    ("In[4]", r'''class MyClass:
    def __init__(self):
        self.weight = md.Variable(3.14, dtype=md.float32)

# Non-replicated instantiation of MyClass
nonrep = MyClass()
print("nonrep.weight:", nonrep.weight)
print()

with strategy.scope():
    # Replicated instantiation of MyClass
    rep = MyClass()
print("rep.weight:", rep.weight)
'''),
    ("In[5]", r'''@md.function
def add(a, b):
    return a + b

res = strategy.run(add, args=(md.constant([[1, 2]]), md.constant([[3, 4]])))
print(res)
'''),
    ("In[6]", r'''print("strategy.experimental_local_results:")
print(strategy.experimental_local_results(res))
print()

print("strategy.gather:")
print(strategy.gather(res, axis=0))
print()

print("strategy.reduce:")
print(strategy.reduce("SUM", res, axis=0))
'''),
    ("In[7]", r'''ds = md.data.Dataset.from_tensor_slices(torch.arange(16)).batch(4)
dds = strategy.experimental_distribute_dataset(ds)

@md.function
def return_batch(batch):
    """No-op: just returns the batch as-is"""
    return {"replica": md.distribute.get_replica_context().replica_id_in_sync_group, "batch": batch, }

def dataset_distribution_experiment(dataset):
    for idx, batch in enumerate(dataset):
        print("Global batch #:", idx)
        results = strategy.experimental_local_results(strategy.run(return_batch, args=(batch,)))
        print("Results:", [{k: v.numpy() for k, v in d.items()} for d in results])
        print("")

print("Original dataset (not sharded):")
print("===============================")
dataset_distribution_experiment(ds)
print()
print()
print("Distributed dataset:")
print("====================")
dataset_distribution_experiment(dds)
'''),
    ("In[8]", r'''class RunningSum:
    def __init__(self, aggregation):
        self.result = md.Variable(0, dtype=md.int32, aggregation=aggregation)

    @md.function
    def update(self, value):
        self.result.assign_add(md.reduce_sum(value))

def assignment_experiment(aggregation, strategy, dataset):
    with strategy.scope():
        rs = RunningSum(aggregation)
    for val in dataset:
        strategy.run(rs.update, args=(val,))
    return rs.result

print(
    "Per replica variables diverge without aggregation (as each device "
    "only updates according to the values it sees):"
)
print(assignment_experiment(md.VariableAggregation.NONE, strategy, dds))
print()
print(
    "But setting aggregation to SUM keeps the variables in sync and yields "
    "the correct result for the sum of the dataset (i.e. 120):"
)
print(assignment_experiment(md.VariableAggregation.SUM, strategy, dds))
'''),
    ("In[9]", r'''# Create training data
X = torch.arange(0, 20, dtype=md.float32)[:, None]
y = 2. * X + 3
train = md.data.Dataset.from_tensor_slices((X, y))

# Distribute dataset
EPOCHS = 100
PER_REPLICA_BATCH_SIZE = 2
GLOBAL_BATCH_SIZE = PER_REPLICA_BATCH_SIZE * strategy.num_replicas_in_sync
STEPS_PER_EPOCH = len(train) // GLOBAL_BATCH_SIZE
dist_train = strategy.experimental_distribute_dataset(
    train.batch(GLOBAL_BATCH_SIZE).repeat(EPOCHS)
)

# Create model in cross-replica scope and fit, otherwise as usual
def create_and_compile_model():
    model = md.keras.models.Sequential(
        [md.keras.layers.Dense(1, input_shape=(1,))]
    )
    loss = md.keras.losses.MeanSquaredError()
    optimizer = md.keras.optimizers.Adam(learning_rate=0.1)
    metrics = [md.keras.metrics.mean_absolute_error]
    model.compile(
        loss=loss, optimizer=optimizer, metrics=metrics
    )
    return model

with strategy.scope():
    model = create_and_compile_model()
    history = model.fit(
        dist_train,
        steps_per_epoch=STEPS_PER_EPOCH,
        epochs=EPOCHS,
        verbose=0,
    )

print(
    "Training complete, final loss {:.6f}.".format(history.history["loss"][-1])
)
'''),
    ("In[10]", r'''print(model.layers[0].kernel)
'''),
    ("In[11]", r'''print(model.get_weights())
'''),
    ("In[12]", r'''# Save original model
model.save_weights("ckpt")

# Create new (unreplicated model)
nonrep_model = create_and_compile_model()
nonrep_model.load_weights("ckpt")

# Check model performance
perf = nonrep_model.evaluate(train.batch(GLOBAL_BATCH_SIZE))
print("Loaded model loss: {:.6f}".format(perf[0]))
'''),
    ("In[13]", r'''pe_loss = md.keras.losses.MeanSquaredError(reduction=md.keras.losses.Reduction.NONE)

def compute_loss(labels, predictions):
    per_example_loss = pe_loss(labels,predictions)
    return md.nn.compute_average_loss(
        per_example_loss, global_batch_size=GLOBAL_BATCH_SIZE
    )

@md.function
def train_step(inputs, model):
    features, labels = inputs
    with md.GradientTape() as tape:
        predictions = model(features, training=True)
        loss = compute_loss(labels, predictions)
    gradients = tape.gradient(loss, model.trainable_variables)
    model.optimizer.apply_gradients(zip(gradients, model.trainable_variables))
    return loss

def distributed_train_step(dist_inputs, model, strategy):
    per_replica_losses = strategy.run(train_step, args=(dist_inputs, model))
    return strategy.reduce("SUM", per_replica_losses, axis=None)

def distributed_train(dist_inputs, model, strategy, steps_per_epoch, epochs):
    for epoch in tqdm(range(epochs)):
        iterator = iter(dist_inputs)
        for step in range(steps_per_epoch):
            batch = next(iterator)
            distributed_train_step(batch, model, strategy)

with strategy.scope():
    cust_train_model = create_and_compile_model()
distributed_train(dist_train, cust_train_model, strategy, STEPS_PER_EPOCH, EPOCHS)
perf = cust_train_model.evaluate(dist_train, steps=STEPS_PER_EPOCH)
print("Model trained, loss: {:.6f}".format(perf[0]))
'''),
]
