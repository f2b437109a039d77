"""p67 (keras.io's metric learning) with the pairs yielded as a tuple ``(anchors, positives)`` of two batches of
``num_classes`` rows, the workaround ``data = data[0]`` skipped and the labels ``ops.arange`` of the rows the step
sees: on replicas each replica takes its classes' anchors and positives and its similarity matrix compares only
those (a softmax over fewer candidates), as on TensorFlow's MirroredStrategy."""

from tests.programs.keras import p67_metric_learning

SOURCE = p67_metric_learning.SOURCE


def run(keras, strategy, workdir, scale=1):
    return p67_metric_learning.run(keras, strategy, workdir, scale, pairs_as_tuple=True)
