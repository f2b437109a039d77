"""Move a tensor to another device keeping the object: its class, attributes and every reference to it.

``tensor.to(device)`` makes a new tensor: a Keras weight (``KerasParameter``) placed so by OneDeviceStrategy came
back a plain ``nn.Parameter`` without its name or ``trainable``; a tensor a program or a layer kept lost the
link. ``Module.to`` moves parameters the same way (``.data`` replaced where the two devices' tensors are
compatible, CPU <-> CUDA; ``torch.utils.swap_tensors`` otherwise).
"""

from __future__ import annotations

import torch


def move_in_place(tensor: torch.Tensor, device: torch.device) -> None:
    """Give ``tensor`` its value on ``device``, in place (no autograd history: a leaf's value changes place)."""
    with torch.no_grad():
        moved = tensor.detach().to(device)
        if torch._has_compatible_shallow_copy_type(tensor, moved):
            tensor.data = moved
            return
        replacement = torch.Tensor._make_subclass(type(tensor), moved, tensor.requires_grad)
        replacement.__dict__.update(tensor.__dict__)
        torch.utils.swap_tensors(tensor, replacement)
