"""peft (Hugging Face's parameter-efficient fine-tuning) on replicas: its adapter switches (``SWITCHES``),
called inside ``strategy.run``, run once with every local replica paused, as each DDP rank switches its
own model.

``with model.disable_adapter():`` (a DPO-style reference pass through the base model, in the step)
goes through ``BaseTuner._enable_adapter_layers(enabled)``, which writes ``_disable_adapters`` and the
adapters' ``requires_grad`` on every LoRA layer. The replicas share those layers: one replica's entry
turned the adapters off under the other's training forward, and its exit back on under the other's
reference pass (a timing-dependent 3e-3 off DDP's adapter weights after 3 steps, or torch's
``CheckpointError`` when gradient checkpointing recomputed a layer in the other state). Wrapped with
``distribute.replica_switches.once_in_replicas``, every replica's call waits for the others' and the
switch runs once: between two switches all replicas see the same adapters. ``set_adapter`` (the active
adapter and its ``requires_grad``) and each layer's ``enable_adapters`` likewise.

Nothing here imports peft: the wrapper goes on when peft is already imported, at a strategy's scope
entry or when a module is registered while a strategy lives (``get_peft_model`` in the scope), and comes
off with the strategies' hooks.
"""

from __future__ import annotations

import sys
from typing import Any, Callable

from torch.nn.modules import module as torch_module

from multidev.distribute import front_end
from multidev.distribute.replica_switches import once_in_replicas

#: peft's switches of state its layers read in ``forward``: (module, class, method). ``disable_adapter()``
#: goes through ``_enable_adapter_layers``; transformers' own ``model.disable_adapters()`` /
#: ``enable_adapters()`` call each layer's ``enable_adapters``; ``model.set_adapter(name)`` (TRL's
#: ``ref_adapter_name``) goes through ``PeftModel.set_adapter`` to the tuner's and each layer's.
SWITCHES = (("peft.tuners.tuners_utils", "BaseTuner", "_enable_adapter_layers"),
            ("peft.tuners.tuners_utils", "BaseTuner", "set_adapter"),
            ("peft.tuners.tuners_utils", "BaseTunerLayer", "enable_adapters"),
            ("peft.tuners.tuners_utils", "BaseTunerLayer", "set_adapter"),
            ("peft.peft_model", "PeftModel", "set_adapter"))


class _PeftFrontEnd:
    """peft as a ``front_end.FrontEnd``: wraps peft's ``SWITCHES`` once their modules are imported."""

    name = "peft"

    def __init__(self) -> None:
        self._originals: dict[tuple, Callable] = {}   # each switch wrapped, its own method

    def on_scope_entry(self, strategy: Any) -> None:
        self._wrap()

    def install(self) -> Callable[[], None]:
        self._wrap()
        handle = torch_module.register_module_module_registration_hook(lambda *_: self._wrap())
        return lambda: (handle.remove(), self._unwrap())

    def _wrap(self) -> None:
        """Wrap the switches of peft's imported modules (at every module registration: one dict look-up
        while peft is not imported, none once all are wrapped)."""
        if len(self._originals) == len(SWITCHES) or "peft" not in sys.modules:
            return None
        for switch in SWITCHES:
            module = sys.modules.get(switch[0])
            if switch in self._originals or module is None:
                continue
            cls = getattr(module, switch[1])
            self._originals[switch] = cls.__dict__[switch[2]]
            setattr(cls, switch[2], once_in_replicas(self._originals[switch]))
        return None

    def _unwrap(self) -> None:
        for (module, cls, method), original in self._originals.items():
            setattr(getattr(sys.modules[module], cls), method, original)
        self._originals.clear()


FRONT_END = _PeftFrontEnd()


def register() -> None:
    """Join strategies as a front end (idempotent); registers nothing in torch until a strategy lives."""
    front_end.register(FRONT_END)
