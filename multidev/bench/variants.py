"""The in-process variants of the training benchmark: how one training step is run.

Every variant trains the same workload on the same global batches: a plain PyTorch loop (the
baseline), custom loops under ``OneDeviceStrategy`` and ``MirroredStrategy`` on 1, 2 or 4 logical
devices, Keras ``fit`` (no strategy, or ``MirroredStrategy``) on the model wrapped with
``md.keras.Model.from_torch``, and, only when asked for, Keras 3's own ``fit`` (``keras3_variants``).
A variant is built once and then timed round after round.
"""

from __future__ import annotations

from typing import Callable, Sequence

import torch

from multidev.bench import keras3_variants
from multidev.bench.measure import fit_epoch_runner, time_steps
from multidev.bench.workloads import Workload

#: In-process variants, in table order. ``mirrored_K`` / ``fit_mirrored_K`` use the first K logical devices.
INPROCESS_VARIANTS = ("plain", "plain_bf16", "one_device", "mirrored_1", "mirrored_2", "mirrored_4",
                      "fit", "fit_mirrored_1", "fit_mirrored_2", "fit_mirrored_4") + keras3_variants.KERAS3_VARIANTS
#: Variants that run in two worker processes (see ``multiproc``).
PROCESS_VARIANTS = ("ddp_2proc", "mwms_2proc")
ALL_VARIANTS = INPROCESS_VARIANTS + PROCESS_VARIANTS
#: Variants run only when asked for: Keras 3's (they import keras, an optional extra) and bf16 autocast
#: (a GPU figure: on CPUs bf16 matmuls are rarely faster).
OPT_IN_VARIANTS = ("plain_bf16",) + keras3_variants.KERAS3_VARIANTS
#: What runs when no ``--variants`` are given.
DEFAULT_VARIANTS = tuple(v for v in ALL_VARIANTS if v not in OPT_IN_VARIANTS)


def available(variant: str, workload: str) -> bool:
    """Whether ``variant`` exists for ``workload`` (the Keras 3 variants only where it has a Keras 3 model)."""
    return variant not in keras3_variants.KERAS3_VARIANTS or keras3_variants.supports(workload)


def devices_needed(variant: str) -> int:
    """Logical devices a variant uses in one process."""
    if variant in keras3_variants.KERAS3_VARIANTS:
        return keras3_variants.devices_needed(variant)
    return int(variant.rsplit("_", 1)[1]) if "mirrored_" in variant else 1


class Variant:
    """A built variant: ``run(batches)`` returns (wall, cpu) seconds per step over those batches;
    ``strategy`` is the one it runs under (None for the plain loop)."""

    def __init__(self, name: str, device: torch.device, run: Callable[[Sequence], float], strategy=None):
        self.name, self.device, self._run, self.strategy = name, device, run, strategy

    def run(self, batches: Sequence) -> tuple[float, float]:
        return self._run(batches)


def _plain(workload: Workload, device: torch.device, autocast_dtype: torch.dtype | None = None) -> Callable:
    """The baseline plain PyTorch loop; with ``autocast_dtype``, forward and loss under ``torch.autocast``."""
    import contextlib

    torch.manual_seed(0)
    model = workload.model().to(device)
    opt = workload.optimizer(model.parameters())
    loss_fn = torch.nn.CrossEntropyLoss()

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=autocast_dtype) if autocast_dtype else contextlib.nullcontext():
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


def _strategy_loop(workload: Workload, strategy) -> Callable:
    import multidev as md

    torch.manual_seed(0)
    with strategy.scope():
        model = workload.model()
        opt = workload.optimizer(model.parameters())
    loss_fn = torch.nn.CrossEntropyLoss(reduction="none")
    n = strategy.num_replicas_in_sync

    def replica_step(x, y, global_batch):
        opt.zero_grad(set_to_none=True)
        loss = md.nn.compute_average_loss(loss_fn(model(x), y), global_batch_size=global_batch)
        loss.backward()
        opt.step()
        return loss

    def step(x, y):
        batch = len(y)
        if n > 1:
            x = md.distribute.PerReplica(torch.tensor_split(x, n))
            y = md.distribute.PerReplica(torch.tensor_split(y, n))
        return strategy.run(replica_step, args=(x, y, batch))

    return step


def keras_model(workload: Workload, strategy=None):
    """The workload's module as a compiled ``md.keras`` model (in ``strategy``'s scope if given)."""
    import contextlib

    import multidev as md

    torch.manual_seed(0)
    with strategy.scope() if strategy is not None else contextlib.nullcontext():
        model = md.keras.Model.from_torch(workload.model())
        model.compile(optimizer=workload.keras_optimizer(),
                      loss=md.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def _fit_runner(workload: Workload, strategy, device: torch.device) -> Callable[[Sequence], tuple[float, float]]:
    return fit_epoch_runner(keras_model(workload, strategy), workload.batch_size, device)


def _strategy(variant: str, names: Sequence[str]):
    import multidev as md

    if variant == "one_device":
        return md.distribute.OneDeviceStrategy(names[0])
    if "mirrored_" in variant:
        return md.distribute.MirroredStrategy(list(names[:devices_needed(variant)]))
    return None


def build(variant: str, workload: Workload, device_names: Sequence[str], device: torch.device) -> Variant:
    """Build ``variant`` of ``workload``; ``device_names`` are the logical devices ("/cpu:0", ...),
    ``device`` the torch device of the first (where the plain loop runs)."""
    if variant not in INPROCESS_VARIANTS:
        raise ValueError(f"Unknown in-process variant {variant!r}; valid: {list(INPROCESS_VARIANTS)}.")
    if devices_needed(variant) > len(device_names):
        raise ValueError(f"Variant {variant!r} needs {devices_needed(variant)} logical devices; "
                         f"this process has {len(device_names)}: {list(device_names)}.")
    if variant in keras3_variants.KERAS3_VARIANTS:
        strategy = keras3_variants.strategy_for(variant, device_names)
        return Variant(variant, device, keras3_variants.fit_runner(workload, strategy, device), strategy)
    strategy = _strategy(variant, device_names)
    if variant.startswith("fit"):
        return Variant(variant, device, _fit_runner(workload, strategy, device), strategy)
    if variant == "plain_bf16":
        step = _plain(workload, device, torch.bfloat16)
    else:
        step = _plain(workload, device) if strategy is None else _strategy_loop(workload, strategy)
    return Variant(variant, device, lambda batches: time_steps(step, batches, device), strategy)
