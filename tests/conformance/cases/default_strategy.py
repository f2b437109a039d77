"""The default strategy, in effect outside every scope (distribute_lib_test, issue 24 item 7)."""

from conformance_support import local, raises, val


def case_num_replicas(tf):
    return tf.distribute.get_strategy().num_replicas_in_sync


def case_reduce_sum_returns_value(tf):
    return val(tf.distribute.get_strategy().reduce("SUM", tf.constant(3.0), axis=None))


def case_reduce_mean_returns_value(tf):
    return val(tf.distribute.get_strategy().reduce("MEAN", tf.constant([3.0, 5.0]), axis=None))


def case_reduce_sum_axis(tf):
    return val(tf.distribute.get_strategy().reduce("SUM", tf.constant([3.0, 5.0]), axis=0))


def case_reduce_mean_axis(tf):
    return val(tf.distribute.get_strategy().reduce("MEAN", tf.constant([3.0, 5.0]), axis=0))


def case_run(tf):
    return val(tf.distribute.get_strategy().run(lambda x: x * 2, args=(tf.constant(2.0),)))


def case_local_results(tf):
    return local(tf.distribute.get_strategy(), tf.constant(1.0))


def case_replica_context(tf):
    ctx = tf.distribute.get_replica_context()
    return [ctx is not None, val(ctx.replica_id_in_sync_group), ctx.num_replicas_in_sync]


def case_merge_call_context(tf):
    ctx = tf.distribute.get_replica_context()
    return ctx.merge_call(lambda strategy: [tf.distribute.in_cross_replica_context(),
                                            tf.distribute.get_replica_context() is None])


def case_merge_call_args(tf):
    ctx = tf.distribute.get_replica_context()
    return val(ctx.merge_call(lambda strategy, x, y=0.0: x + y, args=(tf.constant(1.0),), kwargs={"y": 2.0}))


def case_all_reduce_identity(tf):
    return val(tf.distribute.get_replica_context().all_reduce("SUM", tf.constant(2.0)))


def case_not_cross_replica(tf):
    return [tf.distribute.in_cross_replica_context(), tf.distribute.has_strategy()]


def case_scope_variable(tf):
    with tf.distribute.get_strategy().scope():
        v = tf.Variable(1.0)
    v.assign_add(1.0)
    return [val(v), type(v).__name__ in ("ResourceVariable", "Variable")]


def case_gather(tf):
    return val(tf.distribute.get_strategy().gather(tf.constant([1.0, 2.0]), axis=0))


def case_extended_update(tf):
    v = tf.Variable(1.0)
    tf.distribute.get_strategy().extended.update(v, lambda var, x: var.assign(x), args=(4.0,))
    return val(v)


def case_values_from_function(tf):
    return val(tf.distribute.get_strategy().experimental_distribute_values_from_function(
        lambda ctx: tf.constant(float(ctx.replica_id_in_sync_group))))


def case_distribute_dataset(tf):
    s = tf.distribute.get_strategy()
    return [local(s, b) for b in s.experimental_distribute_dataset(tf.data.Dataset.range(4).batch(2))]


def case_cross_replica_reduce_bad_op(tf):
    return raises(tf.distribute.get_strategy().reduce, "MAX", tf.constant(1.0), None)
