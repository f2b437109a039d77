"""keras.io/examples/nlp/text_classification_with_switch_transformer (``_switch_transformer.py``) with the
change a ``tf.distribute`` user makes: the ``Switch``'s ``num_tokens_per_batch`` is the tokens of the replica's
batch (``batch_size // strategy.num_replicas_in_sync``), so each replica routes its own tokens within its own
expert capacity and its ``Router`` adds the load-balancing loss of its own tokens with ``self.add_loss``; and
the one Keras 3's torch backend needs: ``Router`` and ``Switch`` call ``super().__init__()`` first (a torch
module takes no sublayer before it).
"""

from tests.programs.keras._switch_transformer import SOURCE, run_switch  # noqa: F401 - SOURCE: the example


def run(keras, strategy, workdir, scale=1):
    batch_size, num_tokens_per_example = 16, 8
    num_tokens_per_batch = batch_size // strategy.num_replicas_in_sync * num_tokens_per_example
    return run_switch(keras, strategy, batch_size, num_tokens_per_batch, scale, init_first=True)
