"""keras.io/examples/nlp/ner_transformers as printed (``_ner_transformers.py``): ``CustomNonPaddingTokenLoss``, a
``keras.losses.Loss`` subclass whose ``call`` runs an inner ``SparseCategoricalCrossentropy(reduction=None)``,
masks the padding and returns ``ops.sum(loss) / ops.sum(mask)`` (the mean over the batch's real tokens), compiled
with ``optimizer="adam"``; fit on padded sentences of varying length; the example's tag accuracy from ``predict``.

Each replica divides by its own half's real tokens (the loss's ``call`` sees only them), so 2 replicas differ from
one device where the halves' token counts differ, as on TensorFlow's MirroredStrategy; p61 weights the tokens
with ``sample_weight`` instead and equals one device. Shrunk: 96 sentences of 3..12 tokens, vocabulary 30, 5 tags,
batch 16, 2 epochs.
"""

from tests.programs.keras._ner_transformers import SOURCE, data, ner_model, tag_accuracy  # noqa: F401


def run(keras, strategy, workdir, scale=1):
    ops = keras.ops

    class CustomNonPaddingTokenLoss(keras.losses.Loss):
        def __init__(self, name="custom_ner_loss"):
            super().__init__(name=name)

        def call(self, y_true, y_pred):
            loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=False, reduction=None)
            loss = loss_fn(y_true, y_pred)
            mask = ops.cast((y_true > 0), dtype="float32")
            loss = loss * mask
            return ops.sum(loss) / ops.sum(mask)

    tokens, tags = data(scale)
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = ner_model(keras)
        loss = CustomNonPaddingTokenLoss()
        model.compile(optimizer="adam", loss=loss)
    history = model.fit(tokens, tags, batch_size=16, epochs=2, shuffle=False, verbose=0)
    accuracy, output = tag_accuracy(keras, model, tokens[:16], tags[:16])
    return {"_model": model, "history": history.history, "accuracy": accuracy, "output": output[:2]}
