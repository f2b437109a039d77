"""torch's attention fast paths (``nn.MultiheadAttention`` and ``nn.TransformerEncoderLayer`` in eval,
``nn.TransformerEncoder``'s nested tensors) taken inside ``strategy.run`` and on distributed variables.

In eval with gradients off, torch runs these modules through fused ops (``torch._native_multi_head_attention``,
``torch._transformer_encoder_layer_fwd``) unless ``torch.overrides.has_torch_function`` says some argument
or an active ``TorchFunctionMode`` might not support them. Inside ``strategy.run`` multidev's replica
random streams are such a mode, and outside it the parameters are distributed variables (a tensor
subclass), so the fast path never ran: ``nn.TransformerEncoder(enable_nested_tensor=True)`` with a
``src_key_padding_mask`` then gave the padded positions the slow path's values where torch (one device,
each DDP rank) gives zeros (1.97 apart on a 2-layer encoder: a mean over all positions differs).

multidev's modes pass every op they do not act on through, and a distributed variable resolves any op to
the right copy, so neither breaks a fused op: while strategies live, ``has_torch_function`` called from
torch's transformer and attention modules ignores them (any other mode or subclass still counts). The
fused ops take no dropout (they run in eval only), so no replica's random stream is skipped. Cost: one
frame lookup per call made while a mode or subclass is active (torch's other callers get torch's answer).
Compiled code gets dynamo's answer, as before (inside replicas: no fast path).
"""

from __future__ import annotations

import sys
from typing import Callable

import torch
from torch.overrides import _get_current_function_mode_stack

from multidev.values.variables import DistributedVariable

# The modules whose fast-path checks call ``torch.overrides.has_torch_function(tensor_args)``.
_FAST_PATH_CALLERS = frozenset({"torch.nn.modules.transformer", "torch.nn.modules.activation"})
_TENSOR_FUNCTION = torch.Tensor.__torch_function__.__func__
_NO_FUNCTION = torch._C._disabled_torch_function_impl   # nn.Parameter's


def _passes_through(arg: object) -> bool:
    """Whether ``arg`` is no tensor, a plain tensor or parameter, or a distributed variable."""
    if not isinstance(arg, torch.Tensor) or isinstance(arg, DistributedVariable):
        return True
    function = type(arg).__torch_function__
    return getattr(function, "__func__", function) in (_TENSOR_FUNCTION, _NO_FUNCTION)


def _only_multidev_overrides(args: tuple) -> bool:
    modes = _get_current_function_mode_stack()
    return all(type(m).__module__.startswith("multidev.") for m in modes) and all(map(_passes_through, args))


def _ignoring_multidev(original: Callable[[tuple], bool]) -> Callable[[tuple], bool]:
    variadic = torch.overrides.has_torch_function_variadic

    def has_torch_function(relevant_args) -> bool:
        if torch.compiler.is_compiling():
            # dynamo answers for torch's functions itself; it keys them by the names they had when it first
            # compiled (this wrapper's, if that was later), and the variadic one is never wrapped
            return variadic(*relevant_args)
        if not original(relevant_args):
            return False
        if sys._getframe(1).f_globals.get("__name__") not in _FAST_PATH_CALLERS:
            return True
        return not _only_multidev_overrides(tuple(relevant_args))

    has_torch_function.__doc__ = original.__doc__
    has_torch_function._multidev_wrapped = True
    return has_torch_function


def install() -> Callable[[], None]:
    """Wrap ``torch.overrides.has_torch_function`` (registered as TorchScript's builtin, as torch's is);
    returns the function that unwraps it."""
    original = torch.overrides.has_torch_function
    wrapped = _ignoring_multidev(original)
    torch.jit._builtins._register_builtin(wrapped, "aten::has_torch_function")
    torch.overrides.has_torch_function = wrapped

    def remove() -> None:
        torch.overrides.has_torch_function = original

    return remove
