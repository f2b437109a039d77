"""keras.io/examples/vision/consistency_training as printed (``tf.GradientTape`` -> ``md.GradientTape``,
``tf.nn.softmax`` -> ``ops.softmax``): a teacher trained with ``fit`` (``EarlyStopping``, ``ReduceLROnPlateau``), then a
``SelfEnsemble(keras.Model)`` holding ``student`` and ``teacher``, its own ``compile(optimizer, metrics,
student_loss_fn, distillation_loss_fn, temperature=3)`` calling ``super().compile(optimizer=..., metrics=...)``, a
``train_step`` over a zip of a clean and a noisy dataset (the teacher predicts the clean images with
``training=False``; the student's ``CategoricalCrossentropy(from_logits=True)`` plus ``KLDivergence`` of the two
temperature softmaxes, averaged), ``self.compiled_metrics.update_state(y, softmax(student_predictions))``, the
results dict updated with the raw ``total_loss``; a ``test_step``; ``evaluate`` of the student.

CIFAR-10 is made up: 48 training and 16 test 16x16 RGB images (72x72 resized) of 10 one-hot classes; the noisy view
is a flip plus Gaussian noise made with numpy (RandAugment). The model is a small conv net (ResNet50V2 without
weights). Shrunk: batch 16 (64), 2 epochs each (5).
"""

import numpy as np

import multidev as md

SOURCE = "https://keras.io/examples/vision/consistency_training/"
BATCH_SIZE, EPOCHS, CROP_TO, NUM_CLASSES = 16, 2, 16, 10


def data(rng, n):
    labels = rng.randint(0, NUM_CLASSES, n)
    images = rng.uniform(0, 1, (n, CROP_TO, CROP_TO, 3)) + labels[:, None, None, None] / NUM_CLASSES
    return images.astype("float32"), np.eye(NUM_CLASSES, dtype="float32")[labels]


def run(keras, strategy, workdir, scale=1):
    layers, ops = keras.layers, keras.ops
    rng = np.random.RandomState(0)
    x_train, y_train = data(rng, 48 * scale)
    x_test, y_test = data(rng, 16)
    noisy = (x_train[:, :, ::-1] + rng.normal(0, 0.1, x_train.shape)).astype("float32")
    train_clean_ds = md.data.Dataset.from_tensor_slices((x_train, y_train)).batch(BATCH_SIZE)
    train_noisy_ds = md.data.Dataset.from_tensor_slices((noisy, y_train)).batch(BATCH_SIZE)
    validation_ds = md.data.Dataset.from_tensor_slices((x_test, y_test)).batch(BATCH_SIZE)
    consistency_training_ds = md.data.Dataset.zip((train_clean_ds, train_noisy_ds))

    def get_training_model(num_classes=10):
        return keras.Sequential([
            layers.Input((CROP_TO, CROP_TO, 3)),
            layers.Rescaling(scale=1.0 / 127.5, offset=-1),
            layers.Conv2D(8, 3, strides=2, activation="relu"),
            layers.GlobalAveragePooling2D(),
            layers.Dense(num_classes),
        ])

    class SelfEnsemble(keras.Model):
        def __init__(self, student, teacher):
            super().__init__()
            self.student = student
            self.teacher = teacher

        def compile(self, optimizer, metrics, student_loss_fn, distillation_loss_fn, temperature=3):
            super().compile(optimizer=optimizer, metrics=metrics)
            self.student_loss_fn = student_loss_fn
            self.distillation_loss_fn = distillation_loss_fn
            self.temperature = temperature

        def train_step(self, data):
            clean_ds, noisy_ds = data
            clean_images, _ = clean_ds
            noisy_images, y = noisy_ds
            teacher_predictions = self.teacher(clean_images, training=False)
            with md.GradientTape() as tape:
                student_predictions = self.student(noisy_images, training=True)
                student_loss = self.student_loss_fn(y, student_predictions)
                distillation_loss = self.distillation_loss_fn(
                    ops.softmax(teacher_predictions / self.temperature, axis=1),
                    ops.softmax(student_predictions / self.temperature, axis=1))
                total_loss = (student_loss + distillation_loss) / 2
            trainable_vars = self.student.trainable_variables
            gradients = tape.gradient(total_loss, trainable_vars)
            self.optimizer.apply_gradients(zip(gradients, trainable_vars))
            self.compiled_metrics.update_state(y, ops.softmax(student_predictions, axis=1))
            results = {m.name: m.result() for m in self.metrics}
            results.update({"total_loss": total_loss})
            return results

        def test_step(self, data):
            x, y = data
            y_prediction = self.student(x, training=False)
            self.compiled_metrics.update_state(y, ops.softmax(y_prediction, axis=1))
            results = {m.name: m.result() for m in self.metrics}
            return results

    keras.utils.set_random_seed(0)
    train_callbacks = [keras.callbacks.EarlyStopping(monitor="val_accuracy", patience=2, restore_best_weights=True),
                       keras.callbacks.ReduceLROnPlateau(monitor="val_loss", factor=0.2, patience=1)]
    with strategy.scope():
        teacher_model = get_training_model()
        teacher_model.compile(optimizer="adam", loss=keras.losses.CategoricalCrossentropy(from_logits=True),
                              metrics=["accuracy"])
    teacher_history = teacher_model.fit(train_clean_ds, epochs=EPOCHS, validation_data=validation_ds,
                                        callbacks=train_callbacks, verbose=0)
    _, teacher_acc = teacher_model.evaluate(validation_ds, verbose=0)
    with strategy.scope():
        self_ensemble = SelfEnsemble(student=get_training_model(), teacher=teacher_model)
        self_ensemble.compile(optimizer="adam", metrics=["accuracy"],
                              student_loss_fn=keras.losses.CategoricalCrossentropy(from_logits=True),
                              distillation_loss_fn=keras.losses.KLDivergence())
    history = self_ensemble.fit(consistency_training_ds, epochs=EPOCHS, validation_data=validation_ds, verbose=0,
                                callbacks=[keras.callbacks.EarlyStopping(monitor="val_accuracy", patience=2,
                                                                         restore_best_weights=True)])
    student_acc = self_ensemble.evaluate(validation_ds, verbose=0)
    return {"_model": self_ensemble, "teacher": teacher_history.history, "teacher_acc": teacher_acc,
            "history": history.history, "student_acc": student_acc,
            "student_predict": self_ensemble.student.predict(x_test[:4], verbose=0)}
