"""peft (Hugging Face's parameter-efficient fine-tuning) on replicas: its adapter switches, called inside
``strategy.run``, run once with every local replica paused, as each DDP rank switches its own model.

``with model.disable_adapter():`` (a DPO-style reference pass through the base model, in the step)
goes through ``BaseTuner._enable_adapter_layers(enabled)``, which writes ``_disable_adapters`` and the
adapters' ``requires_grad`` on every LoRA layer. The replicas share those layers: one replica's entry
turned the adapters off under the other's training forward, and its exit back on under the other's
reference pass (a timing-dependent 3e-3 off DDP's adapter weights after 3 steps, or torch's
``CheckpointError`` when gradient checkpointing recomputed a layer in the other state). Wrapped with
``distribute.module_modes.once_in_replicas``, every replica's call waits for the others' and the switch
runs once: between two switches all replicas see the same adapters.

Nothing here imports peft: the wrapper goes on when peft is already imported, at a strategy's scope
entry or when a module is registered while a strategy lives (``get_peft_model`` in the scope), and comes
off with the strategies' hooks.
"""

from __future__ import annotations

import sys
from typing import Any, Callable

from torch.nn.modules import module as torch_module

from multidev.distribute import front_end
from multidev.distribute.module_modes import once_in_replicas

_TUNERS = "peft.tuners.tuners_utils"
_SWITCH = "_enable_adapter_layers"


class _PeftFrontEnd:
    """peft as a ``front_end.FrontEnd``: wraps ``BaseTuner._enable_adapter_layers`` once peft is imported."""

    name = "peft"

    def __init__(self) -> None:
        self._original: Callable | None = None   # peft's method while the wrapper is on

    def on_scope_entry(self, strategy: Any) -> None:
        self._wrap()

    def install(self) -> Callable[[], None]:
        self._wrap()
        handle = torch_module.register_module_module_registration_hook(lambda *_: self._wrap())
        return lambda: (handle.remove(), self._unwrap())

    def _wrap(self) -> None:
        tuners = sys.modules.get(_TUNERS)
        if self._original is not None or tuners is None:
            return None
        self._original = tuners.BaseTuner.__dict__[_SWITCH]
        setattr(tuners.BaseTuner, _SWITCH, once_in_replicas(self._original))
        return None

    def _unwrap(self) -> None:
        if self._original is not None:
            setattr(sys.modules[_TUNERS].BaseTuner, _SWITCH, self._original)
            self._original = None


FRONT_END = _PeftFrontEnd()


def register() -> None:
    """Join strategies as a front end (idempotent); registers nothing in torch until a strategy lives."""
    front_end.register(FRONT_END)
