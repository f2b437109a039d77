"""``model.save_weights("ckpt")`` / ``load_weights("ckpt")``: Keras 2's TensorFlow-format weights, as
an ``md.train`` checkpoint whose root is the model.

Keras 2 wrote ``ckpt.index`` + ``ckpt.data-*`` with the model as the object graph's root (its weights
and a compiled model's optimizer) and listed the prefix in the directory's ``checkpoint`` file; its
``load_weights`` read it back and checked that something matched. This does the same with multidev's
files, so ``md.train.Checkpoint(model).read("ckpt")`` and ``md.train.latest_checkpoint(dir)`` work
on them too. Registered with ``keras.saving.weights_io`` when ``multidev.train`` is imported.

Example:
    model.save_weights("ckpt")              # ckpt.index, ckpt.data.safetensors, checkpoint
    other.load_weights("ckpt")              # a CheckpointLoadStatus
"""

from __future__ import annotations

import os

from multidev.keras.saving import weights_io
from multidev.train import state_file
from multidev.train.checkpoint import Checkpoint, _is_chief, workers_meet


class KerasCheckpointFormat(weights_io.CheckpointFormat):
    """Keras 2's TensorFlow format on ``md.train`` files."""

    def write(self, model, prefix: str) -> None:
        if not weights_io.variable_dict(model):
            raise ValueError(f"Model {model.name!r} has no weights to save yet: build it (call it on data or pass "
                             "input_shape) first.")
        ckpt = Checkpoint(model)
        ckpt._write_files(prefix)
        if _is_chief(ckpt):
            state_file.update_checkpoint_state(os.path.dirname(prefix) or ".", prefix, [prefix])
        workers_meet(ckpt)

    def read(self, model, prefix: str):
        status = Checkpoint(model).read(prefix)
        status.assert_nontrivial_match()
        return status


weights_io.register_checkpoint_format(KerasCheckpointFormat())
