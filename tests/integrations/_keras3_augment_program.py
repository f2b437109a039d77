"""Keras 3's (and md.keras's) random augmentation layers and seeded random draws over the batch in ``fit``: what each
replica's half of a global batch was given, on one device and on 2 replicas (logical CPUs).

Prints one JSON line: ``{case: {"one": [...], "two": [...], "halves": [...], "weights": [...], ...}}`` where
``one`` is the batches a recording layer saw on one device, ``two`` the same global batches put together from
the replicas' halves (replica 0's rows first), ``halves`` how far the two replicas' halves of each batch lie
apart (the halves hold the same images: 0 means correlated, the same draw on both replicas). Run in a fresh interpreter (it configures logical devices);
``KERAS3_RANDOM_OFF=1`` undoes multidev's global draws (to see what a replica draws by itself).
"""

from __future__ import annotations

import json
import os

os.environ.setdefault("KERAS_BACKEND", "torch")

import keras  # noqa: E402
import numpy as np  # noqa: E402

import multidev as md  # noqa: E402

L = keras.layers


class Recorder(L.Layer):
    """Keeps what it was given while training, per replica (the identity otherwise)."""

    def __init__(self, log, **kwargs):
        super().__init__(**kwargs)
        object.__setattr__(self, "log", log)   # not Keras's tracked copy of the dict

    def call(self, x, training=False):
        if training:
            replica = int(md.distribute.get_replica_context().replica_id_in_sync_group)
            self.log.setdefault(replica, []).append(keras.ops.convert_to_numpy(x).copy())
        return x


class Noise(L.Layer):
    """``keras.random.normal`` over the batch, with an int seed (stateless) or a layer's SeedGenerator."""

    def __init__(self, seed, **kwargs):
        super().__init__(**kwargs)
        self.seed = seed if isinstance(seed, int) else keras.random.SeedGenerator(3)

    def call(self, x, training=False):
        if not training:
            return x
        return x + keras.random.normal(keras.ops.shape(x), stddev=0.1, seed=self.seed)


class Sampling(L.Layer):
    """As a VAE's: noise from its SeedGenerator at every call (no ``training`` argument), evaluate and predict too."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.seed_generator = keras.random.SeedGenerator(1337)

    def call(self, x):
        return x + keras.random.normal(keras.ops.shape(x), stddev=0.1, seed=self.seed_generator)


def augmentation(seeded):
    """keras.io's image classification example's pipeline and the other per-image augmentations."""
    seeds = iter(range(1, 6)) if seeded else iter([None] * 5)
    return keras.Sequential([L.RandomFlip("horizontal", seed=next(seeds)), L.RandomRotation(0.1, seed=next(seeds)),
                             L.RandomZoom(0.2, seed=next(seeds)), L.RandomContrast(0.3, seed=next(seeds)),
                             L.RandomTranslation(0.1, 0.1, seed=next(seeds))])


def md_cases():
    """The same on md.keras (its RandomFlip/RandomRotation, md.keras.random with an int seed, Dropout)."""
    K = md.keras

    class MdRecorder(K.layers.Layer):
        def __init__(self, log, **kwargs):
            super().__init__(**kwargs)
            object.__setattr__(self, "log", log)

        def call(self, x, training=False):
            if training:
                replica = int(md.distribute.get_replica_context().replica_id_in_sync_group)
                self.log.setdefault(replica, []).append(x.detach().cpu().numpy().copy())
            return x

    class MdNoise(K.layers.Layer):
        def call(self, x, training=False):
            return x + K.random.normal(tuple(x.shape), stddev=0.1, seed=42) if training else x

    def pipeline(seeded):
        return K.Sequential([K.layers.RandomFlip("horizontal", seed=1 if seeded else None),
                             K.layers.RandomRotation(0.1, seed=2 if seeded else None)])

    return K, MdRecorder, {"md_augment_seeded": lambda: pipeline(True), "md_augment_unseeded": lambda: pipeline(False),
                           "md_normal_int_seed": MdNoise, "md_dropout": lambda: K.layers.Dropout(0.5),
                           "md_dropout_uneven": lambda: K.layers.Dropout(0.5)}


CASES = {
    "augment_seeded": lambda: augmentation(True),
    "augment_unseeded": lambda: augmentation(False),
    "flip_only": lambda: L.RandomFlip("horizontal"),
    "normal_int_seed": lambda: Noise(42),
    "normal_seed_generator": lambda: Noise("generator"),
    "augment_uneven": lambda: augmentation(True),
    "sampling_evaluate_predict": Sampling,
}


def run(case, strategy, x, y, front=None):
    K, recorder, cases = front or (keras, Recorder, CASES)
    log = {}
    K.utils.set_random_seed(0)
    with strategy.scope():
        model = K.Sequential([K.Input(x.shape[1:]), cases[case](), recorder(log), K.layers.Flatten(),
                              K.layers.Dense(2, activation="softmax")])
        model.compile(optimizer=K.optimizers.SGD(0.01), loss="sparse_categorical_crossentropy")
    uneven = case.endswith("_uneven")   # batches of 5 split [3, 2]; the last one (1 example) [1, 0]; one epoch
    history = model.fit(x, y, batch_size=5 if uneven else 8, epochs=1 if uneven else 2, shuffle=False, verbose=0)
    steps = log[0]   # a replica with an empty slice runs no forward pass: its log is shorter
    batches = [np.concatenate([log[r][i] for r in sorted(log) if i < len(log[r])]) for i in range(len(steps))]
    halves = ([] if uneven or len(log) < 2 else
              [float(np.abs(log[0][i] - log[1][i]).max()) for i in range(len(steps))])
    out = {"batches": [b.tolist() for b in batches], "halves": halves, "loss": history.history["loss"],
           "weights": [np.asarray(w).tolist() for w in model.get_weights()]}
    if case.startswith("sampling"):   # batches of 6 over 16 examples: slices [3, 3] and a last [2, 2]
        out["evaluate"] = model.evaluate(x, y, batch_size=6, verbose=0)
        out["predict"] = np.asarray(model.predict(x, batch_size=6, verbose=0)).tolist()
    return out


class _SynchronizedBatchNorm:
    """``keras`` for a program, except that its ``layers.BatchNormalization()`` is synchronized."""

    def __init__(self, module, layers=None):
        self._module, self._layers = module, layers

    def __getattr__(self, name):
        if name == "layers" and self._layers is None:
            return _SynchronizedBatchNorm(self._module.layers, layers=True)
        if name == "BatchNormalization" and self._layers:
            return lambda *args, **kwargs: self._module.BatchNormalization(*args, synchronized=True, **kwargs)
        return getattr(self._module, name)


def image_classification_program():
    """keras.io's image classification from scratch (tests/programs/keras/p15) on 2 replicas with synchronized
    BatchNormalization against one device, on Keras 3 and on md.keras: its augmentation inside the model is one
    device's."""
    from tests.programs.keras import _harness
    from tests.programs.keras import p15_image_classification_from_scratch as program

    def results(front, strategy):
        out = program.run(front, strategy, None)
        out.pop("_model")
        return {"ok": True, "results": _harness._flatten(out)}

    out = {}
    for name, front in (("keras3", keras), ("md", md.keras)):
        one = results(front, md.distribute.get_strategy())
        two = results(_SynchronizedBatchNorm(front), md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))
        equal, worst, first = _harness.compare(two, one)
        out[name] = {"equal": equal, "worst": worst, "differs_at": first}
    return out


def main():
    cpu = md.config.list_physical_devices("CPU")[0]
    md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * 2)
    rng = np.random.RandomState(0)
    images = rng.rand(8, 6, 6, 3).astype("float32")
    x = np.concatenate([images[:4], images[:4], images[4:], images[4:]])   # each batch's halves: the same images
    y = rng.randint(0, 2, 16)
    if os.environ.get("KERAS3_RANDOM_OFF"):
        from multidev.integrations import keras3, keras3_random
        keras3._patch(keras)
        module = __import__("keras.src.backend.torch.random", fromlist=["normal"])
        for name in keras3_random.DRAWS:
            setattr(module, name, getattr(module, name)._multidev_original)
    out = {}
    front = md_cases()
    for case in [*CASES, *front[2]]:
        chosen = front if case.startswith("md_") else None
        one = run(case, md.distribute.get_strategy(), x, y, chosen)
        two = run(case, md.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]), x, y, chosen)
        out[case] = {"one": one, "two": two}
    out["p15_synchronized_bn"] = image_classification_program()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
