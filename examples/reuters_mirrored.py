"""Seed 002, "Model Training Using Multiple GPUs": the Reuters Conv1D classifier, fit under MirroredStrategy.

The two added lines are the point: ``strategy = md.distribute.MirroredStrategy()`` and
``with strategy.scope():`` around building and compiling the model. The seed splits one GPU into
two logical GPUs; without a GPU this splits the CPU into two logical CPUs instead.

multidev never downloads. Give it Keras's ``reuters.npz`` (pickle-free layout ``x_flat``,
``x_offsets``, ``y``; convert Keras's own file once with ``md.keras.datasets.reuters.save_safe_npz``):

    python examples/reuters_mirrored.py --data ~/.keras/datasets/reuters.npz
    python examples/reuters_mirrored.py                  # no file: synthetic data of the same shapes
    python examples/reuters_mirrored.py --epochs 1 --limit 500
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import multidev as md

MAX_LEN = 300
BATCH_SIZE = 32
# Shapes of the real data set, for the synthetic stand-in: 8,982 + 2,246 newswires, 46 topics,
# word ids up to 30,981 after Keras's index_from=3 shift.
N_TRAIN, N_TEST, N_CLASSES, N_WORDS = 8982, 2246, 46, 30982


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", metavar="PATH",
                        help="reuters.npz (default: ~/.keras/datasets/reuters.npz if present)")
    parser.add_argument("--epochs", type=int, default=10, help="training epochs (10, as in the seed)")
    parser.add_argument("--limit", type=int, metavar="N", help="use only the first N training and N/4 test examples")
    parser.add_argument("--devices", type=int, default=2, metavar="N", help="logical devices to split into (2)")
    args = parser.parse_args(argv)
    for name in ("epochs", "limit", "devices"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name} must be >= 1, got {value}")
    return args


def simulate_devices(n):
    """Simulate ``n`` logical GPUs with one physical GPU, or ``n`` logical CPUs without a GPU."""
    gpus = md.config.list_physical_devices("GPU")
    if gpus:
        config = [md.config.LogicalDeviceConfiguration(memory_limit=1024)] * n
        md.config.set_logical_device_configuration(gpus[0], config)
        print(len(gpus), "Physical GPU,", len(md.config.list_logical_devices("GPU")), "Logical GPUs")
    else:
        cpu = md.config.list_physical_devices("CPU")[0]
        md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * n)
        print("No GPU: 1 Physical CPU,", len(md.config.list_logical_devices("CPU")), "Logical CPUs")
    return gpus


def synthetic_reuters(seed=113):
    """Word-id sequences and labels shaped like Reuters; each topic has its own frequent words, so it is learnable."""
    rng = np.random.RandomState(seed)
    topic_words = rng.randint(4, N_WORDS, size=(N_CLASSES, 20))

    def make(n):
        labels = rng.randint(0, N_CLASSES, size=n)
        seqs = []
        for label in labels:
            length = rng.randint(20, 400)
            words = rng.randint(4, N_WORDS, size=length)
            hits = rng.rand(length) < 0.2
            words[hits] = rng.choice(topic_words[label], size=hits.sum())
            seqs.append([1] + words.tolist())
        seqs[0][1] = N_WORDS - 1          # x.max() + 1 == N_WORDS, as with the real file
        return np.array(seqs, dtype=object), labels.astype(np.int64)

    return make(N_TRAIN), make(N_TEST)


def load(path):
    """Real data from ``path`` (or Keras's cache location), else the synthetic stand-in with a clear message."""
    try:
        return md.keras.datasets.reuters.load_data(path=path or "reuters.npz")
    except FileNotFoundError as err:
        if path:        # asked for a file that is not there: an error, not a silent fallback
            raise
        print(f"Reuters data not found: {err}\nUsing SYNTHETIC data of the same shapes instead "
              "(accuracies below are not Reuters results); pass --data path/to/reuters.npz for the real data.")
        return synthetic_reuters()


def create_model(max_words, cat_num):
    models, layers = md.keras.models, md.keras.layers
    model = models.Sequential()
    model.add(layers.Embedding(max_words, 7, input_length=MAX_LEN))
    model.add(layers.Conv1D(filters=64, kernel_size=5, activation="relu"))
    model.add(layers.MaxPool1D(2))
    model.add(layers.Conv1D(filters=32, kernel_size=3, activation="relu"))
    model.add(layers.MaxPool1D(2))
    model.add(layers.Flatten())
    model.add(layers.Dense(cat_num, activation="softmax"))
    return model


def compile_model(model):
    model.compile(optimizer=md.keras.optimizers.Nadam(),
                  loss=md.keras.losses.SparseCategoricalCrossentropy(),
                  metrics=[md.keras.metrics.SparseCategoricalAccuracy(),
                           md.keras.metrics.SparseTopKCategoricalAccuracy(5)])
    return model


def main(argv=None):
    args = parse_args(argv)
    simulate_devices(args.devices)
    try:
        (x_train, y_train), (x_test, y_test) = load(args.data)
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2

    # 1. Data preparation
    pad = md.keras.preprocessing.sequence.pad_sequences
    x_train, x_test = pad(x_train, maxlen=MAX_LEN), pad(x_test, maxlen=MAX_LEN)
    max_words = x_train.max() + 1       # the seed's MAX_WORDS, CAT_NUM (numpy integers, as Keras 2 takes them)
    cat_num = y_train.max() + 1
    if args.limit:      # a quick run on a subset; the model keeps the full data's shapes
        x_train, y_train = x_train[:args.limit], y_train[:args.limit]
        x_test, y_test = x_test[:max(args.limit // 4, 1)], y_test[:max(args.limit // 4, 1)]
    Dataset = md.data.Dataset
    ds_train = Dataset.from_tensor_slices((x_train, y_train)).shuffle(buffer_size=1000).batch(BATCH_SIZE) \
        .prefetch(md.data.experimental.AUTOTUNE).cache()
    ds_test = Dataset.from_tensor_slices((x_test, y_test)).shuffle(buffer_size=1000).batch(BATCH_SIZE) \
        .prefetch(md.data.experimental.AUTOTUNE).cache()

    # 2-3. Model definition and training: the two added lines
    strategy = md.distribute.MirroredStrategy()
    with strategy.scope():
        model = create_model(max_words, cat_num)
        model.summary()                 # built by Embedding's input_length, as in the seed
        model = compile_model(model)
    history = model.fit(ds_train, validation_data=ds_test, epochs=args.epochs)
    final = history.history["val_sparse_categorical_accuracy"][-1]
    print(f"final val_sparse_categorical_accuracy: {final:.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
