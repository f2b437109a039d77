"""Consistency training with a mean teacher (keras.io's semi-supervised examples' pattern, the teacher an
exponential moving average of the student): a ``keras.Model`` subclass whose ``compile`` takes its own loss,
whose ``train_step`` (``tf.GradientTape`` -> ``md.GradientTape``) adds to the supervised loss of the labeled
batch a ``MeanSquaredError`` consistency loss between the student on flipped unlabeled images and the teacher on
the originals, applies the student's gradients, then moves every teacher weight towards the student's with
``t.assign(ema_decay * t + (1 - ema_decay) * s)`` inside the step (each replica on its own copy: the students'
copies are equal after the synchronous update, so the teachers' stay equal); a ``test_step`` evaluating the
teacher. The teacher starts as ``teacher.set_weights(student.get_weights())`` and is not trainable.

Flipping (``ops.flip``) stands in for the examples' random augmentation, so the step has no random draws.
Shrunk: 8x8 images, 128 labeled and 128 unlabeled, Conv2D(4), Dense(16), batch 16, 2 epochs.
"""

import numpy as np

import multidev as md

SOURCE = "https://keras.io/examples/vision/consistency_training/"


def run(keras, strategy, workdir, scale=1):
    layers, ops = keras.layers, keras.ops

    def get_model():
        return keras.Sequential([
            layers.Input((8, 8, 1)),
            layers.Conv2D(4, 3, activation="relu"),
            layers.Flatten(),
            layers.Dense(16, activation="relu"),
            layers.Dense(3),
        ])

    class MeanTeacher(keras.Model):
        def __init__(self, student, teacher, ema_decay=0.9, consistency_weight=2.0):
            super().__init__()
            self.student = student
            self.teacher = teacher
            self.ema_decay = ema_decay
            self.consistency_weight = consistency_weight

        def compile(self, optimizer, loss, **kwargs):
            super().compile(optimizer=optimizer, **kwargs)
            self.supervised_loss = loss
            self.consistency_loss = keras.losses.MeanSquaredError()
            self.loss_tracker = keras.metrics.Mean(name="loss")
            self.consistency_tracker = keras.metrics.Mean(name="consistency")
            self.accuracy = keras.metrics.SparseCategoricalAccuracy(name="accuracy")

        @property
        def metrics(self):
            return [self.loss_tracker, self.consistency_tracker, self.accuracy]

        def call(self, x):
            return self.teacher(x)

        def train_step(self, data):
            (labeled_images, unlabeled_images), labels = data
            with md.GradientTape() as tape:
                student_logits = self.student(labeled_images, training=True)
                supervised = self.supervised_loss(labels, student_logits)
                student_unlabeled = self.student(ops.flip(unlabeled_images, axis=2), training=True)
                teacher_unlabeled = self.teacher(unlabeled_images, training=False)
                consistency = self.consistency_loss(ops.softmax(teacher_unlabeled), ops.softmax(student_unlabeled))
                loss = supervised + self.consistency_weight * consistency
            gradients = tape.gradient(loss, self.student.trainable_weights)
            self.optimizer.apply_gradients(zip(gradients, self.student.trainable_weights))
            # The teacher follows the student: an exponential moving average of its weights
            for s, t in zip(self.student.weights, self.teacher.weights):
                t.assign(self.ema_decay * t + (1 - self.ema_decay) * s)
            self.loss_tracker.update_state(loss)
            self.consistency_tracker.update_state(consistency)
            self.accuracy.update_state(labels, student_logits)
            return {m.name: m.result() for m in self.metrics}

        def test_step(self, data):
            images, labels = data
            logits = self.teacher(images, training=False)
            self.loss_tracker.update_state(self.supervised_loss(labels, logits))
            self.accuracy.update_state(labels, logits)
            return {"loss": self.loss_tracker.result(), "accuracy": self.accuracy.result()}

    rng = np.random.RandomState(0)
    n = 128 * scale
    labeled = rng.random((n, 8, 8, 1)).astype("float32")
    labels = (labeled[:, :, :4].mean(axis=(1, 2, 3)) * 6).astype("int64") % 3
    unlabeled = rng.random((n, 8, 8, 1)).astype("float32")
    keras.utils.set_random_seed(0)
    with strategy.scope():
        student = get_model()
        teacher = get_model()
        teacher.set_weights(student.get_weights())
        teacher.trainable = False
        mean_teacher = MeanTeacher(student, teacher)
        mean_teacher.compile(optimizer=keras.optimizers.Adam(0.01),
                             loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = mean_teacher.fit([labeled, unlabeled], labels, batch_size=16, epochs=2, verbose=0)
    evaluation = mean_teacher.evaluate(labeled, labels, batch_size=16, verbose=0)
    gap = max(float(np.abs(s - t).max()) for s, t in zip(student.get_weights(), teacher.get_weights()))
    return {"_model": teacher, "history": history.history, "evaluate": evaluation, "teacher_gap": gap,
            "teacher": teacher.predict(labeled[:4], verbose=0), "student": student.predict(labeled[:4], verbose=0)}
