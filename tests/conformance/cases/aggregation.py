"""Writes to distributed variables under each aggregation (values_test, mirrored_variable_test):
every (aggregation x assign/assign_add/assign_sub x value kind) in replica context, and each
aggregation's writes in cross-replica context (TensorFlow's rules, issue 24 item 2)."""

from conformance_support import local, replica_id, two_cpus

_AGGREGATIONS = ("NONE", "SUM", "MEAN", "ONLY_FIRST_REPLICA")
_OPS = ("assign", "assign_add", "assign_sub")
_CONSTANT = 5.0


def _value(tf, kind):
    """What each replica writes: one Python float object (the same in every replica), a tensor
    made in the replica (equal values), or a value that differs between replicas."""
    if kind == "python":
        return _CONSTANT
    if kind == "tensor":
        return tf.constant(5.0)
    return tf.constant(float(replica_id(tf) + 1))


def _in_replicas(aggregation, op, kind):
    def case(tf):
        s = two_cpus(tf)
        with s.scope():
            v = tf.Variable(1.0, aggregation=getattr(tf.VariableAggregation, aggregation))
        s.run(lambda: getattr(v, op)(_value(tf, kind)))
        return local(s, v)
    return case


def _cross_replica(aggregation, op):
    def case(tf):
        s = two_cpus(tf)
        with s.scope():
            v = tf.Variable(1.0, aggregation=getattr(tf.VariableAggregation, aggregation))
        getattr(v, op)(_CONSTANT)
        return local(s, v)
    return case


def _on_read_in_replicas(aggregation, op):
    def case(tf):
        s = two_cpus(tf)
        with s.scope():
            v = tf.Variable(1.0, synchronization=tf.VariableSynchronization.ON_READ,
                            aggregation=getattr(tf.VariableAggregation, aggregation))
        s.run(lambda: getattr(v, op)(tf.constant(float(replica_id(tf) + 1))))
        return [local(s, v), float(v.read_value())]
    return case


for _agg in _AGGREGATIONS:
    for _op in _OPS:
        for _kind in ("python", "tensor", "per_replica"):
            globals()[f"case_{_agg.lower()}_{_op}_{_kind}_in_replicas"] = _in_replicas(_agg, _op, _kind)
        globals()[f"case_{_agg.lower()}_{_op}_cross_replica"] = _cross_replica(_agg, _op)
        globals()[f"case_on_read_{_agg.lower()}_{_op}_in_replicas"] = _on_read_in_replicas(_agg, _op)


def _int_variable_in_replicas(aggregation, kind):
    def case(tf):
        s = two_cpus(tf)
        with s.scope():
            v = tf.Variable(1, aggregation=getattr(tf.VariableAggregation, aggregation))
        s.run(lambda: v.assign_add(3 if kind == "python" else tf.constant(replica_id(tf) + 3)))
        return local(s, v)
    return case


for _agg in ("SUM", "MEAN", "ONLY_FIRST_REPLICA"):
    for _kind in ("python", "per_replica"):
        globals()[f"case_int_{_agg.lower()}_assign_add_{_kind}_in_replicas"] = _int_variable_in_replicas(_agg, _kind)


def case_sum_assign_python_zero_in_replicas(tf):
    s = two_cpus(tf)
    with s.scope():
        v = tf.Variable(1.0, aggregation=tf.VariableAggregation.SUM)
    s.run(lambda: v.assign(0.0))
    return local(s, v)


def case_sum_assign_add_per_replica_twice(tf):
    s = two_cpus(tf)
    with s.scope():
        v = tf.Variable(0.0, aggregation=tf.VariableAggregation.SUM)
    for _ in range(2):
        s.run(lambda: v.assign_add(tf.constant(float(replica_id(tf) + 1))))
    return local(s, v)


def case_mean_assign_cross_replica_per_replica_value(tf):
    s = two_cpus(tf)
    with s.scope():
        v = tf.Variable(0.0, aggregation=tf.VariableAggregation.MEAN)
    x = s.experimental_distribute_values_from_function(lambda ctx: tf.constant(float(ctx.replica_id_in_sync_group)))
    v.assign(x)
    return local(s, v)
