"""``md.keras.ops.ctc_loss`` and ``ctc_decode``: Connectionist Temporal Classification, as Keras 3 defines it.

keras.io's captcha OCR trains a ``CTCLayer`` that ``add_loss``es the CTC loss of each example and decodes the
predictions greedily. ``ctc_loss`` takes logits (it applies ``log_softmax``) and returns one loss per example
(torch's ``F.ctc_loss``, reduction none, as Keras 3's torch backend); ``ctc_decode``'s greedy strategy takes the
best class at each step, merges repeats and drops the blank (``mask_index``; None: the last class), returning
Keras 3's ``(decoded of shape (1, batch, steps) padded with -1, scores of shape (batch, 1))``. Beam search is
refused with the way out.

Example:
    loss = ops.ctc_loss(labels, logits, label_lengths, logit_lengths)          # (batch,)
    (decoded,), scores = ops.ctc_decode(logits, logit_lengths)                  # greedy
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from multidev.keras.ops.core import convert_to_tensor

__all__ = ["ctc_loss", "ctc_decode"]


def ctc_loss(target, output, target_length, output_length, mask_index=0):
    """Per-example CTC loss of ``target`` (batch, max_label) under ``output`` logits (batch, steps, classes);
    ``mask_index`` is the blank class."""
    output = convert_to_tensor(output)
    if not output.is_floating_point() or output.dtype in (torch.float16, torch.bfloat16):
        output = output.float()
    target = convert_to_tensor(target).long()
    log_probs = F.log_softmax(output.transpose(0, 1), dim=-1)
    return F.ctc_loss(log_probs, target, _lengths(output_length, output), _lengths(target_length, output),
                      blank=int(mask_index), reduction="none")


def _lengths(lengths, like: torch.Tensor) -> torch.Tensor:
    return convert_to_tensor(lengths).to(device=like.device, dtype=torch.long).reshape(-1)


def ctc_decode(inputs, sequence_lengths, strategy="greedy", beam_width=100, top_paths=1, merge_repeated=True,
               mask_index=0):
    """Decode ``inputs`` (batch, steps, classes); ``strategy="greedy"`` only (see the module docstring)."""
    if strategy == "beam_search":
        raise NotImplementedError(
            "md.keras.ops.ctc_decode implements strategy='greedy' only; Keras 3 on multidev has beam search "
            "(KERAS_BACKEND=torch, `import keras`, keras.ops.ctc_decode(..., strategy='beam_search')).")
    if strategy != "greedy":
        raise ValueError(f"Invalid strategy {strategy!r}. Supported values are 'greedy' and 'beam_search'.")
    inputs = convert_to_tensor(inputs)
    inputs = inputs.float() if not inputs.is_floating_point() else inputs
    batch, steps, classes = inputs.shape
    blank = classes - 1 if mask_index is None else int(mask_index)
    scores, indices = inputs.max(dim=-1)
    beyond = torch.arange(steps, device=inputs.device)[None, :] >= _lengths(sequence_lengths, inputs)[:, None]
    indices = torch.where(beyond, blank, indices)
    scores = torch.where(beyond, 0.0, scores)
    if merge_repeated:
        repeat = F.pad(indices[:, 1:] == indices[:, :-1], (1, 0))
        indices = torch.where(repeat, blank, indices)
    dropped = indices == blank
    order = torch.where(dropped, steps, torch.arange(steps, device=inputs.device).expand(batch, steps))
    indices = torch.where(dropped, -1, indices).gather(1, order.argsort(dim=-1, stable=True))
    return indices.to(torch.int32).unsqueeze(0), -scores.sum(dim=1, keepdim=True)
