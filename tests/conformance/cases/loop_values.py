"""What a custom loop does with the replicas' results: ``strategy.reduce`` (SUM/MEAN, ``axis=None``
and ``axis=0``) of per-replica losses and predictions of a partial last batch, ``strategy.gather``,
``experimental_local_results``, nested ``all_reduce`` in the replica context, the replica id in
arithmetic and ``merge_call`` from a loop step (the "Custom training" and "Distributed input"
tutorials, the tf.distribute guide)."""

from conformance_support import local, loop_dataset, loop_model, one_cpu, two_cpus, val

GLOBAL_BATCH = 3   # ten examples: slices [2, 1], [2, 1], [2, 1], [1, 0]


def _per_step(tf, s, fn):
    """``fn(s, per_replica_outputs)`` for every step of the ten examples in batches of three."""
    with s.scope():
        model = loop_model(tf)
    out = []
    for x, y in s.experimental_distribute_dataset(loop_dataset(tf, GLOBAL_BATCH)):
        logits = s.run(lambda x: model(x), args=(x,))
        out.append(fn(s, logits, y))
    return out


def _reductions(s, logits, y):
    return [val(s.reduce("SUM", logits, axis=0)), val(s.reduce("MEAN", logits, axis=0)),
            val(s.reduce("MEAN", y, axis=0)), val(s.reduce("SUM", y, axis=0))]


def case_reduce_logits_two_replicas(tf):
    return _per_step(tf, two_cpus(tf), _reductions)


def case_reduce_logits_one_replica(tf):
    return _per_step(tf, one_cpu(tf), _reductions)


def case_reduce_uneven_shapes_no_axis(tf):
    """``axis=None`` sums the replicas' tensors element-wise: shapes [2, 2] and [1, 2] do not add
    (TF 2.21: InvalidArgumentError)."""
    return _per_step(tf, two_cpus(tf), lambda s, logits, y: val(s.reduce("SUM", logits, axis=None)))


def case_reduce_uneven_shapes_one_replica(tf):
    return _per_step(tf, one_cpu(tf), lambda s, logits, y: val(s.reduce("SUM", logits, axis=None)))


def case_gather_logits_two_replicas(tf):
    return _per_step(tf, two_cpus(tf), lambda s, logits, y: [val(s.gather(logits, axis=0)), val(s.gather(y, axis=0))])


def case_gather_logits_one_replica(tf):
    return _per_step(tf, one_cpu(tf), lambda s, logits, y: [val(s.gather(logits, axis=0)), val(s.gather(y, axis=0))])


def case_local_results_of_step(tf):
    return _per_step(tf, two_cpus(tf), lambda s, logits, y: [local(s, logits), local(s, y)])


def case_mean_loss_of_partial_batch(tf):
    """``reduce(MEAN, per_replica_mean, axis=None)`` averages the replicas' means (not the examples)."""
    def fn(s, logits, y):
        per_replica_mean = s.run(lambda t: tf.reduce_mean(t), args=(logits,))
        return val(s.reduce("MEAN", per_replica_mean, axis=None))
    return _per_step(tf, two_cpus(tf), fn)


def case_all_reduce_nested_in_step(tf):
    s = two_cpus(tf)

    def replica_fn(x, y):
        ctx = tf.distribute.get_replica_context()
        count = tf.cast(tf.shape(y)[0], tf.float32)
        return ctx.all_reduce("SUM", {"sum": tf.reduce_sum(x, axis=0), "stats": (count, [tf.reduce_max(x)])})
    out = [s.run(replica_fn, args=(x, y)) for x, y in s.experimental_distribute_dataset(loop_dataset(tf, 4))]
    return [[local(s, o["sum"]), local(s, o["stats"][0]), local(s, o["stats"][1][0])] for o in out]


def case_all_reduce_mean_nested_tuple(tf):
    s = two_cpus(tf)

    def replica_fn():
        rid = tf.cast(tf.distribute.get_replica_context().replica_id_in_sync_group, tf.float32)
        return tf.distribute.get_replica_context().all_reduce("MEAN", (rid, (rid * 2.0, tf.stack([rid, 1.0]))))
    out = s.run(replica_fn)
    return [local(s, out[0]), local(s, out[1][0]), local(s, out[1][1])]


def case_replica_id_scales_input(tf):
    s = two_cpus(tf)

    def replica_fn(x):
        rid = tf.distribute.get_replica_context().replica_id_in_sync_group
        return x * tf.cast(rid + 1, tf.float32) + tf.cast(rid, tf.float32)
    dist = s.experimental_distribute_dataset(loop_dataset(tf, 4))
    return [local(s, s.run(replica_fn, args=(x,))) for x, _ in dist]


def case_replica_id_integer_math(tf):
    s = two_cpus(tf)

    def replica_fn():
        rid = tf.distribute.get_replica_context().replica_id_in_sync_group
        return [rid * 10 + 1, rid // 2, tf.equal(rid, 0)]
    out = s.run(replica_fn)
    return [local(s, o) for o in out]


def case_replica_id_times_float(tf):
    """The replica id is an int32 tensor: TF refuses to multiply it by a float tensor."""
    s = two_cpus(tf)
    return local(s, s.run(lambda: tf.distribute.get_replica_context().replica_id_in_sync_group * tf.constant(2.0)))


def case_replica_id_dataset_offset(tf):
    """A replica picks its own shard of a constant with the id (tf.gather)."""
    s = two_cpus(tf)
    table = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    out = s.run(lambda: tf.gather(table, tf.distribute.get_replica_context().replica_id_in_sync_group))
    return local(s, out)


def case_merge_call_reduces_loss(tf):
    """A step that reduces its loss in ``merge_call`` and applies an update to a variable there."""
    s = two_cpus(tf)
    with s.scope():
        total = tf.Variable(0.0)

    def merge_fn(strategy, loss):
        summed = strategy.reduce("SUM", loss, axis=None)
        strategy.extended.update(total, lambda var, value: var.assign_add(value), args=(summed,))
        return summed

    def replica_fn(x):
        loss = tf.reduce_sum(x)
        return tf.distribute.get_replica_context().merge_call(merge_fn, args=(loss,))
    dist = s.experimental_distribute_dataset(loop_dataset(tf, 4))
    seen = [local(s, s.run(replica_fn, args=(x,))) for x, _ in dist]
    return [seen, val(total.numpy())]


def case_total_loss_across_epochs(tf):
    """``total_loss += strategy.reduce(...)`` over two epochs of the same distributed dataset."""
    s = two_cpus(tf)
    dist = s.experimental_distribute_dataset(loop_dataset(tf, 4))
    totals = []
    for _ in range(2):
        total_loss, num_batches = 0.0, 0
        for x, _ in dist:
            total_loss += s.reduce("SUM", s.run(lambda x: tf.reduce_sum(x) / 4.0, args=(x,)), axis=None)
            num_batches += 1
        totals.append([val(total_loss), num_batches, val(total_loss / num_batches)])
    return totals
