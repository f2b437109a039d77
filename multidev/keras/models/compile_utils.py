"""What ``compile`` resolves: the loss container and the metrics container.

``LossesContainer`` turns the ``loss`` argument (name, Loss, function, list or dict per output)
into one scalar: per output ``sum(per_sample_loss * sample_weight) / batch_size``, weighted by
``loss_weights`` and summed. On a strategy each replica divides by the step's global batch instead
(``StepInputs.global_batch_size``, read from the replica's environment; the container is never
changed to run a step). The ``loss`` Mean tracker is updated with the
batch size as weight, so the epoch loss is exact over uneven batches.
"""

from __future__ import annotations

import numbers
import re
import threading

import torch

from multidev import nn
from multidev.values import context
from multidev.keras import losses as losses_mod
from multidev.keras import metrics as metrics_mod
from multidev.keras import step_inputs
from multidev.keras import loss_masks
from multidev.keras.metrics import mean_metrics as acc


def _per_output(spec, output_names, what):
    """Broadcast a loss/metric spec to a list with one entry per output."""
    n = len(output_names)
    if isinstance(spec, dict):
        unknown = sorted(set(spec) - set(output_names))
        if unknown:
            raise ValueError(f"Unknown entries in {what} dictionary: {unknown}. Only expected following keys: {output_names}")
        return [spec.get(name) for name in output_names]
    flat_metric_list = what.endswith("metrics") and not any(isinstance(s, (list, tuple, dict)) for s in spec or [])
    if isinstance(spec, (list, tuple)) and n > 1 and not flat_metric_list:
        if len(spec) != n:
            raise ValueError(f"When passing a list as {what}, it should have one entry per model output. "
                             f"The model has {n} outputs ({output_names}), but you passed {what}={spec!r}")
        return list(spec)
    return [spec] * n


def _loss_weight(weight, received) -> float:
    """One output's loss weight as a float (None weighs 1; a one-element list is its element)."""
    if isinstance(weight, (list, tuple)) and len(weight) == 1:
        weight = weight[0]
    if weight is None:
        return 1.0
    if isinstance(weight, bool) or not isinstance(weight, numbers.Real):
        raise ValueError(f"Expected `loss_weights` argument to be a float (single output case) or a list, tuple, or "
                         f"dict of floats (multiple output case). Received instead: loss_weights={received!r} of type "
                         f"{type(received).__name__}.")
    return float(weight)


class LossesContainer:
    """Computes the compiled loss and tracks its running mean as ``loss``."""

    def __init__(self, loss, loss_weights=None, output_names=("output_1",)):
        self.output_names = list(output_names)
        self.losses = [losses_mod.get(l) for l in _per_output(loss, self.output_names, "loss")]
        weights = _per_output(loss_weights, self.output_names, "loss_weights") if loss_weights is not None else [1.0] * len(self.output_names)
        self.loss_weights = [_loss_weight(w, loss_weights) for w in weights]
        self.tracker = metrics_mod.Mean(name="loss")
        # Keras 3 logs each output's loss when more than one output has a loss (``loss=[fn, None]``: "loss" only)
        with_loss = [fn is not None for fn in self.losses]
        self.output_trackers = ([metrics_mod.Mean(name=f"{n}_loss") if has else None
                                 for n, has in zip(self.output_names, with_loss)] if sum(with_loss) > 1 else [])

    @staticmethod
    def _per_sample(fn, y_true, y_pred):
        """Unreduced losses (one per sample, or per element for sequence outputs). A plain function gets the
        targets at the predictions' rank first, as Keras wraps it (keras.io's siamese contrastive loss: (batch,)
        labels against a (batch, 1) output would broadcast to (batch, batch))."""
        if isinstance(fn, losses_mod.Loss):
            if type(fn).__call__ is not losses_mod.Loss.__call__:   # the subclass reduces itself (keras.io's
                return fn(y_true, y_pred)                           # SupervisedContrastiveLoss): this replica's value
            return fn.call(y_true, y_pred)
        if isinstance(y_true, torch.Tensor) and isinstance(y_pred, torch.Tensor):
            y_true, y_pred = losses_mod.align_ranks(y_true, y_pred)
        return fn(y_true, y_pred)

    @staticmethod
    def _reduce(per, sample_weight, divisor, fn=None, batch=None):
        """This replica's part of the batch loss. A mean divides by the global batch; a Loss's 'sum'
        sums (the replicas' sums add up to the batch's); its 'none' trains as 'sum' and reads as the mean;
        a mean over a Keras mask (``ignore_class``) or 'mean_with_sample_weight' divides by this replica's own
        count, times 1/replicas, as Keras 3 on TensorFlow does (its 2-replica result then differs from its
        one-device one). Weights follow Keras's rank rule: a (batch,) weight against a sequence loss raises,
        as in TensorFlow."""
        if per.ndim == 0:   # a user function that already took this replica's mean (mse of a 1-D y)
            if batch is None or batch == divisor:
                return per
            # the replica's share of the global mean, so 2 replicas train as one device (TF: per / replicas)
            return per * (batch / divisor) if batch else per.nan_to_num() * 0.0
        if per.numel() == 0:               # a replica without examples (an uneven last batch)
            return per.sum()
        reduction = fn.reduction if isinstance(fn, losses_mod.Loss) else "sum_over_batch_size"
        if reduction == "sum":
            return losses_mod.reduce_weighted(per, sample_weight, "sum")
        elements = divisor * (per.numel() // max(per.shape[0], 1) or 1)
        if reduction in ("none", None):
            # Keras differentiates the per-example losses themselves (the gradient of their sum) and logs their
            # mean: the value is this replica's share of the mean, the gradient the sum's
            summed = losses_mod.reduce_weighted(per, sample_weight, "sum")
            return summed - summed.detach() + summed.detach() / elements
        masked = getattr(per, "_keras_mask", None) is not None
        if reduction == "mean_with_sample_weight" and sample_weight is not None or masked and reduction in (
                "sum_over_batch_size", "mean"):
            return losses_mod.reduce_weighted(per, sample_weight, reduction) / _replicas()
        return losses_mod.reduce_weighted(per, sample_weight, "sum") / elements

    def __call__(self, y_true, y_pred, sample_weight=None, regularization=None, regularization_losses=None,
                 track=True):
        """The compiled loss plus ``regularization`` (this replica's share of ``model.losses``).

        ``regularization_losses`` (Keras 2's ``compiled_loss(y, y_pred, regularization_losses=model.losses)``):
        a list of penalties, summed and divided by the replica count. ``track=False`` (``compute_loss``,
        as Keras 3's) leaves the ``loss`` tracker to the step; per-output trackers always update."""
        if regularization_losses:
            regularization = nn.scale_regularization_loss(list(regularization_losses))
        ys = _targets(y_true, [fn is not None for fn in self.losses], self.output_names)
        ps = _as_list(y_pred, self.output_names)
        sws = _sample_weights(sample_weight, self.output_names)
        batch = int(ps[0].shape[0])
        divisor = _divisor(batch)   # the global batch on a strategy
        # Trackers record the local mean weighted by the local batch, so replicas merge exactly.
        scale = divisor / batch if batch else 0.0
        total = None
        for i, (fn, w, yt, yp) in enumerate(zip(self.losses, self.loss_weights, ys, ps)):
            if fn is None:
                continue
            per = self._per_sample(fn, yt, yp)
            sw = sws[i]
            mask = loss_masks.mask_of(yp)
            if mask is not None and per.ndim > 0:
                value = loss_masks.masked_loss(per, mask, sw)
            else:
                value = self._reduce(per, sw, divisor, fn, batch)
            if self.output_trackers and batch:   # (fn is not None here: its tracker exists)
                self.output_trackers[i].update_state(value.detach() * scale, sample_weight=batch)
            total = value * w if total is None else total + value * w
        if total is None:
            raise ValueError("The model cannot be compiled because it has no loss to optimize.")
        if regularization is not None:
            total = total + regularization
        if track:
            self.track(total, batch)
        step_inputs.mark_share(total, batch)
        return total

    def track(self, loss, batch: int) -> None:
        """Record a step's ``loss`` (this replica's share of the global batch's) in the ``loss``
        tracker as the local mean weighted by the local batch, so replicas merge exactly."""
        if batch:
            self.tracker.update_state(loss.detach() * (_divisor(batch) / batch), sample_weight=batch)
        elif _divisor(batch):   # a replica without examples: its share of the penalties, counted with no examples
            self.tracker.add_without_count(loss.detach() * _divisor(batch))

    @property
    def metrics(self) -> list:
        return [self.tracker] + [t for t in self.output_trackers if t is not None]


class AddedLossTracker:
    """The ``loss`` tracker of a model compiled without a loss whose layers add theirs (keras.io's endpoint and
    CTC layers): Keras 3's built-in steps log the added losses' sum as ``loss``, on a strategy as ``track`` says."""

    track = LossesContainer.track

    def __init__(self):
        self.tracker = metrics_mod.Mean(name="loss")

    @property
    def metrics(self) -> list:
        return [self.tracker]


def _replicas() -> int:
    """The replica count of the running step (1 outside a strategy)."""
    env = context.replica_env()
    return env.replica_context.num_replicas_in_sync if env is not None else 1


def _divisor(batch: int) -> int:
    """What a replica divides its summed loss by: the step's global batch on a strategy, else ``batch``."""
    return step_inputs.global_batch(batch) or batch


def _structured(value) -> bool:
    return isinstance(value, (list, tuple, dict))


def _targets(y_true, present: list, names: list) -> list:
    """One target per output. A single target beside several outputs goes to the one output that takes a target
    (a non-None loss; keras.io's miniature GPT compiles ``loss=[loss_fn, None]`` and fits a single ``y``), as
    Keras 3 matches the targets with the non-None losses in order; a list as long as those outputs likewise.
    Anything else is refused (a tensor was split into its rows here: a silently wrong loss)."""
    n = len(present)
    if n == 1 or isinstance(y_true, dict) or (_structured(y_true) and len(y_true) == n):
        return _as_list(y_true, names)
    flat = list(y_true) if _structured(y_true) else [y_true]
    slots = [i for i, p in enumerate(present) if p]
    if len(flat) != len(slots):
        raise ValueError(f"y_true and y_pred have different structures: the model has {n} outputs, {len(slots)} of "
                         f"which take a target (a loss or metric), but {len(flat)} target(s) were given. Pass one "
                         "target per output (a list or a dict by output name), or one per output with a loss.")
    out = [None] * n
    for i, y in zip(slots, flat):
        out[i] = y
    return out


def _as_list(value, names):
    """One entry per output, in ``names``' order: a dict by key (Keras pairs outputs, targets and weights by
    name, whatever order a dict was written in; by position a model whose outputs are {'zz': .., 'bb': ..} had
    its losses on the wrong outputs), a list by position."""
    if isinstance(value, dict) and len(names) > 1:
        unknown = sorted(set(value) - set(names))
        if unknown:
            raise ValueError(f"Found unexpected keys that do not correspond to any model output: {unknown}. "
                             f"Expected keys: {list(names)} (the model's output names).")
        return [value.get(name) for name in names]
    if len(names) == 1:
        return [value[0] if isinstance(value, (list, tuple)) and len(value) == 1 else value]
    return list(value.values()) if isinstance(value, dict) else list(value)


def _sample_weights(sample_weight, names) -> list:
    """Sample weights per output: a dict or list gives each output its own, one array weighs every output."""
    if isinstance(sample_weight, (dict, list, tuple)):
        if len(names) > 1:
            return _as_list(sample_weight, names)
        if len(sample_weight) == 1:   # one output's weights in a one-element list or dict
            return list(sample_weight.values()) if isinstance(sample_weight, dict) else [sample_weight[0]]
    return [sample_weight] * len(names)


def _resolve_shape_dependent(name, loss_fn, y_true, y_pred):
    """Keras's choice of accuracy variant from the loss and the shapes."""
    binary = y_pred.shape[-1] == 1 or loss_fn in (losses_mod.binary_crossentropy,) or isinstance(loss_fn, losses_mod.BinaryCrossentropy)
    sparse = (y_true.ndim == y_pred.ndim - 1 or (y_true.ndim == y_pred.ndim and y_true.shape[-1] == 1)
              or loss_fn is losses_mod.sparse_categorical_crossentropy
              or isinstance(loss_fn, losses_mod.SparseCategoricalCrossentropy))
    cls = acc.BinaryAccuracy if binary else acc.SparseCategoricalAccuracy if sparse else acc.CategoricalAccuracy
    return cls(name=name)


def _function_metric_name(spec) -> str | None:
    """Keras 3's log name of a plain function in ``compile(metrics=...)``: its ``name``, else its ``__name__`` in
    snake case (keras.io EDSR's ``def PSNR(...)`` logs ``psnr``/``val_psnr`` on TensorFlow 2.21's Keras 3; tf_keras
    2 kept ``PSNR``). None for names and Metric objects, which name themselves."""
    if isinstance(spec, (str, type, metrics_mod.Metric)) or not callable(spec):
        return None
    if isinstance(getattr(spec, "name", None), str):
        return spec.name
    name = re.sub(r"\W+", "", getattr(spec, "__name__", type(spec).__name__))
    name = re.sub("(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub("([a-z])([A-Z])", r"\1_\2", name).lower()


class MetricsContainer:
    """Compiled metrics per output; shape-dependent names are resolved at the first batch."""

    def __init__(self, metrics, weighted_metrics=None, output_names=("output_1",), losses=None):
        self.output_names = list(output_names)
        self._specs = _per_output(metrics or [], self.output_names, "metrics")
        self._weighted_specs = _per_output(weighted_metrics or [], self.output_names, "weighted_metrics")
        self._losses = losses or [None] * len(self.output_names)
        self._weighted: list[list] | None = None
        self._metrics: list[list] | None = None
        self._lock = threading.Lock()
        self._pending = None
        self._built_in_step = None   # the StepInputs of the replicas' step that built the metrics (None: none)
        for specs in self._specs + self._weighted_specs:
            for s in _listify(specs):
                if not (isinstance(s, str) and s in metrics_mod.SHAPE_DEPENDENT):
                    metrics_mod.get(s)   # validate names now: unknown names fail at compile time

    def _build(self, ys, ps):
        def make(specs, i):
            out = []
            for s in _listify(specs):
                if isinstance(s, str) and s in metrics_mod.SHAPE_DEPENDENT:
                    m = _resolve_shape_dependent(s, self._losses[i], torch.as_tensor(ys[i]), ps[i])
                else:
                    m = metrics_mod.get(s, name=_function_metric_name(s))
                out.append(m)
            return out
        metrics = [make(s, i) for i, s in enumerate(self._specs)]
        self._weighted = [make(s, i) for i, s in enumerate(self._weighted_specs)]
        self._name_uniquely(metrics, self._weighted)
        self._metrics = metrics   # last, named: other replicas test it without the lock, then read both

    def _name_uniquely(self, metrics: list, weighted: list):
        """Keras 3's log names: ``<output>_<name>`` with several outputs; a repeated metric name gets
        ``_1``, ``_2``...; a weighted metric named like an earlier one becomes ``weighted_<name>``
        (``metrics=["accuracy"], weighted_metrics=["accuracy"]`` logs ``accuracy`` and
        ``weighted_accuracy``): the logs are keyed by name, so one would hide the other."""
        taken: dict[str, int] = {}

        def unique(name):
            if name not in taken:
                taken[name] = 1
                return name
            taken[name] += 1
            return f"{name}_{taken[name] - 1}"

        prefix = (lambda i: f"{self.output_names[i]}_") if len(self.output_names) > 1 else (lambda i: "")
        for i, group in enumerate(metrics):
            for m in group:
                m.name = unique(prefix(i) + m.name)
        for i, group in enumerate(weighted):
            for m in group:
                name = prefix(i) + m.name
                m.name = unique(name if name not in taken else prefix(i) + "weighted_" + m.name)

    def update_state(self, y_true, y_pred, sample_weight=None):
        n = len(self.output_names)
        ps = _as_list(y_pred, self.output_names)
        present = [bool(_listify(m) or _listify(w)) for m, w in zip(self._specs, self._weighted_specs)]
        ys = _targets(y_true, present, self.output_names) if any(present) else [None] * n   # no metric: no target
        sws = _sample_weights(sample_weight, self.output_names)
        if self._metrics is None:
            with self._lock:       # replicas may reach the first update concurrently: build once
                if self._metrics is None:
                    self._built_in_step = step_inputs.current()   # before _build publishes the metrics
                    self._build(ys, ps)
        for i in range(n):
            sw = sws[i]
            for m in self._metrics[i]:
                m.update_state(ys[i], ps[i])
            for m in self._weighted[i]:
                m.update_state(ys[i], ps[i], sample_weight=sw)

    @property
    def built(self) -> bool:
        return self._metrics is not None

    def listed_as_built(self) -> bool:
        """Whether ``model.metrics`` lists the built metrics here: not inside the replicas' step that built them,
        so every replica of that step updates them through ``compile_metrics``, as one device's first step does
        (a replica reaching ``self.metrics`` after another built them updated ``mae`` itself, weighted)."""
        step = self._built_in_step
        return self.built and (step is None or step is not step_inputs.current())

    def pending(self) -> list:
        """``[CompileMetrics]`` standing for the compiled metrics until the first batch builds them
        ([] when none were compiled)."""
        if not any(_listify(s) for s in self._specs + self._weighted_specs):
            return []
        if self._pending is None:
            self._pending = CompileMetrics(self)
        return [self._pending]

    @property
    def metrics(self) -> list:
        if self._metrics is None:
            return []
        return [m for group in self._metrics for m in group] + [m for group in self._weighted for m in group]


class CompileMetrics(metrics_mod.Metric):
    """Keras 3's ``compile_metrics`` entry of ``model.metrics``: updating it updates (and on the first
    batch builds) the compiled metrics; its result is their ``{name: result}``. It keeps no state."""

    def __init__(self, container: MetricsContainer):
        super().__init__(name="compile_metrics")
        self._container = container

    def update_state(self, y_true, y_pred, sample_weight=None):
        self._container.update_state(y_true, y_pred, sample_weight)

    def result(self) -> dict:
        return {m.name: m.result() for m in self._container.metrics}

    def reset_state(self):
        for m in self._container.metrics:
            m.reset_state()


def _listify(spec):
    if spec is None:
        return []
    return list(spec) if isinstance(spec, (list, tuple)) else [spec]


def compiled_containers(loss, loss_weights, metrics, weighted_metrics, output_names) -> tuple:
    """``compile``'s (loss container or None, metrics container): both built, so every name resolved,
    before ``compile`` changes the model."""
    compiled_loss = LossesContainer(loss, loss_weights, output_names) if loss is not None else None
    return compiled_loss, MetricsContainer(metrics, weighted_metrics, output_names,
                                           compiled_loss.losses if compiled_loss else None)
