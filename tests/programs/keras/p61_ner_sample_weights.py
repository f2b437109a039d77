"""keras.io/examples/nlp/ner_transformers' model (``_ner_transformers.py``) with the padding masked the Keras way:
``fit(..., sample_weight=mask)`` of the tokens (1 for real ones, 0 for padding) with a built-in
``SparseCategoricalCrossentropy()`` and ``weighted_metrics``, then ``evaluate`` with the same weights. Keras's
'sum_over_batch_size' divides the weighted sum by the batch's entries (padding included), a sum over examples, so
2 replicas equal one device (p60's own masked mean does not).
"""

from tests.programs.keras._ner_transformers import SOURCE, data, ner_model, tag_accuracy  # noqa: F401


def run(keras, strategy, workdir, scale=1):
    tokens, tags = data(scale)
    mask = (tags > 0).astype("float32")
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = ner_model(keras)
        model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(),
                      weighted_metrics=[keras.metrics.SparseCategoricalAccuracy(name="token_accuracy")])
    history = model.fit(tokens, tags, sample_weight=mask, batch_size=16, epochs=2, shuffle=False, verbose=0)
    evaluation = model.evaluate(tokens, tags, sample_weight=mask, batch_size=16, verbose=0)
    accuracy, output = tag_accuracy(keras, model, tokens[:16], tags[:16])
    return {"_model": model, "history": history.history, "evaluate": evaluation, "accuracy": accuracy,
            "output": output[:2]}
