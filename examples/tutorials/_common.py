"""Shared bits of the ported tutorials: logical CPUs, the tutorials' image data sets, small models.

The tutorials read MNIST / Fashion-MNIST from Keras's cache (``$KERAS_HOME/datasets/mnist.npz``,
default ``~/.keras/datasets``), as TensorFlow's ``tf.keras.datasets`` loaders do, and never download.
When the file is missing they say so and use SYNTHETIC images of the same shape: ten classes, each a
bright square at its own place on a noisy background, so that the tiny models learn in a few steps.
"""

from __future__ import annotations

import os

import numpy as np

import multidev as md


def use_logical_cpus(count: int = 2) -> None:
    """Split the one physical CPU into ``count`` logical devices (before anything initializes)."""
    count = int(os.environ.get("MULTIDEV_LOGICAL_CPUS", count))
    cpu = md.config.list_physical_devices("CPU")[0]
    md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * count)
    print(f"{len(md.config.list_logical_devices('CPU'))} logical CPUs", flush=True)


def synthetic_images(count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``count`` uint8 28x28 images and int labels 0-9: class k is a bright 6x6 square at spot k.

    One label in five is then replaced by a random one, so that accuracy stays below 100%.
    """
    rng = np.random.RandomState(seed)
    labels = rng.randint(0, 10, size=count).astype("uint8")
    images = rng.randint(0, 80, size=(count, 28, 28)).astype("uint8")
    for i, k in enumerate(labels):
        row, col = 2 + 9 * (k // 4), 1 + 7 * (k % 4)
        images[i, row:row + 6, col:col + 6] = 255
    noisy = rng.rand(count) < 0.2
    labels[noisy] = rng.randint(0, 10, size=int(noisy.sum()))
    return images, labels


def load_images(name: str, train: int, test: int) -> tuple[tuple, tuple]:
    """``(x_train, y_train), (x_test, y_test)``: the first ``train``/``test`` examples, as float32 in [0, 1].

    ``name`` is ``"mnist"`` or ``"fashion_mnist"`` (``md.keras.datasets``); images get a channel axis.
    """
    try:
        (x_train, y_train), (x_test, y_test) = getattr(md.keras.datasets, name).load_data()
        print(f"Loaded {name} from the Keras cache: {len(x_train)} train / {len(x_test)} test images; "
              f"using {train} / {test}", flush=True)
    except FileNotFoundError as err:
        print(f"{name} data not found ({str(err).split(' (')[0]}). Using SYNTHETIC data of the same shapes.",
              flush=True)
        x_train, y_train = synthetic_images(train, seed=1)
        x_test, y_test = synthetic_images(test, seed=2)

    def prepare(x, y, n):
        return (x[:n, ..., None] / np.float32(255)).astype("float32"), y[:n].astype("int64")

    return prepare(x_train, y_train, train), prepare(x_test, y_test, test)


def conv_model(regularizer=None) -> "md.keras.Sequential":
    """The tutorials' convolutional classifier, made small: conv, pool, dense, 10 logits."""
    layers = md.keras.layers
    return md.keras.Sequential([
        layers.Input(shape=(28, 28, 1)),
        layers.Conv2D(8, 3, activation="relu", kernel_regularizer=regularizer),
        layers.MaxPooling2D(),
        layers.Flatten(),
        layers.Dense(32, activation="relu", kernel_regularizer=regularizer),
        layers.Dense(10, kernel_regularizer=regularizer),
    ])
