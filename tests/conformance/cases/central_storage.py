"""CentralStorageStrategy (TensorFlow's central_storage_strategy_test): one copy, aggregated writes."""

from conformance_support import local, replica_id, val


def _central(tf):
    return tf.distribute.experimental.CentralStorageStrategy(["/cpu:0", "/cpu:1"])


def _after_replica_write(tf, aggregation, delta):
    """The central variable (1.0) after every replica adds ``delta(tf)``."""
    s = _central(tf)
    with s.scope():
        v = tf.Variable(1.0, aggregation=aggregation)
    s.run(lambda: v.assign_add(delta(tf)))
    return val(v.read_value())


def case_sum_write_of_replica_tensors(tf):
    return _after_replica_write(tf, tf.VariableAggregation.SUM, lambda tf: tf.constant(1.0))


def case_sum_write_of_python_constant(tf):
    return _after_replica_write(tf, tf.VariableAggregation.SUM, lambda tf: 1.0)


def case_none_write_in_replicas(tf):
    return _after_replica_write(tf, tf.VariableAggregation.NONE, lambda tf: 1.0)


def case_one_local_result(tf):
    s = _central(tf)
    with s.scope():
        v = tf.Variable(1.0)
    return len(s.experimental_local_results(v))


def case_run_replica_ids(tf):
    s = _central(tf)
    return local(s, s.run(lambda: tf.constant(float(replica_id(tf)))))
