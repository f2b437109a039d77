"""Distributed variables (TensorFlow's values_test, mirrored_variable_test, mirrored_strategy_test)."""

from conformance_support import local, raises, replica_id, two_cpus, val


def _mirrored(tf, value=1.0, **kwargs):
    with two_cpus(tf).scope():
        return tf.Variable(value, **kwargs)


def _on_read(tf, aggregation, value=0.0):
    with two_cpus(tf).scope():
        return tf.Variable(value, synchronization=tf.VariableSynchronization.ON_READ, aggregation=aggregation)


def case_kind_in_scope(tf):
    return type(_mirrored(tf)).__name__


def case_kind_on_read(tf):
    return type(_on_read(tf, tf.VariableAggregation.SUM)).__name__


def case_names_of_copies(tf):
    v = _mirrored(tf, name="weights")
    return [v.name] + [c.name for c in v.values]


def case_unnamed_name(tf):
    a, b = _mirrored(tf), _mirrored(tf)
    return [a.name, b.name]


def case_trainable_defaults(tf):
    return [_mirrored(tf).trainable, _on_read(tf, tf.VariableAggregation.SUM).trainable]


def case_aggregation_property(tf):
    v = _mirrored(tf, aggregation=tf.VariableAggregation.MEAN)
    return [v.aggregation.name, v.synchronization.name]


def case_local_results(tf):
    return local(two_cpus(tf), _mirrored(tf, [1.0, 2.0]))


def case_cross_replica_assign(tf):
    v = _mirrored(tf)
    v.assign(4.0)
    return val(v)


def case_cross_replica_assign_add_sub(tf):
    v = _mirrored(tf)
    v.assign_add(3.0)
    v.assign_sub(1.0)
    return val(v)


def case_assign_returns(tf):
    v = _mirrored(tf)
    return val(v.assign(2.0))


def case_cross_replica_assign_per_replica(tf):
    s = two_cpus(tf)
    v = _mirrored(tf)
    x = s.experimental_distribute_values_from_function(lambda ctx: tf.constant(float(ctx.replica_id_in_sync_group)))
    return [raises(v.assign, x), local(s, v)]


def case_read_value(tf):
    return val(_mirrored(tf, 3.0).read_value())


def case_arithmetic(tf):
    v = _mirrored(tf, 3.0)
    return [val(v * 2), val(v + v), val(-v)]


def case_float_of_variable(tf):
    return float(_mirrored(tf, 3.0))


def case_numpy(tf):
    return val(_mirrored(tf, [[1.0, 2.0]]).numpy())


def case_shape_dtype(tf):
    v = _mirrored(tf, [[1.0, 2.0]])
    return [list(v.shape), str(v.dtype).replace("torch.", "").replace("<dtype: '", "").replace("'>", "")]


def case_replica_reads_own_copy(tf):
    s = two_cpus(tf)
    v = _on_read(tf, tf.VariableAggregation.SUM)
    s.run(lambda: v.assign(float(replica_id(tf) + 1)))
    return local(s, s.run(lambda: v.read_value()))


def case_on_read_sum(tf):
    s = two_cpus(tf)
    v = _on_read(tf, tf.VariableAggregation.SUM)
    s.run(lambda: v.assign(float(replica_id(tf) + 1)))
    return [val(v.read_value()), local(s, v)]


def case_on_read_mean(tf):
    s = two_cpus(tf)
    v = _on_read(tf, tf.VariableAggregation.MEAN)
    s.run(lambda: v.assign(float(replica_id(tf) + 1)))
    return val(v.read_value())


def case_on_read_only_first(tf):
    s = two_cpus(tf)
    v = _on_read(tf, tf.VariableAggregation.ONLY_FIRST_REPLICA)
    s.run(lambda: v.assign(float(replica_id(tf) + 1)))
    return val(v.read_value())


def case_on_read_assign_add_in_replicas(tf):
    s = two_cpus(tf)
    v = _on_read(tf, tf.VariableAggregation.SUM)
    s.run(lambda: v.assign_add(1.0))
    s.run(lambda: v.assign_add(float(replica_id(tf))))
    return [val(v.read_value()), local(s, v)]


def case_on_read_cross_assign_sum(tf):
    s = two_cpus(tf)
    v = _on_read(tf, tf.VariableAggregation.SUM)
    v.assign(6.0)
    return [val(v.read_value()), local(s, v)]


def case_on_read_cross_assign_mean(tf):
    s = two_cpus(tf)
    v = _on_read(tf, tf.VariableAggregation.MEAN)
    v.assign(6.0)
    return [val(v.read_value()), local(s, v)]


def case_on_read_cross_assign_add_sum(tf):
    v = _on_read(tf, tf.VariableAggregation.SUM)
    return v.assign_add(1.0) is not None


def case_on_read_cross_assign_add_mean(tf):
    s = two_cpus(tf)
    v = _on_read(tf, tf.VariableAggregation.MEAN)
    v.assign_add(2.0)
    return local(s, v)


def case_on_read_run_returns(tf):
    s = two_cpus(tf)
    v = _on_read(tf, tf.VariableAggregation.SUM)
    out = s.run(lambda: v)
    return [out is v, type(out).__name__]


def case_distribute_strategy_property(tf):
    s = two_cpus(tf)
    return [_mirrored(tf).distribute_strategy is s, _on_read(tf, tf.VariableAggregation.SUM).distribute_strategy is s]


def case_variable_created_in_scope(tf):
    s = two_cpus(tf)
    plain = tf.Variable(1.0)
    return [s.extended.variable_created_in_scope(_mirrored(tf)), s.extended.variable_created_in_scope(plain)]


def case_created_in_run(tf):
    s = two_cpus(tf)
    out = s.run(lambda: tf.Variable(1.0, name="foo"))
    return [type(out).__name__, out.name, local(s, out)]


def case_created_in_call_for_each_replica(tf):
    s = two_cpus(tf)
    with s.scope():
        out = s.extended.call_for_each_replica(lambda: tf.Variable(2.0, name="bar"))
    return [type(out).__name__, out.name, local(s, out)]


def case_created_in_run_then_used(tf):
    s = two_cpus(tf)
    v = s.run(lambda: tf.Variable(1.0, name="baz"))
    s.run(lambda: v.assign_add(1.0))
    return local(s, v)


def case_plain_variable_outside_scope(tf):
    v = tf.Variable(1.0)
    v.assign_add(2.0)
    return [type(v).__name__ in ("ResourceVariable", "Variable"), val(v)]


def case_gradient_in_replica(tf):
    s = two_cpus(tf)
    v = _mirrored(tf, 2.0)

    def fn():
        with tf.GradientTape() as tape:
            y = v * v * float(replica_id(tf) + 1)
        return tape.gradient(y, v)
    return local(s, s.run(fn))


def case_grads_and_vars_usable_after_run(tf):
    s = two_cpus(tf)
    v = _mirrored(tf, 2.0)

    def fn():
        with tf.GradientTape() as tape:
            y = v * float(replica_id(tf) + 1)
        return tape.gradient(y, v), v
    grad, var = s.run(fn)
    var.assign_sub(s.reduce("SUM", grad, axis=None))
    return [var is v, val(v)]


def case_extended_update(tf):
    s = two_cpus(tf)
    v = _mirrored(tf, 1.0)
    out = s.extended.update(v, lambda var, x: var.assign(x), args=(5.0,))
    return [type(out).__name__, local(s, out), local(s, v)]


def case_extended_update_per_replica_arg(tf):
    s = two_cpus(tf)
    v = _mirrored(tf, 1.0)
    x = s.experimental_distribute_values_from_function(lambda ctx: tf.constant(float(ctx.replica_id_in_sync_group)))
    s.extended.update(v, lambda var, d: var.assign_add(d), args=(x,))
    return local(s, v)


def case_extended_update_ungrouped(tf):
    s = two_cpus(tf)
    v = _mirrored(tf, 1.0)
    out = s.extended.update(v, lambda var: var.assign_add(1.0), group=False)
    return [type(out).__name__, len(out)]


def case_extended_update_in_replica(tf):
    s = two_cpus(tf)
    v = _mirrored(tf, 1.0)
    return s.run(lambda: s.extended.update(v, lambda var: var.assign(2.0)))


def case_non_slot_devices(tf):
    s = two_cpus(tf)
    return len(s.extended.non_slot_devices([_mirrored(tf)]))


def case_update_non_slot(tf):
    s = two_cpus(tf)
    devices = s.extended.non_slot_devices([_mirrored(tf)])
    return val(s.extended.update_non_slot(devices, lambda: tf.constant(3.0)))


def case_colocate_vars_with(tf):
    s = two_cpus(tf)
    v = _mirrored(tf)
    with s.scope(), s.extended.colocate_vars_with(v):
        w = tf.Variable(2.0)
    return [type(w).__name__, local(s, w)]


def case_variable_in_two_strategies_scope(tf):
    v = _mirrored(tf)
    other = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    return other.extended.variable_created_in_scope(v)


def case_int_variable(tf):
    s = two_cpus(tf)
    v = _mirrored(tf, 3)
    v.assign_add(2)
    return [local(s, v), v.trainable]
