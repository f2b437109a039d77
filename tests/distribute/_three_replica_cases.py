"""Pipelines split over three replicas (one worker), run on TensorFlow 2.21 by record_three_replica_split.py and
on multidev by test_three_replica_split.py: ``tf`` is either module. Each observation is every step's
per-replica rows."""

from __future__ import annotations

POLICIES = ("AUTO", "DATA", "OFF")


def pipelines(tf):
    D = tf.data.Dataset
    return {
        "batch_16_of_20": D.range(20).batch(16),
        "batch_16_of_20_mapped": D.range(20).batch(16).map(lambda x: x * 1),
        "batch_5_of_7": D.range(7).batch(5),
        "batch_4_of_4": D.range(4).batch(4),
        "batch_5_repeat": D.range(7).batch(5).repeat(2),
        "padded_7": D.range(1, 9).map(lambda n: tf.fill([n], n)).padded_batch(7),
    }


def observe(tf, strategy) -> dict:
    out = {}
    for policy in POLICIES:
        for name, dataset in pipelines(tf).items():
            options = tf.data.Options()
            options.experimental_distribute.auto_shard_policy = getattr(tf.data.experimental.AutoShardPolicy, policy)
            dist = strategy.experimental_distribute_dataset(dataset.with_options(options))
            out[f"{policy}/{name}"] = [[v.numpy().tolist() for v in strategy.experimental_local_results(b)]
                                       for b in dist]
    return out
