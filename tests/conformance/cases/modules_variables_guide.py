"""tensorflow.org's guide/intro_to_modules and guide/variable, the parts tests/tutorials leaves out, with
``tf.Module``'s API examples, typed as printed with ``tf.`` -> ``md.``: name scopes (``self.name_scope``,
``@tf.Module.with_name_scope``, ``tf.name_scope``) and the variable names they give, the order of
``variables``/``trainable_variables``/``submodules``, a Module's checkpoint and SavedModel with an
``input_signature`` function, and what ``assign`` refuses: another shape, strings, a number of the wrong
kind (a float into an integer variable, a number into a bool one); a scalar broadcast and a tensor of another
dtype, which TensorFlow refuses too, multidev converts (KNOWN: tests pin that leniency).

Substitutions: ``tf.random.normal`` is a fixed table; ``tf.nn.relu`` is torch's on multidev.
"""

import os

from conformance_support import InTempDirectory, raises, val


def _normal(tf, shape, seed=0):
    """``tf.random.normal(shape)`` as a fixed table (TensorFlow's and torch's generators differ)."""
    import numpy as np
    return tf.constant(np.random.RandomState(seed).randn(*shape).astype("float32"))


def _relu(tf):
    if tf.__name__ == "tensorflow":
        return tf.nn.relu
    import torch
    return torch.relu


def _names(variables):
    return [v.name for v in variables]


def _dense_class(tf):
    class Dense(tf.Module):
        def __init__(self, input_dim, output_size, name=None):
            super().__init__(name=name)
            self.w = tf.Variable(_normal(tf, [input_dim, output_size]), name='w')
            self.b = tf.Variable(tf.zeros([output_size]), name='b')

        def __call__(self, x):
            y = tf.matmul(x, self.w) + self.b
            return _relu(tf)(y)
    return Dense


def case_module_name_scope(tf):
    class MyModule(tf.Module):
        def __init__(self, name=None):
            super().__init__(name=name)
            with self.name_scope:
                self.v = tf.Variable(1., name="v")

    Dense = _dense_class(tf)

    class Outer(tf.Module):
        def __init__(self):
            super().__init__()
            self.plain = tf.Variable(2., name="plain")
            with self.name_scope:
                self.inner = Dense(2, 3)

    m = MyModule(name="my_module")
    outer = Outer()
    with tf.name_scope("block"):
        scoped = MyModule()
        loose = tf.Variable(0., name="loose")
        unnamed = tf.Variable(0.)
    return {"scope": m.name_scope.name, "v": m.v.name, "outer": _names(outer.variables),
            "in_block": [scoped.name_scope.name, scoped.v.name, loose.name, unnamed.name],
            "after_block": tf.Variable(0., name="loose").name,
            "dense": [Dense(2, 3).w.name, Dense(2, 3, name="named").name]}


def case_with_name_scope_decorator(tf):
    class MyModule(tf.Module):
        @tf.Module.with_name_scope
        def __call__(self, x):
            if not hasattr(self, 'w'):
                self.w = tf.Variable(_normal(tf, [x.shape[1], 3]))
            return tf.matmul(x, self.w)

    mod = MyModule()
    out = mod(tf.ones([1, 2]))
    return [mod.w.name, list(mod.w.shape), [round(v, 5) for v in val(out)[0]]]


def case_name_scope_returns_the_scope(tf):
    with tf.name_scope("a") as a:
        with tf.name_scope("b") as b:
            v = tf.Variable(1., name="v")
        with tf.name_scope("a/") as again:   # a name ending in '/' re-enters that scope
            w = tf.Variable(1., name="w")
        with tf.name_scope("") as top:       # '' is the top level
            t = tf.Variable(1., name="t")
        with tf.name_scope("has space") as spaced:   # eager scopes take any string
            u = tf.Variable(1., name="u")
    return [a, b, again, v.name, w.name, [top, t.name], [spaced, u.name], raises(tf.name_scope, 3)]


def case_variables_and_submodules_order(tf):
    Dense = _dense_class(tf)

    class SequentialModule(tf.Module):
        def __init__(self, name=None):
            super().__init__(name=name)
            self.dense_2 = Dense(3, 2, name="second")
            self.dense_1 = Dense(3, 3, name="first")
            self.scale = tf.Variable(1.0, name="scale", trainable=False)
            self.alpha = tf.Variable(0.5, name="alpha")

        def __call__(self, x):
            return self.dense_2(self.dense_1(x)) * self.scale * self.alpha

    my_model = SequentialModule(name="the_model")
    result = my_model(tf.constant([[2.0, 2.0, 2.0]]))
    return {"variables": _names(my_model.variables), "trainable": _names(my_model.trainable_variables),
            "non_trainable": _names(my_model.non_trainable_variables),
            "submodules": [m.name for m in my_model.submodules], "result": [round(v, 5) for v in val(result)[0]]}


def case_module_checkpoint_and_saved_model(tf):
    """A Module's checkpoint restored into a new one, and its SavedModel with an ``input_signature``
    function, loaded without the class."""
    Dense = _dense_class(tf)

    class Model(tf.Module):
        def __init__(self):
            super().__init__()
            self.dense = Dense(3, 2)
            self.step = tf.Variable(0, trainable=False)

        @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32)])
        def __call__(self, x):
            return self.dense(x)

    with InTempDirectory():
        model = Model()
        model.step.assign(7)
        model.dense.b.assign([0.5, -0.5])
        checkpoint = tf.train.Checkpoint(model=model)
        path = checkpoint.write("my_checkpoint")
        fresh = Model()
        tf.train.Checkpoint(model=fresh).restore(path)
        restored = [int(fresh.step.numpy()), [round(v, 5) for v in val(fresh.dense.b)]]
        tf.saved_model.save(model, "the_saved_model")
        loaded = tf.saved_model.load("the_saved_model")
        x = tf.constant([[1.0, 2.0, 3.0], [0.5, -1.0, 0.0]])
        out = [[round(v, 5) for v in row] for row in val(loaded(x))]
        same = out == [[round(v, 5) for v in row] for row in val(model(x))]
        files = sorted(os.listdir("."))
    return {"restored": restored, "saved_model_output": out, "same_as_model": same,
            "checkpoint_files": [f for f in files if f.startswith("my_checkpoint")] != [],
            "refuses_other_shape": raises(loaded, tf.constant([[1.0, 2.0]]))}


def case_assign_lenient_broadcast_and_tensor_dtype(tf):
    """What TensorFlow refuses and multidev converts (KNOWN): a scalar broadcast by ``assign``/``assign_add``,
    a tensor of another dtype."""
    a = tf.Variable([2.0, 3.0])
    return {"broadcast_scalar": raises(a.assign, 5.0), "assign_add_scalar": raises(a.assign_add, 1.0),
            "int_tensor": raises(a.assign, tf.constant([1, 2])),
            "float64_tensor": raises(a.assign, tf.constant([1.0, 2.0], dtype=tf.float64)),
            "assign_sub_int_tensor": raises(a.assign_sub, tf.constant([1, 2]))}


def case_assign_shape_and_dtype_errors(tf):
    a = tf.Variable([2.0, 3.0])
    out = {"resize": raises(a.assign, [1.0, 2.0, 3.0]), "strings": raises(a.assign, ["a", "b"]),
           "assign_add_shape": raises(a.assign_add, [1.0, 2.0, 3.0])}
    a.assign([1, 2])                      # Python ints into a float variable: converted
    import numpy as np
    a.assign_add(np.array([0.5, 0.5]))    # a float64 numpy array: cast, as TensorFlow casts it
    out["after"] = [round(v, 5) for v in val(a)]
    i = tf.Variable(3)
    b = tf.Variable(True)
    out["int_variable"] = [raises(i.assign, 2.5), raises(i.assign_add, 1.5), int(i.assign_add(2).numpy())]
    out["bool_variable"] = [raises(b.assign, 1), raises(b.assign, 0.0), bool(b.assign(False).numpy()),
                            float(tf.Variable(1.0).assign(True).numpy())]
    out["creation"] = [raises(tf.Variable, [1.0, 2.0], shape=[3]), raises(tf.Variable, [1.5], dtype=tf.int32)]
    return out


def case_non_trainable_variable(tf):
    step_counter = tf.Variable(1, trainable=False)
    v = tf.Variable(2.0, trainable=False)
    w = tf.Variable(3.0)
    with tf.GradientTape() as tape:
        y = v * w
    dv, dw = tape.gradient(y, [v, w])
    return [step_counter.trainable, v.trainable, w.trainable, dv, round(float(dw), 5)]
