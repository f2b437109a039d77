"""``merge_call`` and the strategy's own surface (distribute_lib_test, mirrored_strategy_test's
MirroredStrategyCallForEachReplicaTest, strategy_common_test)."""

from conformance_support import local, raises, replica_id, two_cpus, val


def case_merge_call_sees_per_replica(tf):
    s = two_cpus(tf)

    def fn():
        x = tf.constant(float(replica_id(tf) + 1))
        return tf.distribute.get_replica_context().merge_call(
            lambda strategy, value: strategy.reduce("SUM", value, axis=None), args=(x,))
    return local(s, s.run(fn))


def case_merge_call_is_cross_replica(tf):
    s = two_cpus(tf)

    def fn():
        return tf.distribute.get_replica_context().merge_call(
            lambda strategy: tf.constant(float(tf.distribute.in_cross_replica_context())))
    return local(s, s.run(fn))


def case_merge_call_strategy_argument(tf):
    s = two_cpus(tf)

    def fn():
        return tf.distribute.get_replica_context().merge_call(lambda strategy: tf.constant(float(strategy is s)))
    return local(s, s.run(fn))


def case_merge_call_kwargs(tf):
    s = two_cpus(tf)

    def fn():
        return tf.distribute.get_replica_context().merge_call(
            lambda strategy, a, b: strategy.reduce("MEAN", a, axis=None) + b,
            args=(tf.constant(float(replica_id(tf))),), kwargs={"b": 10.0})
    return local(s, s.run(fn))


def case_merge_call_returns_per_replica(tf):
    s = two_cpus(tf)

    def fn():
        x = tf.constant(float(replica_id(tf)))
        return tf.distribute.get_replica_context().merge_call(lambda strategy, v: v, args=(x,))
    return local(s, s.run(fn))


def case_merge_call_user_error(tf):
    s = two_cpus(tf)

    def merge(strategy):
        raise ZeroDivisionError("merge")
    return s.run(lambda: tf.distribute.get_replica_context().merge_call(merge))


def case_call_for_each_replica_in_merge_call_error(tf):
    s = two_cpus(tf)

    def inner():
        raise IndexError("user's own")

    def merge(strategy):
        return strategy.extended.call_for_each_replica(inner)
    return s.run(lambda: tf.distribute.get_replica_context().merge_call(merge))


def case_call_for_each_replica_in_merge_call(tf):
    s = two_cpus(tf)

    def merge(strategy):
        return strategy.extended.call_for_each_replica(lambda: tf.constant(float(replica_id(tf) + 5)))
    out = s.run(lambda: tf.distribute.get_replica_context().merge_call(merge))
    return local(s, out)


def case_call_for_each_replica(tf):
    s = two_cpus(tf)
    with s.scope():
        out = s.extended.call_for_each_replica(lambda x: x * float(replica_id(tf) + 1), args=(tf.constant(2.0),))
    return local(s, out)


def case_two_merge_calls(tf):
    s = two_cpus(tf)

    def fn():
        ctx = tf.distribute.get_replica_context()
        a = ctx.merge_call(lambda strategy: tf.constant(1.0))
        b = ctx.merge_call(lambda strategy: tf.constant(2.0))
        return a + b
    return local(s, s.run(fn))


def case_scope_of_other_strategy(tf):
    s = two_cpus(tf)
    other = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])

    def enter():
        with s.scope(), other.scope():
            pass
    return raises(enter)


def case_scope_reentrant(tf):
    s = two_cpus(tf)
    with s.scope():
        with s.scope():
            inner = tf.distribute.get_strategy() is s
    return inner


def case_scope_returns_strategy(tf):
    s = two_cpus(tf)
    with s.scope() as entered:
        return entered is s


def case_cluster_resolver(tf):
    return two_cpus(tf).cluster_resolver is None


def case_extended_devices(tf):
    s = two_cpus(tf)
    return [len(s.extended.worker_devices), len(s.extended.parameter_devices)]


def case_worker_device_names(tf):
    return [d.lower() for d in two_cpus(tf).extended.worker_devices]


def case_should_checkpoint(tf):
    e = two_cpus(tf).extended
    return [e.should_checkpoint, e.should_save_summary]


def case_replica_context_devices(tf):
    s = two_cpus(tf)
    out = s.run(lambda: tf.constant(float(len(tf.distribute.get_replica_context().devices))))
    return local(s, out)


def case_get_cross_replica_context(tf):
    s = two_cpus(tf)
    with s.scope():
        return tf.distribute.get_cross_replica_context() is s


def case_experimental_set_strategy(tf):
    s = two_cpus(tf)
    tf.distribute.experimental_set_strategy(s)
    try:
        inside = [tf.distribute.get_strategy() is s, tf.distribute.has_strategy()]
    finally:
        tf.distribute.experimental_set_strategy(None)
    return inside + [tf.distribute.has_strategy()]


def case_distributed_values_isinstance(tf):
    s = two_cpus(tf)
    with s.scope():
        v = tf.Variable(1.0)
    out = s.run(lambda: tf.constant(float(replica_id(tf))))
    return [isinstance(v, tf.distribute.DistributedValues), isinstance(out, tf.distribute.DistributedValues),
            isinstance(tf.constant(1.0), tf.distribute.DistributedValues)]


def case_run_result_values_attribute(tf):
    s = two_cpus(tf)
    return val(s.run(lambda: tf.constant(float(replica_id(tf)))).values)


def case_mirrored_default_devices(tf):
    return tf.distribute.MirroredStrategy().num_replicas_in_sync
