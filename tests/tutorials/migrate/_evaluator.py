"""Guide "Migrate evaluation" (guide/migrate/evaluator), TF2 half: ``ModelCheckpoint('ckpt-{epoch}',
save_weights_only=True)`` during ``fit`` and ``tf.keras.utils.SidecarEvaluator(model=..., data=...,
checkpoint_dir=log_dir, max_evaluations=1).start()``. Substitutions: MNIST -> ``synthetic_mnist``,
``Dense(512)`` -> ``Dense(64)``, ``Dropout(0.2)`` -> ``Dropout(0.0)``, weights from a fixed pattern.
TF 2.21's Keras 3 has neither the TF-format weights path nor ``SidecarEvaluator``; multidev runs the
guide (tf.keras 2's) and its evaluation equals ``model.evaluate`` of the same weights.
"""

import os
import tempfile

from _common import deterministic, listing, scope, synthetic_mnist, tf

(x_train, y_train), (x_test, y_test) = synthetic_mnist()


def create_model():
    return tf.keras.models.Sequential([
        tf.keras.layers.Flatten(input_shape=(28, 28)),
        tf.keras.layers.Dense(64, activation='relu'),
        tf.keras.layers.Dropout(0.0),
        tf.keras.layers.Dense(10)
    ])


def sidecar_evaluator(r):
    loss = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    with scope(r):
        model = deterministic(create_model(), 0.05)
        model.compile(optimizer='adam', loss=loss, metrics=['accuracy'], steps_per_execution=10)
    log_dir = tempfile.mkdtemp()
    model_checkpoint = tf.keras.callbacks.ModelCheckpoint(
        filepath=os.path.join(log_dir, 'ckpt-{epoch}'), save_weights_only=True)
    model.fit(x=x_train, y=y_train, epochs=1, callbacks=[model_checkpoint], verbose=0, shuffle=False)

    data = tf.data.Dataset.from_tensor_slices((x_test, y_test))
    data = data.batch(64)
    with scope(r):
        evaluated = create_model()
        evaluated.compile(optimizer='adam', loss=loss, metrics=['accuracy'])
    results = tf.keras.utils.SidecarEvaluator(model=evaluated, data=data, checkpoint_dir=log_dir,
                                              max_evaluations=1, timeout=30).start()
    direct = model.evaluate(data, return_dict=True, verbose=0)
    return {"files": [f for f in listing(log_dir) if not f.startswith("ckpt-1.data")],
            "evaluated": [os.path.basename(p) for p, _ in results],
            "same_as_evaluate": all(abs(results[0][1][k] - direct[k]) < 1e-6 for k in direct)}


SNIPPETS = [sidecar_evaluator]
