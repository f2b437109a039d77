"""OneDeviceStrategy (TensorFlow's one_device_strategy_test)."""

from conformance_support import local, raises, val


def _one(tf):
    return tf.distribute.OneDeviceStrategy("/cpu:0")


def case_num_replicas(tf):
    return _one(tf).num_replicas_in_sync


def case_run(tf):
    s = _one(tf)
    return val(s.run(lambda x: x + 1.0, args=(tf.constant(1.0),)))


def case_reduce(tf):
    s = _one(tf)
    out = s.run(lambda: tf.constant([1.0, 2.0]))
    return [val(s.reduce("SUM", out, axis=None)), val(s.reduce("MEAN", out, axis=0))]


def case_local_results(tf):
    s = _one(tf)
    return local(s, s.run(lambda: tf.constant(3.0)))


def case_dataset_not_split(tf):
    s = _one(tf)
    return [local(s, b) for b in s.experimental_distribute_dataset(tf.data.Dataset.range(4).batch(2))]


def case_variable(tf):
    s = _one(tf)
    with s.scope():
        v = tf.Variable(2.0)
    s.run(lambda: v.assign_add(1.0))
    return [val(v), local(s, v)]


def case_replica_context(tf):
    s = _one(tf)
    out = s.run(lambda: tf.constant(float(tf.distribute.get_replica_context().replica_id_in_sync_group)))
    return val(out)


def case_merge_call(tf):
    s = _one(tf)

    def fn():
        return tf.distribute.get_replica_context().merge_call(
            lambda strategy: tf.constant(float(tf.distribute.in_cross_replica_context())))
    return val(s.run(fn))


def case_extended_devices(tf):
    s = _one(tf)
    return [len(s.extended.worker_devices), len(s.extended.parameter_devices)]


def case_gather(tf):
    s = _one(tf)
    return val(s.gather(s.run(lambda: tf.constant([1.0, 2.0])), axis=0))


def case_scope_mixing(tf):
    s, t = _one(tf), _one(tf)

    def enter():
        with s.scope(), t.scope():
            pass
    return raises(enter)
