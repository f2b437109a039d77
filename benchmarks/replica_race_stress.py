"""Stress test of every update path against replica races (issue 24, item 1): N replicas == one device.

Each path trains a small float64 model for ``--steps`` steps on 2 and 3 logical-CPU replicas with
random sleeps injected between the forward pass, the loss, the backward pass and the update, and with
the in-place idioms of TensorFlow's tutorials in the loss (``loss += penalty``, ``loss *= c``). Two
checks catch a write into a replica's copy at the wrong time:

* by value, inside the step: each replica snapshots its own copies when its forward starts and checks
  them just before its update, after the sleeps; a copy that changed in between was written by
  another replica while this replica could still read it (torch's version counter only catches a
  tensor autograd saved, not one the step read and let go);
* against one device: after the last step every replica's copy must equal the same model trained on
  the global batches without a strategy (float64; only the summation order of gradients differs).

The paths: md.keras (lazily built model, as TensorFlow's custom-training tutorial writes it; Adam on
the split update; SGD with ``clipnorm`` on the sum-then-clip path), torch.optim (Adam: split update;
a subclass of SGD: bucketed all-reduce; Adam on CentralStorageStrategy: shared storage) and Keras 3
(Keras's Adam through ``optimizer.apply``). The suite runs a short version
(``tests/distribute/test_replica_race.py``); the long one is

    OMP_NUM_THREADS=1 python benchmarks/replica_race_stress.py --steps 300
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import threading
import time

import torch

import multidev as md

FEATURES, CLASSES, GLOBAL_BATCH = 6, 3, 12     # 12 splits evenly over 2 and 3 replicas
# Adam turns a gradient's rounding error (1e-16 absolute, from summing replicas' halves in another order)
# into up to lr / epsilon = 1e5 times more where a gradient is near 0; a race (a lost, doubled or stale
# update) moves a weight by about the learning rate (1e-2).
TOLERANCE = 1e-7
STEPS_PER_RUN = 2


class Jitter:
    """Random sleeps (0 to ``max_ms``, half of them none) in the replica threads."""

    def __init__(self, max_ms: float, seed: int):
        self.max_s = max_ms / 1000.0
        self._local = threading.local()
        self._seed = seed

    def __call__(self) -> None:
        rng = getattr(self._local, "rng", None)
        if rng is None:
            rng = self._local.rng = random.Random(hash((self._seed, threading.get_ident())))
        if self.max_s and rng.random() < 0.5:
            time.sleep(rng.uniform(0, self.max_s))


class Watch:
    """Snapshot a replica's copies when its forward starts; report any that changed before its update."""

    def __init__(self):
        self.violations: list[str] = []
        self._lock = threading.Lock()

    @staticmethod
    def snapshot(copies: list[torch.Tensor]) -> list[torch.Tensor]:
        return [c.detach().clone() for c in copies]

    def check(self, step: int, copies: list[torch.Tensor], before: list[torch.Tensor]) -> None:
        replica = md.distribute.get_replica_context().replica_id_in_sync_group
        for i, (now, then) in enumerate(zip(copies, before)):
            if not torch.equal(now.detach(), then):
                with self._lock:
                    self.violations.append(f"step {step}: replica {replica}'s copy of weight {i} was written "
                                           "between its forward pass and its update")


def _batches(steps: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(GLOBAL_BATCH, FEATURES, generator=g, dtype=torch.float64),
             torch.randint(0, CLASSES, (GLOBAL_BATCH,), generator=g)) for _ in range(steps)]


def _replica_id() -> int:
    ctx = md.distribute.get_replica_context()
    return 0 if ctx is None else ctx.replica_id_in_sync_group


def _copies(variables, replica: int) -> list[torch.Tensor]:
    """``replica``'s own tensor of each variable (the variable itself without a strategy)."""
    return [v.values[replica] if isinstance(v, md.distribute.DistributedValues) else v for v in variables]


# --- md.keras ---------------------------------------------------------------------------------------

def _md_keras_model():
    torch.manual_seed(0)
    l2 = md.keras.regularizers.L2(1e-3)
    layers = md.keras.layers
    # No Input: built lazily by the first call, inside strategy.run (as the TF tutorial's model is).
    return md.keras.Sequential([layers.Dense(8, activation="tanh", kernel_regularizer=l2, dtype="float64"),
                                layers.Dense(CLASSES, kernel_regularizer=l2, dtype="float64")])


def md_keras_path(optimizer_factory):
    """A path over an md.keras model and optimizer: ``(make, step)``."""
    loss_object = md.keras.losses.SparseCategoricalCrossentropy(from_logits=True,
                                                                reduction=md.keras.losses.Reduction.NONE)

    def make():
        return _md_keras_model(), optimizer_factory()

    def step(model, optimizer, x, y, jitter, watch, index):
        built = model.built and all(layer.built for layer in model.layers)
        copies = _copies(model.trainable_variables, _replica_id()) if built else []
        before = watch.snapshot(copies)
        with md.GradientTape() as tape:
            logits = model(x, training=True)
            jitter()
            loss = md.nn.compute_average_loss(loss_object(y, logits), global_batch_size=GLOBAL_BATCH)
            loss += md.nn.scale_regularization_loss(md.add_n(model.losses))
            loss *= 0.5
        jitter()
        grads = tape.gradient(loss, model.trainable_variables)
        jitter()
        watch.check(index, copies, before)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        jitter()
        return loss

    return make, step


def _weights_md(model):
    return list(model.trainable_variables)


# --- torch.optim --------------------------------------------------------------------------------------

class SubclassedSGD(torch.optim.SGD):
    """Not an exact element-wise type: the bucketed all-reduce path, not the split update."""


def torch_path(optimizer_factory, hidden: bool = True):
    """A torch.nn model and a torch.optim optimizer. Without ``hidden``: one Linear layer, whose
    weights autograd never saves (the input needs no gradient, the penalty reads a sum), so only
    the by-value checks can see them written at the wrong time."""
    def make():
        torch.manual_seed(0)
        layers = ([torch.nn.Linear(FEATURES, 8, dtype=torch.float64), torch.nn.Tanh(),
                   torch.nn.Linear(8, CLASSES, dtype=torch.float64)] if hidden
                  else [torch.nn.Identity(), torch.nn.Identity(), torch.nn.Linear(FEATURES, CLASSES, dtype=torch.float64)])
        model = torch.nn.Sequential(*layers)
        return model, optimizer_factory(model.parameters())

    def step(model, optimizer, x, y, jitter, watch, index):
        copies = _copies(_torch_params(model), _replica_id())   # inside a replica: its own leaves
        before = watch.snapshot(copies)
        optimizer.zero_grad()
        logits = model(x)
        jitter()
        loss = md.nn.compute_average_loss(
            torch.nn.functional.cross_entropy(logits, y, reduction="none"), global_batch_size=GLOBAL_BATCH)
        penalty = ((model[0].weight ** 2).sum() + (model[2].weight ** 2).sum() if hidden
                   else model[2].weight.sum() ** 2)
        loss += 1e-3 * md.nn.scale_regularization_loss(penalty)
        loss *= 0.5
        jitter()
        loss.backward()
        jitter()
        watch.check(index, copies, before)
        optimizer.step()
        jitter()
        return loss.detach()

    return make, step


def _torch_params(model) -> list:
    return [m._parameters[n] for m in (model[0], model[2]) if isinstance(m, torch.nn.Linear) for n in ("weight", "bias")]


# --- Keras 3 ------------------------------------------------------------------------------------------

def keras3_path():
    os.environ.setdefault("KERAS_BACKEND", "torch")
    import keras

    def make():
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.Input((FEATURES,)),
                                  keras.layers.Dense(8, activation="tanh", dtype="float64"),
                                  keras.layers.Dense(CLASSES, dtype="float64")])
        optimizer = keras.optimizers.Adam(learning_rate=0.01)
        optimizer.build(model.trainable_variables)
        return model, optimizer

    def step(model, optimizer, x, y, jitter, watch, index):
        variables = model.trainable_variables
        copies = [_copies([v._value], _replica_id())[0] for v in variables]
        before = watch.snapshot(copies)
        for v in variables:
            v.value.grad = None
        logits = model(x)
        jitter()
        loss = md.nn.compute_average_loss(
            torch.nn.functional.cross_entropy(logits, y, reduction="none"), global_batch_size=GLOBAL_BATCH)
        loss += 1e-3 * md.nn.scale_regularization_loss(sum((v.value ** 2).sum() for v in variables))
        loss *= 0.5
        jitter()
        loss.backward()
        jitter()
        watch.check(index, copies, before)
        optimizer.apply([v.value.grad for v in variables], variables)
        jitter()
        return loss.detach()

    return make, step


def keras3_weights(model) -> list:
    return [v._value for v in model.trainable_variables]


# --- driver -------------------------------------------------------------------------------------------

def paths(names: list[str] | None = None) -> dict:
    """``name -> (strategy kind, path factory, weights of a model)``."""
    table = {
        "md_keras_adam": ("mirrored", lambda: md_keras_path(lambda: md.keras.optimizers.Adam(0.01)), _weights_md),
        "md_keras_sgd_clipnorm": ("mirrored", lambda: md_keras_path(
            lambda: md.keras.optimizers.SGD(0.05, momentum=0.9, clipnorm=0.5)), _weights_md),
        "torch_adam": ("mirrored", lambda: torch_path(lambda p: torch.optim.Adam(p, lr=0.01)), _torch_params),
        "torch_adam_unsaved_weights": ("mirrored", lambda: torch_path(lambda p: torch.optim.Adam(p, lr=0.01),
                                                                      hidden=False), _torch_params),
        "torch_sgd_subclass": ("mirrored", lambda: torch_path(
            lambda p: SubclassedSGD(p, lr=0.05, momentum=0.9)), _torch_params),
        "torch_adam_central_storage": ("central", lambda: torch_path(lambda p: torch.optim.Adam(p, lr=0.01)),
                                       _torch_params),
        "keras3_adam": ("mirrored", keras3_path, keras3_weights),
    }
    return {n: table[n] for n in (names or table)}


def _strategy(kind: str, replicas: int):
    devices = [f"/cpu:{i}" for i in range(replicas)]
    if kind == "central":
        return md.distribute.experimental.CentralStorageStrategy(devices)
    return md.distribute.MirroredStrategy(devices)


def train(path_factory, batches, strategy=None, jitter=None, watch=None):
    """The path's model trained on ``batches`` (global batches), with or without a strategy."""
    make, step = path_factory()
    jitter = jitter or (lambda: None)
    watch = watch or Watch()
    if strategy is None:
        model, optimizer = make()
        for i, (x, y) in enumerate(batches):
            step(model, optimizer, x, y, jitter, watch, i)
        return model
    with strategy.scope():
        model, optimizer = make()
    dataset = md.data.Dataset.from_tensor_slices((torch.cat([x for x, _ in batches]),
                                                  torch.cat([y for _, y in batches]))).batch(GLOBAL_BATCH)
    inputs = list(strategy.experimental_distribute_dataset(dataset))
    for i in range(0, len(inputs), STEPS_PER_RUN):
        strategy.run(_steps, args=(step, model, optimizer, inputs[i:i + STEPS_PER_RUN], jitter, watch, i))
    return model


def _steps(step, model, optimizer, inputs, jitter, watch, first):
    """Several steps in one ``strategy.run`` (as Keras's ``steps_per_execution``): no run boundary
    then separates one step's update from the next step's forward pass."""
    for k, (x, y) in enumerate(inputs):
        step(model, optimizer, x, y, jitter, watch, first + k)


def compare(name: str, replicas: int, steps: int, max_sleep_ms: float, seed: int = 0) -> list[str]:
    """Problems found on one path with ``replicas`` replicas (empty: none)."""
    kind, factory, weights = paths([name])[name]
    batches = _batches(steps)
    reference = [w.detach().clone() for w in weights(train(factory, batches))]
    watch = Watch()
    try:
        model = train(factory, batches, _strategy(kind, replicas), Jitter(max_sleep_ms, seed), watch)
    except Exception as exc:       # e.g. torch's in-place version check, raised in a replica
        return [f"{name} on {replicas} replicas: {type(exc).__name__}: {str(exc).splitlines()[0]}"]
    problems = list(watch.violations[:5])
    for i, (ref, var) in enumerate(zip(reference, weights(model))):
        for r, copy in enumerate(var.values):     # one copy per replica (one in all: central storage)
            copy = copy.detach()
            if not torch.allclose(copy, ref, rtol=TOLERANCE, atol=TOLERANCE):
                err = (copy - ref).abs().max().item()
                problems.append(f"weight {i}, replica {r}: differs from one device by {err:.3g}")
    return [f"{name} on {replicas} replicas: {p}" for p in problems]


def configure(max_replicas: int) -> None:
    cpu = md.config.list_physical_devices("CPU")[0]
    md.config.set_logical_device_configuration(cpu, [md.config.LogicalDeviceConfiguration()] * max_replicas)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--replicas", type=int, nargs="+", default=[2, 3])
    parser.add_argument("--paths", nargs="+", default=None, choices=sorted(paths()))
    parser.add_argument("--max-sleep-ms", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    configure(max(args.replicas))
    problems = []
    for name in paths(args.paths):
        for n in args.replicas:
            start = time.perf_counter()
            found = compare(name, n, args.steps, args.max_sleep_ms, args.seed)
            problems += found
            print(f"{name:28s} {n} replicas {args.steps} steps: {'OK' if not found else 'FAILED'} "
                  f"({time.perf_counter() - start:.1f} s)", flush=True)
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
