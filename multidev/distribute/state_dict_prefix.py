"""A checkpoint a DDP program saved, loaded into its multidev port.

``DistributedDataParallel(model).state_dict()`` names every key ``module.<key>`` (the ImageNet
example's ``save_checkpoint({'state_dict': model.state_dict(), ...})``). The DDP program loads it back
into its wrapped model; the port drops the wrapper (``docs/ddp_port.md``), so the same
``model.load_state_dict(checkpoint['state_dict'], strict=False)`` (fine-tuning with a new head, a
partial resume) matched none of the model's keys and loaded nothing, silently: training went on from
the fresh initialisation where DDP's run went on from the checkpoint. While a strategy lives
(``live_hooks``) ``install`` wraps ``torch.nn.Module.load_state_dict``: a load that matches no key of
the model, where the keys with DDP's ``module.`` prefix stripped would match, raises ``ValueError``
before anything is loaded (``strict=True``: torch's ``RuntimeError``, the same hint added). Any load
that matches a key is torch's, unchanged.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Mapping

import torch

PREFIX = "module."


def _prefixed_only(module: torch.nn.Module, state_dict: Any) -> list:
    """The keys of ``state_dict`` that match ``module``'s once ``module.`` is stripped, when none match
    as they are (else ``[]``)."""
    if not isinstance(state_dict, Mapping):
        return []
    keys = [k for k in state_dict if isinstance(k, str)]
    if not any(k.startswith(PREFIX) for k in keys):
        return []   # (no DDP key: the model's own state_dict is not built for every load)
    own = set(module.state_dict().keys())
    if not own or any(k in own for k in keys):
        return []
    return [k for k in keys if k.startswith(PREFIX) and k[len(PREFIX):] in own]


def _hint(module: torch.nn.Module, prefixed: list) -> str:
    return (f"{len(prefixed)} key(s) of the state dict ({prefixed[0]!r}, ...) are {type(module).__name__}'s keys "
            f"with DistributedDataParallel's {PREFIX!r} prefix, and none match as they are: the checkpoint was saved "
            "from a DDP-wrapped model, which a multidev port drops (build the model in strategy.scope(), no "
            "wrapper). Strip the prefix first: torch.nn.modules.utils.consume_prefix_in_state_dict_if_present("
            "state_dict, 'module.') (or save model.module.state_dict() in the DDP program).")


def _checked(load: Callable) -> Callable:
    @functools.wraps(load)
    def load_state_dict(self: torch.nn.Module, state_dict: Any, strict: bool = True, assign: bool = False):
        prefixed = _prefixed_only(self, state_dict)
        if prefixed and not strict:
            raise ValueError(f"load_state_dict(strict=False) would load nothing: {_hint(self, prefixed)} "
                             "Nothing was loaded.")
        try:
            return load(self, state_dict, strict, assign)
        except RuntimeError as e:
            if prefixed:
                raise RuntimeError(f"{e}\n{_hint(self, prefixed)}") from e
            raise

    load_state_dict._multidev_wrapped = True
    return load_state_dict


def install() -> Callable[[], None]:
    """Wrap ``Module.load_state_dict``; returns how to put torch's back (``live_hooks.STRATEGY_HOOKS``)."""
    cls = torch.nn.Module
    original = cls.__dict__["load_state_dict"]
    if getattr(original, "_multidev_wrapped", False):
        return lambda: None
    cls.load_state_dict = _checked(original)
    return lambda: setattr(cls, "load_state_dict", original)
