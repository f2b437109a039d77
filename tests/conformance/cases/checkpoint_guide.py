"""TensorFlow's "Training checkpoints" guide on ``tf.Module`` objects (whose value names TensorFlow 2.21
and multidev share; Keras 3's differ: ``_kernel``): loading mechanics (a partial stand-in graph,
delayed restoration), reading values by TensorFlow's names, lists and dicts, CheckpointManager's
numbering and intervals, and the errors of a wrong path, shape or dtype."""

import os

from conformance_support import InTempDirectory, raises, val

KEY = "net/l1/kernel/.ATTRIBUTES/VARIABLE_VALUE"


def _net(tf):
    """net.l1.kernel (1, 5) = 1..5 and net.l1.bias = 10..14, as tf.Modules."""
    net, layer = tf.Module(), tf.Module()
    layer.kernel = tf.Variable(tf.reshape(tf.range(1., 6.), [1, 5]))
    layer.bias = tf.Variable(tf.range(10., 15.))
    net.l1 = layer
    return net


def _saved(tf):
    ckpt = tf.train.Checkpoint(step=tf.Variable(7.), net=_net(tf))
    manager = tf.train.CheckpointManager(ckpt, './tf_ckpts', max_to_keep=3)
    return manager.save()


def case_partial_graph_and_delayed_restoration(tf):
    with InTempDirectory():
        path = _saved(tf)
        to_restore = tf.Variable(tf.zeros([5]))
        fake_layer = tf.train.Checkpoint(bias=to_restore)
        fake_net = tf.train.Checkpoint(l1=fake_layer)
        new_root = tf.train.Checkpoint(net=fake_net)
        status = new_root.restore(tf.train.latest_checkpoint('./tf_ckpts/'))
        restored = val(to_restore.numpy())
        existing = raises(status.assert_existing_objects_matched)
        consumed = raises(status.assert_consumed)
        deferred_restore = tf.Variable(tf.zeros([1, 5]))
        before = val(deferred_restore.numpy())
        fake_layer.kernel = deferred_restore
        status.expect_partial()
        return [path, restored, existing, consumed, before, val(deferred_restore.numpy())]


def case_values_by_tensorflow_names(tf):
    with InTempDirectory():
        _saved(tf)
        reader = tf.train.load_checkpoint('./tf_ckpts/')
        shape_from_key = reader.get_variable_to_shape_map()
        return [val(shape_from_key[KEY]), reader.has_tensor(KEY), val(reader.get_tensor(KEY)),
                val(tf.train.load_variable('./tf_ckpts', 'save_counter/.ATTRIBUTES/VARIABLE_VALUE')),
                val(tf.train.load_variable('./tf_ckpts', 'step/.ATTRIBUTES/VARIABLE_VALUE')),
                reader.has_tensor('net/l1/_kernel/.ATTRIBUTES/VARIABLE_VALUE'),
                raises(tf.train.load_variable, './tf_ckpts', 'nokey')]


def case_object_tracking_lists_and_dicts(tf):
    with InTempDirectory():
        save = tf.train.Checkpoint()
        save.listed = [tf.Variable(1.)]
        save.listed.append(tf.Variable(2.))
        save.mapped = {'one': save.listed[0]}
        save.mapped['two'] = save.listed[1]
        save_path = save.save('./tf_list_example')
        restore = tf.train.Checkpoint()
        v2 = tf.Variable(0.)
        restore.mapped = {'two': v2}
        restore.restore(save_path)
        after_mapped = val(v2.numpy())
        restore.listed = []
        listed = repr(restore.listed)
        v1 = tf.Variable(0.)
        restore.listed.append(v1)
        reader = tf.train.load_checkpoint(save_path)
        return [save_path, after_mapped, listed, val(v1.numpy()), val(reader.get_tensor(
            'listed/1/.ATTRIBUTES/VARIABLE_VALUE')), isinstance(restore.listed, list)]


def case_container_rules(tf):
    with InTempDirectory():
        replaced = tf.train.Checkpoint(a=[tf.Variable(1.), tf.Variable(2.)])
        replaced.a[0] = tf.Variable(5.)
        popped = tf.train.Checkpoint(a=[tf.Variable(1.), tf.Variable(2.)])
        popped.a.pop()
        mixed = tf.train.Checkpoint(a=[1, "x", tf.Variable(3.)], t=(tf.Variable(4.), tf.Variable(5.)))
        reader = tf.train.load_checkpoint(mixed.write("mixed"))
        return [raises(replaced.write, "r"), raises(popped.write, "p"),
                raises(tf.train.Checkpoint(m={1: tf.Variable(1.)}).write, "k"),
                val(reader.get_tensor("a/2/.ATTRIBUTES/VARIABLE_VALUE")),
                val(reader.get_tensor("t/1/.ATTRIBUTES/VARIABLE_VALUE")),
                raises(tf.train.Checkpoint, l="abc")]


def case_manager_interval_and_numbers(tf):
    with InTempDirectory():
        step = tf.Variable(0., dtype=tf.float32)
        ckpt = tf.train.Checkpoint(step=step)
        manager = tf.train.CheckpointManager(ckpt, "iv", max_to_keep=None, step_counter=step, checkpoint_interval=3)
        out = []
        for i in range(8):
            step.assign(float(i))
            out.append(manager.save())
        forced = manager.save(check_interval=False)
        numbered = manager.save(checkpoint_number=100, check_interval=False)
        return [out, forced, numbered, manager.checkpoints, int(ckpt.save_counter),
                tf.train.latest_checkpoint("iv"), raises(tf.train.CheckpointManager, ckpt, "x", max_to_keep=1,
                                                         checkpoint_interval=3),
                raises(tf.train.CheckpointManager, ckpt, "x", max_to_keep=0)]


def case_wrong_path_shape_dtype_and_program(tf):
    with InTempDirectory():
        path = tf.train.Checkpoint(v=tf.Variable([1.0, 2.0])).write("v")
        other = tf.train.Checkpoint(w=tf.Variable(1.0)).read(path)
        kept = tf.Variable([0.0, 0.0, 0.0])
        return [raises(tf.train.Checkpoint(v=tf.Variable(1.0)).restore, "nope/ckpt-1"),
                raises(tf.train.Checkpoint(v=tf.Variable(1.0)).read, "nope/ckpt-1"),
                raises(tf.train.list_variables, "nope/ckpt-1"),
                raises(tf.train.Checkpoint(v=kept).read, path), val(kept.numpy()),
                raises(tf.train.Checkpoint(v=tf.Variable([1, 2])).read, path),
                raises(other.assert_consumed), raises(other.assert_existing_objects_matched),
                raises(other.assert_nontrivial_match), raises(other.expect_partial),
                raises(tf.train.Checkpoint(v=tf.Variable(1.0)).restore(None).assert_consumed),
                tf.train.latest_checkpoint("no_such_dir")]


def case_write_read_save_restore_and_overwrite(tf):
    with InTempDirectory():
        ckpt = tf.train.Checkpoint(v=tf.Variable(3.))
        written = ckpt.write("./a/w")
        saved = [ckpt.save("./a/s"), ckpt.save("./a/s")]
        ckpt.v.assign(9.)
        tf.train.Checkpoint(v=tf.Variable(5.)).write("./a/w")       # overwrites
        r = tf.train.Checkpoint(v=tf.Variable(0.))
        r.read(written)
        after_overwrite = val(r.v.numpy())
        r.restore(saved[0])
        return [written, saved, tf.train.latest_checkpoint("./a"), int(ckpt.save_counter), after_overwrite,
                val(r.v.numpy()), int(r.save_counter)]



def case_iterator_position_resumes(tf):
    """A dataset iterator saved mid-pass continues where it was (the guide's `iterator=iterator`)."""
    with InTempDirectory():
        dataset = tf.data.Dataset.range(12).batch(4)
        plain = iter(dataset)
        next(plain)
        path = tf.train.Checkpoint(plain=plain).write("it")
        expected = val(next(plain))
        plain2 = iter(dataset)
        tf.train.Checkpoint(plain=plain2).read(path).assert_consumed()
        return [expected, val(next(plain2))]


def case_distributed_iterator_position(tf):
    """A distributed iterator in a Checkpoint: multidev saves its position, TF 2.21 refuses it (KNOWN)."""
    from conformance_support import local, two_cpus
    with InTempDirectory():
        s = two_cpus(tf)
        dataset = tf.data.Dataset.range(12).batch(4)
        dist = iter(s.experimental_distribute_dataset(dataset))
        next(dist)
        path = tf.train.Checkpoint(dist=dist).write("it")
        expected = local(s, next(dist))
        dist2 = iter(s.experimental_distribute_dataset(dataset))
        tf.train.Checkpoint(dist=dist2).read(path).assert_consumed()
        return [expected, local(s, next(dist2))]


def case_keep_checkpoint_every_n_hours(tf):
    """max_to_keep=2 and one checkpoint kept every 1.5 hours, saves an hour apart (the clock faked)."""
    import time
    now = [1_000_000.0]
    real_time = time.time
    time.time = lambda: now[0]
    try:
        with InTempDirectory():
            ckpt = tf.train.Checkpoint(v=tf.Variable(1.))
            manager = tf.train.CheckpointManager(ckpt, "h", max_to_keep=2, keep_checkpoint_every_n_hours=1.5)
            for _ in range(6):
                now[0] += 3600.0
                manager.save()
            kept = sorted(f[:-len(".index")] for f in os.listdir("h") if f.endswith(".index"))
            again = tf.train.CheckpointManager(ckpt, "h", max_to_keep=2, keep_checkpoint_every_n_hours=1.5)
            return [manager.checkpoints, kept, again.checkpoints]
    finally:
        time.time = real_time
