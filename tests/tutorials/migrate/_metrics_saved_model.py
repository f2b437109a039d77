"""Guides "Migrate metrics and optimizers" (guide/migrate/metrics_optimizers) and "Migrate the SavedModel
workflow" (guide/migrate/saved_model), TF2 halves.

metrics_optimizers: ``Dense(2)`` with ``Adagrad(0.05)`` and ``SparseCategoricalCrossentropy(from_logits=True)``
compiled with ``metrics='accuracy'``, ``fit``/``evaluate(return_dict=True)`` on the guide's data; the
standalone ``tf.keras.metrics.Accuracy`` with ``update_state`` (with and without ``sample_weight``),
``result`` and ``reset_states``. saved_model: ``tf.saved_model.save`` of a ``tf.Module`` whose
``@tf.function`` adds two, with a ``serving_default`` signature from ``get_concrete_function``; the
Keras model (``Input`` + ``Lambda``) saved with ``model.save`` and loaded with ``load_model``; loading
with ``tf.saved_model.load`` and calling the model and its signature. Substitutions: weights set from a
fixed pattern (the model built first), fit 3 epochs; ``model.save('keras-model', save_format='tf')``
(tf.keras 2) is observed as it is and then as ``model.save('keras-model.keras')`` (Keras 3's form).
"""

import os

import numpy as np

from _common import deterministic, history, rnd, scope, tf, weights


def metrics_optimizers_fit(r):
    features = [[1., 1.5], [2., 2.5], [3., 3.5]]
    labels = [0, 0, 1]
    eval_features = [[4., 4.5], [5., 5.5], [6., 6.5]]
    eval_labels = [0, 1, 1]
    dataset = tf.data.Dataset.from_tensor_slices((features, labels)).batch(1)
    eval_dataset = tf.data.Dataset.from_tensor_slices((eval_features, eval_labels)).batch(1)
    with scope(r):
        model = tf.keras.models.Sequential([tf.keras.layers.Dense(2)])
        model.build((None, 2))
        deterministic(model)
        optimizer = tf.keras.optimizers.Adagrad(learning_rate=0.05)
        model.compile(optimizer=optimizer,
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=['accuracy'])   # Keras 3 refuses the guide's 'accuracy' string
    h = model.fit(dataset, epochs=3, verbose=0)
    result = model.evaluate(eval_dataset, return_dict=True, verbose=0)
    return {"h": history(h), "eval": {k: round(float(v), 5) for k, v in sorted(result.items())}, "w": weights(model)}


def standalone_accuracy(r):
    with scope(r):
        accuracy = tf.keras.metrics.Accuracy()
    out = []
    accuracy.update_state(y_true=[0, 0, 1, 1], y_pred=[0, 0, 0, 1])
    out.append(rnd(accuracy.result().numpy()))
    accuracy.update_state(y_true=[0, 0, 1, 1], y_pred=[0, 0, 0, 0], sample_weight=[1, 1, 0, 0])
    out.append(rnd(accuracy.result().numpy()))
    accuracy.reset_state()
    out.append(rnd(accuracy.result().numpy()))
    return out


def add_two(input):
    return input + 2


class MyModel(tf.Module):
    @tf.function
    def __call__(self, input):
        return add_two(input)


def saved_model_module(r):
    model = MyModel()

    @tf.function
    def serving_default(input):
        return {'output': model(input)}

    signature_function = serving_default.get_concrete_function(
        tf.TensorSpec(shape=[], dtype=tf.float32))
    tf.saved_model.save(model, 'tf2-save', signatures={
        tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY: signature_function})
    loaded = tf.saved_model.load('tf2-save')
    signature = loaded.signatures['serving_default']
    return {"signatures": sorted(loaded.signatures.keys()),
            "signature": {k: rnd(v) for k, v in signature(tf.constant(5.)).items()},
            "call": rnd(loaded(tf.constant(5.))), "files": sorted(os.listdir('tf2-save'))[:0]}


def _keras_add_two(r):
    with scope(r):
        inp = tf.keras.Input(dtype=tf.float32, shape=())
        out = tf.keras.layers.Lambda(lambda x: x + 2)(inp)
        model = tf.keras.Model(inp, out)
    return model


def saved_model_keras_tf_format(r):
    """The guide's ``model.save('keras-model', save_format='tf', signatures=...)`` (tf.keras 2)."""
    model = _keras_add_two(r)

    @tf.function
    def serving_default(input):
        return {'output': model(input)}

    concrete_function = serving_default.get_concrete_function(tf.TensorSpec(shape=[], dtype=tf.float32))
    try:   # a scalar signature for an Input(shape=()) (batches of scalars): TF 2.21 refuses it when tracing
        model.save('keras-model', save_format='tf', signatures={
            tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY: concrete_function})
    except ValueError:
        pass
    else:
        return "saved"
    concrete_function = serving_default.get_concrete_function(tf.TensorSpec(shape=[None], dtype=tf.float32))
    try:   # Keras 3 has no save_format='tf' (it wants tf.saved_model.save or model.export)
        model.save('keras-model', save_format='tf', signatures={
            tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY: concrete_function})
    except ValueError as e:
        return {"raises": "ValueError", "save_format": "save_format" in str(e)}
    loaded = tf.saved_model.load('keras-model')
    return {k: rnd(v) for k, v in loaded.signatures['serving_default'](tf.constant([5.])).items()}


def saved_model_keras_file(r):
    """The Keras model saved as Keras 3 asks (``.keras``) and loaded with ``load_model``."""
    model = _keras_add_two(r)
    model.save('keras-model.keras')
    loaded = tf.keras.models.load_model('keras-model.keras', safe_mode=False)
    return rnd(loaded(np.array([5., 1.], "float32")))


def saved_model_export_keras(r):
    """``tf.saved_model.save(model, path)`` of a Keras model, its default signature called."""
    model = _keras_add_two(r)
    model(np.array([1.], "float32"))
    tf.saved_model.save(model, 'exported')
    loaded = tf.saved_model.load('exported')
    return {"signatures": sorted(loaded.signatures.keys()),
            "serving": {k: rnd(v) for k, v in loaded.signatures['serving_default'](tf.constant([5.])).items()}}


SNIPPETS = [metrics_optimizers_fit, standalone_accuracy, saved_model_module, saved_model_keras_tf_format,
            saved_model_keras_file, saved_model_export_keras]
