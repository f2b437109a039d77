"""Cross-device reductions and strategy options (TensorFlow's cross_device_ops_test, strategy_common_test,
mirrored_strategy_test's cross_device_ops cases, the "Distributed training with TensorFlow" guide)."""

from conformance_support import local, raises, val


def _with(tf, cross_device_ops):
    return tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"], cross_device_ops=cross_device_ops)


def _ids(tf, s):
    return s.experimental_distribute_values_from_function(
        lambda ctx: tf.constant([float(ctx.replica_id_in_sync_group + 1)] * 2))


def case_reduction_to_one_device_sum(tf):
    s = _with(tf, tf.distribute.ReductionToOneDevice())
    return val(s.reduce("SUM", _ids(tf, s), axis=None))


def case_reduction_to_one_device_mean_axis(tf):
    s = _with(tf, tf.distribute.ReductionToOneDevice(reduce_to_device="/cpu:0"))
    return val(s.reduce("MEAN", _ids(tf, s), axis=0))


def case_cross_device_ops_reduce(tf):
    ops = tf.distribute.ReductionToOneDevice()
    s = _with(tf, ops)
    out = ops.reduce(tf.distribute.ReduceOp.SUM, _ids(tf, s), destinations="/cpu:0")
    return val(out)


def case_cross_device_ops_batch_reduce(tf):
    ops = tf.distribute.ReductionToOneDevice()
    s = _with(tf, ops)
    x = _ids(tf, s)
    return [val(o) for o in ops.batch_reduce(tf.distribute.ReduceOp.MEAN, [(x, "/cpu:0"), (x, "/cpu:0")])]


def case_cross_device_ops_broadcast(tf):
    ops = tf.distribute.ReductionToOneDevice()
    out = ops.broadcast(tf.constant(2.0), destinations="/cpu:0")
    return val(out)


def case_reduce_op_enum_names(tf):
    return [tf.distribute.ReduceOp.SUM.name, tf.distribute.ReduceOp.MEAN.name, tf.distribute.ReduceOp.SUM.value]


def case_reduce_op_from_variable_aggregation(tf):
    return tf.distribute.ReduceOp.from_variable_aggregation(tf.VariableAggregation.MEAN).name


def case_variable_aggregation_names(tf):
    return [a.name for a in (tf.VariableAggregation.NONE, tf.VariableAggregation.SUM, tf.VariableAggregation.MEAN,
                             tf.VariableAggregation.ONLY_FIRST_REPLICA)]


def case_variable_synchronization_names(tf):
    return [a.name for a in (tf.VariableSynchronization.AUTO, tf.VariableSynchronization.NONE,
                             tf.VariableSynchronization.ON_WRITE, tf.VariableSynchronization.ON_READ)]


def case_bad_cross_device_ops(tf):
    return raises(tf.distribute.MirroredStrategy, ["/cpu:0", "/cpu:1"], cross_device_ops="nccl")


def case_duplicate_devices(tf):
    return tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:0"]).num_replicas_in_sync


def case_unknown_device(tf):
    return raises(tf.distribute.MirroredStrategy, ["/cpu:0", "/cpu:7"])


def case_one_device_strategy_bad_device(tf):
    return raises(tf.distribute.OneDeviceStrategy, "/gpu:7") is None


def case_all_reduce_in_function(tf):
    s = _with(tf, tf.distribute.ReductionToOneDevice())

    @tf.function
    def step():
        return s.run(lambda: tf.distribute.get_replica_context().all_reduce("SUM", tf.constant(1.5)))
    return local(s, step())


def case_loop_over_dataset_in_function(tf):
    s = _with(tf, tf.distribute.ReductionToOneDevice())
    dist = s.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices([float(i) for i in range(8)]).batch(4))

    @tf.function
    def total(dataset):
        result = tf.constant(0.0)
        for batch in dataset:
            result += s.reduce("SUM", s.run(lambda x: tf.reduce_sum(x), args=(batch,)), axis=None)
        return result
    return val(total(dist))


def case_values_from_function_dict(tf):
    s = _with(tf, tf.distribute.ReductionToOneDevice())
    out = s.experimental_distribute_values_from_function(
        lambda ctx: {"a": tf.constant(float(ctx.replica_id_in_sync_group)), "b": tf.constant(1.0)})
    return [sorted(out), local(s, out["a"]), type(out["b"]).__name__]


def case_gather_nested(tf):
    s = _with(tf, tf.distribute.ReductionToOneDevice())
    x = s.experimental_distribute_values_from_function(lambda ctx: tf.constant([float(ctx.replica_id_in_sync_group)]))
    return val(s.gather({"x": x, "y": (x,)}, axis=0))


def case_reduce_uneven_last_batch_mean(tf):
    s = _with(tf, tf.distribute.ReductionToOneDevice())
    dist = s.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices([float(i) for i in range(6)]).batch(4))
    return [val(s.reduce("MEAN", batch, axis=0)) for batch in dist]


def case_run_with_options(tf):
    s = _with(tf, tf.distribute.ReductionToOneDevice())
    return local(s, s.run(lambda: tf.constant(1.0), options=tf.distribute.RunOptions()))


def case_sync_on_read_returned_from_run(tf):
    s = _with(tf, tf.distribute.ReductionToOneDevice())
    with s.scope():
        v = tf.Variable(2.0, synchronization=tf.VariableSynchronization.ON_READ, aggregation=tf.VariableAggregation.SUM)
    out = s.run(lambda: v.assign_add(1.0))
    return [type(out).__name__, local(s, out), float(v.read_value())]


def case_mirrored_variable_in_function(tf):
    s = _with(tf, tf.distribute.ReductionToOneDevice())
    with s.scope():
        v = tf.Variable(1.0, aggregation=tf.VariableAggregation.MEAN)

    @tf.function
    def step():
        s.run(lambda: v.assign_add(tf.constant(2.0)))
    step()
    step()
    return local(s, v)
