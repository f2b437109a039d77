"""p82 (keras.io's DDIM) with the step's batch taken from the images (``ops.shape(images)[0]``) instead of the
example's global ``batch_size`` constant, so that it runs on replicas: see p82."""

from tests.programs.keras.p82_ddim import SOURCE, run as _run  # noqa: F401


def run(keras, strategy, workdir, scale=1):
    return _run(keras, strategy, workdir, scale, replica_batch=True)
