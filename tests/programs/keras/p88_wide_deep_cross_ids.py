"""p87 (keras.io's Wide & Deep and Deep & Cross networks) with the categorical strings looked up before the model,
as md.keras's refusal of ``Input(dtype="string")`` asks: int64 ``Input``s, the wide part's ``StringLookup(
output_mode="binary")`` as ``CategoryEncoding(num_tokens, output_mode="multi_hot")`` of the ids, the deep part's
``Embedding`` of the ids; everything else as p87."""

from tests.programs.keras.p87_wide_deep_cross import SOURCE, run as _run  # noqa: F401


def run(keras, strategy, workdir, scale=1):
    return _run(keras, strategy, workdir, scale, lookup_in_dataset=True)
