"""Keras 3 layers' own state that multidev's replicas must not share, and layers built after their scope.

- **Losses added in ``call``** (``add_loss``, activity regularizers): Keras keeps them in the layer's
  ``_losses`` list, cleared at the outermost call. Replicas running the same layer at once would clear and
  extend one list, and one replica's ``compute_loss`` would sum (and backpropagate through) the other's
  graph ("Trying to backward through the graph a second time"). Here ``_losses`` is one list per replica
  inside ``strategy.run``, the layer's own list elsewhere.
- **A layer (or optimizer) created in a distributing scope and built later** (a subclassed model whose weights are made
  on its first call, or by ``fit``'s first step): its weights are still created in the strategy it was
  created in, as TensorFlow's Keras models keep the strategy of their creation scope; so ``fit`` on such a
  model distributes it instead of training one plain copy. First called inside ``strategy.run``, it is
  built once in cross-replica context (``merge_call``), as TensorFlow's MirroredStrategy creates
  variables made in ``run``; a layer *created* inside ``strategy.run`` is refused (``keras3._initialize``).

Private Keras names used: ``Layer._losses`` (checked against Keras 3.15.1, as ``keras3``'s).
"""

from __future__ import annotations

import weakref
from typing import Any

from multidev.values import context

_created_in: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()  # layer -> strategy


def creation_strategy(layer: Any) -> Any | None:
    """The distributing strategy whose scope ``layer`` was created in (None: none)."""
    return _created_in.get(layer)


def init(distributing_strategy: Any, original: Any, layer: Any, *args: Any, **kwargs: Any) -> None:
    """``Layer.__init__`` / ``Optimizer.__init__``: remember the distributing strategy in scope (not inside
    ``strategy.run``)."""
    original(layer, *args, **kwargs)
    strategy = distributing_strategy()
    if strategy is not None and context.current_replica_id() is None:
        _created_in[layer] = strategy


def add_weight(distributing_strategy: Any, original: Any, layer: Any, *args: Any, **kwargs: Any) -> Any:
    """``Layer.add_weight`` (or ``Optimizer.add_variable``) outside any scope on a layer (optimizer) created in one:
    create the variables in that strategy's scope."""
    strategy = _created_in.get(layer)
    if strategy is None or distributing_strategy() is not None or context.current_replica_id() is not None:
        return original(layer, *args, **kwargs)
    with strategy.scope():
        variable = original(layer, *args, **kwargs)
    if variable is not None:  # Keras may initialize it later (deferred, after a symbolic call)
        variable._multidev_strategy = strategy
    return variable


def variable_strategy(variable: Any) -> Any | None:
    """The strategy of the layer that made ``variable`` after its scope was left (None: none)."""
    return getattr(variable, "_multidev_strategy", None)


def maybe_build(original: Any, layer: Any, call_spec: Any) -> None:
    """``Layer._maybe_build``: a layer first called inside ``strategy.run`` (a model built lazily) is built
    once, in cross-replica context (``merge_call``, with replica 0's inputs: only their shapes matter), so
    its variables are distributed, as TensorFlow's MirroredStrategy creates variables made in ``run``."""
    if layer.built:
        return None
    ctx = context.current_replica_context()
    if ctx is None or ctx.num_replicas_in_sync == 1 or _created_in.get(layer) is not ctx.strategy:
        return original(layer, call_spec)  # (a layer made inside run: its variables are refused)
    ctx.merge_call(_build_once, args=(original, layer, call_spec))
    return None


def _build_once(strategy: Any, original: Any, layer: Any, call_spec: Any) -> None:
    if not layer.built:
        original(layer, strategy.experimental_local_results(call_spec)[0])


def per_replica_losses(layer_cls: type) -> None:
    """``Layer._losses`` as one list per replica inside ``strategy.run`` (a data descriptor on the class)."""

    def fget(layer: Any) -> list:
        d = layer.__dict__
        own = d.get("_multidev_losses")
        if own is None:  # a layer made before the seam was installed keeps its list
            own = d["_multidev_losses"] = d.pop("_losses", None) or []
        replica = context.current_replica_id()
        if replica is None:
            return own
        return d.setdefault("_multidev_replica_losses", {}).setdefault(replica, [])

    def fset(layer: Any, value: list) -> None:
        layer.__dict__["_multidev_losses"] = value

    layer_cls._losses = property(fget, fset, doc="Losses added in call(): one list per replica in strategy.run.")
