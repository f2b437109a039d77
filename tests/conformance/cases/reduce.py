"""Reductions and gathers, cross-replica and in replicas (strategy_common_test's ReduceTest,
GatherTest, mirrored_strategy_test, cross_device_ops_test)."""

from conformance_support import dtype_name, local, raises, replica_id, two_cpus, val


def _ids(tf, s, dtype=None):
    """A PerReplica of each replica's id (+1), as float32 unless ``dtype``."""
    return s.experimental_distribute_values_from_function(
        lambda ctx: tf.constant(ctx.replica_id_in_sync_group + 1, dtype=dtype or tf.float32))


def _rows(tf, s):
    """Replica r holds [[r, r+1]] (shape [1, 2])."""
    return s.experimental_distribute_values_from_function(
        lambda ctx: tf.constant([[float(ctx.replica_id_in_sync_group), ctx.replica_id_in_sync_group + 1.0]]))


def case_sum_scalar(tf):
    s = two_cpus(tf)
    return val(s.reduce(tf.distribute.ReduceOp.SUM, _ids(tf, s), axis=None))


def case_mean_scalar(tf):
    s = two_cpus(tf)
    return val(s.reduce(tf.distribute.ReduceOp.MEAN, _ids(tf, s), axis=None))


def case_sum_by_string(tf):
    s = two_cpus(tf)
    return val(s.reduce("SUM", _ids(tf, s), axis=None))


def case_mean_by_string(tf):
    s = two_cpus(tf)
    return val(s.reduce("MEAN", _ids(tf, s), axis=None))


def case_sum_axis0(tf):
    s = two_cpus(tf)
    return val(s.reduce("SUM", _rows(tf, s), axis=0))


def case_mean_axis0(tf):
    s = two_cpus(tf)
    return val(s.reduce("MEAN", _rows(tf, s), axis=0))


def case_sum_axis1(tf):
    s = two_cpus(tf)
    return val(s.reduce("SUM", _rows(tf, s), axis=1))


def case_mean_uneven_axis0(tf):
    s = two_cpus(tf)
    x = s.experimental_distribute_values_from_function(
        lambda ctx: tf.constant([1.0]) if ctx.replica_id_in_sync_group == 0 else tf.constant([2.0, 3.0]))
    return val(s.reduce("MEAN", x, axis=0))


def case_sum_vector_no_axis(tf):
    s = two_cpus(tf)
    return val(s.reduce("SUM", _rows(tf, s), axis=None))


def case_mean_int32(tf):
    s = two_cpus(tf)
    out = s.reduce("MEAN", _ids(tf, s, tf.int32), axis=None)
    return [val(out), dtype_name(out)]


def case_sum_int32(tf):
    s = two_cpus(tf)
    out = s.reduce("SUM", _ids(tf, s, tf.int32), axis=None)
    return [val(out), dtype_name(out)]


def case_mean_of_plain_tensor(tf):
    s = two_cpus(tf)
    return val(s.reduce("MEAN", tf.constant(4.0), axis=None))


def case_sum_of_plain_tensor(tf):
    s = two_cpus(tf)
    return val(s.reduce("SUM", tf.constant(4.0), axis=None))


def case_reduce_nested(tf):
    s = two_cpus(tf)
    x = _ids(tf, s)
    out = s.reduce("SUM", (x, {"k": x}), axis=None)
    return val(out)


def case_reduce_run_result(tf):
    s = two_cpus(tf)
    out = s.run(lambda: tf.constant([1.0, 2.0]) * float(replica_id(tf) + 1))
    return val(s.reduce("SUM", out, axis=0))


def case_reduce_in_replica_context(tf):
    s = two_cpus(tf)
    return s.run(lambda: s.reduce("SUM", tf.constant(1.0), axis=None))


def case_reduce_bad_op(tf):
    s = two_cpus(tf)
    return s.reduce("PRODUCT", _ids(tf, s), axis=None)


def case_reduce_mirrored_variable(tf):
    s = two_cpus(tf)
    with s.scope():
        v = tf.Variable(3.0)
    return [val(s.reduce("SUM", v, axis=None)), val(s.reduce("MEAN", v, axis=None))]


def case_gather_axis0(tf):
    s = two_cpus(tf)
    return val(s.gather(_rows(tf, s), axis=0))


def case_gather_axis1(tf):
    s = two_cpus(tf)
    return val(s.gather(_rows(tf, s), axis=1))


def case_gather_scalar(tf):
    s = two_cpus(tf)
    return val(s.gather(_ids(tf, s), axis=0))


def case_gather_uneven(tf):
    s = two_cpus(tf)
    x = s.experimental_distribute_values_from_function(
        lambda ctx: tf.constant([1.0]) if ctx.replica_id_in_sync_group == 0 else tf.constant([2.0, 3.0]))
    return val(s.gather(x, axis=0))


def case_gather_in_replica_context(tf):
    s = two_cpus(tf)
    return s.run(lambda: s.gather(tf.constant([1.0]), axis=0))


def case_all_reduce_sum(tf):
    s = two_cpus(tf)
    out = s.run(lambda: tf.distribute.get_replica_context().all_reduce("SUM", tf.constant(float(replica_id(tf) + 1))))
    return local(s, out)


def case_all_reduce_mean(tf):
    s = two_cpus(tf)
    out = s.run(lambda: tf.distribute.get_replica_context().all_reduce(
        tf.distribute.ReduceOp.MEAN, tf.constant([float(replica_id(tf)), 4.0])))
    return local(s, out)


def case_all_reduce_nested(tf):
    s = two_cpus(tf)

    def fn():
        x = tf.constant(float(replica_id(tf) + 1))
        return tf.distribute.get_replica_context().all_reduce("SUM", {"a": x, "b": (x * 2,)})
    out = s.run(fn)
    return [local(s, out["a"]), local(s, out["b"][0])]


def case_all_reduce_int(tf):
    s = two_cpus(tf)
    out = s.run(lambda: tf.distribute.get_replica_context().all_reduce("SUM", tf.constant(replica_id(tf) + 1)))
    return [local(s, out), dtype_name(s.experimental_local_results(out)[0])]


def case_all_gather_axis0(tf):
    s = two_cpus(tf)
    out = s.run(lambda: tf.distribute.get_replica_context().all_gather(tf.constant([float(replica_id(tf))]), axis=0))
    return local(s, out)


def case_all_gather_axis1(tf):
    s = two_cpus(tf)
    out = s.run(lambda: tf.distribute.get_replica_context().all_gather(
        tf.constant([[float(replica_id(tf))], [5.0]]), axis=1))
    return local(s, out)


def case_all_gather_scalar(tf):
    s = two_cpus(tf)
    out = s.run(lambda: tf.distribute.get_replica_context().all_gather(tf.constant(float(replica_id(tf))), axis=0))
    return local(s, out)


def case_all_reduce_gradient(tf):
    s = two_cpus(tf)
    with s.scope():
        w = tf.Variable(2.0)

    def fn():
        with tf.GradientTape() as tape:
            y = tf.distribute.get_replica_context().all_reduce("SUM", w * float(replica_id(tf) + 1))
        return tape.gradient(y, w)
    return local(s, s.run(fn))


def case_reduce_to_mirrored(tf):
    s = two_cpus(tf)
    with s.scope():
        v = tf.Variable(0.0)
    out = s.extended.reduce_to("SUM", _ids(tf, s), destinations=v)
    return [type(out).__name__, local(s, out)]


def case_batch_reduce_to(tf):
    s = two_cpus(tf)
    with s.scope():
        v = tf.Variable(0.0)
    x = _ids(tf, s)
    out = s.extended.batch_reduce_to("MEAN", [(x, v), (x, v)])
    return [local(s, o) for o in out]


def case_values_from_function_context(tf):
    s = two_cpus(tf)
    out = s.experimental_distribute_values_from_function(
        lambda ctx: (ctx.replica_id_in_sync_group, ctx.num_replicas_in_sync))
    return [type(out).__name__, local(s, out)]


def case_values_from_function_local_results(tf):
    s = two_cpus(tf)
    return local(s, _ids(tf, s))


def case_reduce_mean_empty_axis(tf):
    s = two_cpus(tf)
    x = s.experimental_distribute_values_from_function(lambda ctx: tf.constant([[1.0, 2.0]])[:0])
    return val(s.reduce("SUM", x, axis=0))


def case_all_reduce_plain_python(tf):
    s = two_cpus(tf)
    out = s.run(lambda: tf.distribute.get_replica_context().all_reduce("SUM", 1.0))
    return local(s, out)


def case_reduce_sum_two_calls_same(tf):
    s = two_cpus(tf)
    x = _ids(tf, s)
    return raises(lambda: s.reduce("SUM", x, axis=None)) is None and val(s.reduce("SUM", x, axis=None)) == 3.0
