"""p90 (keras.io's semi-supervised SimCLR) with the zipped train dataset made per replica, as multidev's refusal of
p90's two batch sizes asks: ``strategy.distribute_datasets_from_function`` zips each replica's share of the
unlabeled and the labeled batches (``ctx.get_per_replica_batch_size``: 8 + 2 rows on 2 replicas, TensorFlow's cut
of p90's global batch); everything else as p90."""

from tests.programs.keras.p90_semisupervised_simclr import SOURCE, run as _run  # noqa: F401


def run(keras, strategy, workdir, scale=1):
    return _run(keras, strategy, workdir, scale, per_replica_datasets=True)
