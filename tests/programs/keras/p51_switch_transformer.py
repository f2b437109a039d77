"""keras.io/examples/nlp/text_classification_with_switch_transformer as printed (``_switch_transformer.py``):
the ``Switch`` layer reshapes every batch to ``num_tokens_per_batch = batch_size * num_tokens_per_example``, a
constant of the global batch. On 2 replicas each replica sees half the batch, so that reshape fails, naming the
shapes (TensorFlow's MirroredStrategy fails the same: the constant is not the replica's); p52 is the program with
the replica's batch in the constant.
"""

from tests.programs.keras._switch_transformer import SOURCE, run_switch  # noqa: F401 - SOURCE: the example


def run(keras, strategy, workdir, scale=1):
    batch_size, num_tokens_per_example = 16, 8
    num_tokens_per_batch = batch_size * num_tokens_per_example
    return run_switch(keras, strategy, batch_size, num_tokens_per_batch, scale)
