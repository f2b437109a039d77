"""``strategy.run`` and the replica context (TensorFlow's mirrored_strategy_test, strategy_common_test)."""

from conformance_support import local, replica_id, two_cpus, val


def case_replica_ids(tf):
    s = two_cpus(tf)
    return local(s, s.run(lambda: tf.constant(float(replica_id(tf)))))


def case_num_replicas_in_sync(tf):
    s = two_cpus(tf)
    return [s.num_replicas_in_sync, val(s.run(lambda: tf.distribute.get_replica_context().num_replicas_in_sync))]


def case_returns_variable_itself(tf):
    s = two_cpus(tf)
    with s.scope():
        v = tf.Variable(1.0)
    return s.run(lambda: v) is v


def case_returns_variable_in_tuple(tf):
    s = two_cpus(tf)
    with s.scope():
        v = tf.Variable(1.0)
    out = s.run(lambda: (v, tf.constant(2.0)))
    return [out[0] is v, type(out[1]).__name__]


def case_assign_add_result_kind(tf):
    s = two_cpus(tf)
    with s.scope():
        v = tf.Variable(1.0)
    out = s.run(lambda: v.assign_add(1.0))
    return [type(out).__name__, local(s, out), val(v)]


def case_plain_python_same(tf):
    s = two_cpus(tf)
    out = s.run(lambda: 7)
    return [val(out), local(s, out)]


def case_plain_python_differ(tf):
    s = two_cpus(tf)
    out = s.run(lambda: replica_id(tf) * 10)
    return [type(out).__name__, local(s, out)]


def case_plain_string(tf):
    s = two_cpus(tf)
    out = s.run(lambda: "same")
    return [val(out), local(s, out)]


def case_none_result(tf):
    s = two_cpus(tf)
    out = s.run(lambda: None)
    return [out is None, local(s, out)]


def case_tuple_result(tf):
    s = two_cpus(tf)
    out = s.run(lambda: (tf.constant(1.0), tf.constant(float(replica_id(tf)))))
    return [type(out).__name__, len(out), local(s, out[0]), local(s, out[1])]


def case_dict_result(tf):
    s = two_cpus(tf)
    out = s.run(lambda: {"a": tf.constant(float(replica_id(tf))), "b": tf.constant(2.0)})
    return [sorted(out), local(s, out["a"]), local(s, out["b"])]


def case_local_results_of_structure(tf):
    s = two_cpus(tf)
    out = s.run(lambda: {"a": tf.constant(float(replica_id(tf)))})
    return val(s.experimental_local_results(out))


def case_per_replica_args(tf):
    s = two_cpus(tf)
    x = s.experimental_distribute_values_from_function(lambda ctx: tf.constant(float(ctx.replica_id_in_sync_group + 1)))
    return local(s, s.run(lambda a: a * 2, args=(x,)))


def case_per_replica_kwargs(tf):
    s = two_cpus(tf)
    x = s.experimental_distribute_values_from_function(lambda ctx: tf.constant(float(ctx.replica_id_in_sync_group)))
    return local(s, s.run(lambda a, b: a + b, args=(x,), kwargs={"b": tf.constant(10.0)}))


def case_plain_tensor_arg(tf):
    s = two_cpus(tf)
    return local(s, s.run(lambda a: a + 1.0, args=(tf.constant(3.0),)))


def case_nested_per_replica_args(tf):
    s = two_cpus(tf)
    x = s.experimental_distribute_values_from_function(lambda ctx: tf.constant(float(ctx.replica_id_in_sync_group)))
    return local(s, s.run(lambda d: d["x"] + d["y"][0], args=({"x": x, "y": (x,)},)))


def case_mismatched_structures(tf):
    s = two_cpus(tf)

    def fn():
        return tf.constant(1.0) if replica_id(tf) == 0 else (tf.constant(1.0), tf.constant(2.0))
    return val(s.run(fn))


def case_mismatched_dict_keys(tf):
    s = two_cpus(tf)

    def fn():
        return {"a": tf.constant(1.0)} if replica_id(tf) == 0 else {"b": tf.constant(1.0)}
    return val(s.run(fn))


def case_cross_replica_flags(tf):
    s = two_cpus(tf)
    with s.scope():
        outside = [tf.distribute.in_cross_replica_context(), tf.distribute.get_replica_context() is None,
                   tf.distribute.has_strategy(), tf.distribute.get_strategy() is s]
    inside = s.run(lambda: tf.constant(float(tf.distribute.in_cross_replica_context())))
    return [outside, local(s, inside)]


def case_strategy_inside_run(tf):
    s = two_cpus(tf)
    out = s.run(lambda: tf.constant(float(tf.distribute.get_strategy() is s)))
    return local(s, out)


def case_replica_context_strategy(tf):
    s = two_cpus(tf)
    out = s.run(lambda: tf.constant(float(tf.distribute.get_replica_context().strategy is s)))
    return local(s, out)


def case_outside_scope_flags(tf):
    return [tf.distribute.has_strategy(), tf.distribute.in_cross_replica_context(),
            tf.distribute.get_replica_context() is not None]


def case_run_inside_scope(tf):
    s = two_cpus(tf)
    with s.scope():
        out = s.run(lambda: tf.constant(float(replica_id(tf))))
    return local(s, out)


def case_user_error_propagates(tf):
    s = two_cpus(tf)

    def fn():
        raise KeyError("user")
    return s.run(fn)


def case_error_in_one_replica(tf):
    s = two_cpus(tf)

    def fn():
        if replica_id(tf) == 1:
            raise ValueError("replica 1")
        return tf.constant(1.0)
    return s.run(fn)


def case_run_twice_same_strategy(tf):
    s = two_cpus(tf)
    a = s.run(lambda: tf.constant(1.0))
    b = s.run(lambda: tf.constant(2.0))
    return [local(s, a), local(s, b)]


def case_run_non_callable(tf):
    s = two_cpus(tf)
    return s.run(3)


def case_mismatched_tuple_then_tensor(tf):
    s = two_cpus(tf)

    def fn():
        return (tf.constant(1.0), tf.constant(2.0)) if replica_id(tf) == 0 else tf.constant(1.0)
    return val(s.run(fn))


def case_mismatched_list_lengths(tf):
    s = two_cpus(tf)

    def fn():
        return [tf.constant(1.0)] * (1 + replica_id(tf))
    return val(s.run(fn))


def case_assign_add_result_read_later(tf):
    s = two_cpus(tf)
    with s.scope():
        v = tf.Variable(1.0)
    out = s.run(lambda: v.assign_add(1.0))
    v.assign(10.0)
    return local(s, out)
