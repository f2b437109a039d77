"""p72 (keras.io's token learner) with the position embedding held as what it is, a constant of the graph
(``ops.stop_gradient`` of ``Embedding(...)(ops.arange(...))``: the same numbers), which Keras 3 on torch can
train on one device: its ``RandomCrop`` draws one window per batch from a larger image, on 2 replicas once for
both (``integrations/keras3_random.py``)."""

from tests.programs.keras import p72_token_learner

SOURCE = p72_token_learner.SOURCE


def run(keras, strategy, workdir, scale=1):
    return p72_token_learner.run(keras, strategy, workdir, scale, constant_positions=True)
