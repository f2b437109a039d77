"""keras.io/examples/vision/knowledge_distillation: a ``Distiller`` model overriding ``compile`` (extra
arguments: ``student_loss_fn``, ``distillation_loss_fn``, ``alpha``, ``temperature``), ``compute_loss`` (the
teacher's softened predictions, ``KLDivergence``) and ``call``; the teacher trained first, then frozen
(``trainable = False``, as the brief's "frozen teacher"; keras.io only calls it with ``training=False``);
a student trained from scratch for comparison.

Shrunk: 12x12 synthetic digits (64 images), 8/16 filters (teacher), 4/8 (student), 1 epoch each.
"""

import numpy as np

SOURCE = "https://keras.io/examples/vision/knowledge_distillation/"


def run(keras, strategy, workdir, scale=1):
    layers, ops = keras.layers, keras.ops

    class Distiller(keras.Model):
        def __init__(self, student, teacher):
            super().__init__()
            self.teacher = teacher
            self.student = student

        def compile(self, optimizer, metrics, student_loss_fn, distillation_loss_fn, alpha=0.1, temperature=3):
            super().compile(optimizer=optimizer, metrics=metrics)
            self.student_loss_fn = student_loss_fn
            self.distillation_loss_fn = distillation_loss_fn
            self.alpha = alpha
            self.temperature = temperature

        def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, allow_empty=False):
            teacher_pred = self.teacher(x, training=False)
            student_loss = self.student_loss_fn(y, y_pred)
            distillation_loss = self.distillation_loss_fn(
                ops.softmax(teacher_pred / self.temperature, axis=1),
                ops.softmax(y_pred / self.temperature, axis=1),
            ) * (self.temperature**2)
            loss = self.alpha * student_loss + (1 - self.alpha) * distillation_loss
            return loss

        def call(self, x):
            return self.student(x)

    def convnet(filters, name):
        return keras.Sequential([
            keras.Input(shape=(12, 12, 1)),
            layers.Conv2D(filters[0], (3, 3), strides=(2, 2), padding="same"),
            layers.LeakyReLU(negative_slope=0.2),
            layers.MaxPooling2D(pool_size=(2, 2), strides=(1, 1), padding="same"),
            layers.Conv2D(filters[1], (3, 3), strides=(2, 2), padding="same"),
            layers.Flatten(),
            layers.Dense(10),
        ], name=name)

    rng = np.random.RandomState(0)
    x_train = rng.rand(64 * scale, 12, 12, 1).astype("float32")
    y_train = rng.randint(0, 10, 64 * scale)
    x_test, y_test = x_train[:16], y_train[:16]
    keras.utils.set_random_seed(0)
    with strategy.scope():
        teacher = convnet((8, 16), "teacher")
        student = convnet((4, 8), "student")
        student_scratch = keras.models.clone_model(student)
        teacher.compile(optimizer=keras.optimizers.Adam(),
                        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                        metrics=[keras.metrics.SparseCategoricalAccuracy()])
    teacher_history = teacher.fit(x_train, y_train, epochs=1, batch_size=16, verbose=0)
    teacher_score = teacher.evaluate(x_test, y_test, verbose=0)
    teacher.trainable = False
    with strategy.scope():
        distiller = Distiller(student=student, teacher=teacher)
        distiller.compile(optimizer=keras.optimizers.Adam(),
                          metrics=[keras.metrics.SparseCategoricalAccuracy()],
                          student_loss_fn=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                          distillation_loss_fn=keras.losses.KLDivergence(), alpha=0.1, temperature=10)
    history = distiller.fit(x_train, y_train, epochs=1, batch_size=16, verbose=0)
    score = distiller.evaluate(x_test, y_test, verbose=0)
    with strategy.scope():
        student_scratch.compile(optimizer=keras.optimizers.Adam(),
                                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                                metrics=[keras.metrics.SparseCategoricalAccuracy()])
    scratch_history = student_scratch.fit(x_train, y_train, epochs=1, batch_size=16, verbose=0)
    return {"_model": distiller, "teacher_history": teacher_history.history, "teacher_score": teacher_score,
            "history": history.history, "score": score, "scratch_history": scratch_history.history,
            "teacher_weights_frozen": {str(i): np.asarray(w) for i, w in enumerate(teacher.get_weights())},
            "predict": distiller.predict(x_test[:4], verbose=0)}
