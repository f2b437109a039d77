"""tensorflow.org's guide/variable, guide/autodiff and guide/advanced_autodiff's jacobians, typed as
printed with ``tf.`` -> ``md.``.

Substitutions (``_tf_core_common``): ``tf.random.normal`` (a seeded numpy draw), ``tf.linspace``,
``tf.nn.sigmoid``/``softplus``, ``tf.math.sin`` (torch's ops on md). ``print`` lines became observations.
"""

import numpy as np

from _tf_core_common import (IS_TF, deterministic, dtype_name, ints, linspace, normal, raised, rnd, sigmoid, sin,
                             softplus, stop_gradient, tf)


def guide_variable():
    out = {}
    my_tensor = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    my_variable = tf.Variable(my_tensor)
    bool_variable = tf.Variable([False, False, False, True])
    complex_variable = tf.Variable([5 + 4j, 6 + 1j])
    out["dtypes"] = [dtype_name(v.dtype) for v in (my_variable, bool_variable, complex_variable)]
    out["shape"] = list(my_variable.shape)
    out["numpy"] = rnd(my_variable.numpy())
    out["as_tensor"] = rnd(tf.convert_to_tensor(my_variable))
    out["argmax"] = ints(tf.math.argmax(my_variable))
    out["reshape"] = rnd(tf.reshape(my_variable, [1, 4]))
    a = tf.Variable([2.0, 3.0])
    a.assign([1, 2])                     # keeps float32
    out["assign_ints"] = [dtype_name(a.dtype), rnd(a)]
    out["assign_resize"] = raised(lambda: a.assign([1.0, 2.0, 3.0]))["raises"]
    a = tf.Variable([2.0, 3.0])
    b = tf.Variable(a)                   # a copy: a and b are different
    a.assign([5, 6])
    out["copy"] = [rnd(a.numpy()), rnd(b.numpy())]
    out["assign_add"] = rnd(a.assign_add([2, 3]).numpy())
    out["assign_sub"] = rnd(a.assign_sub([7, 9]).numpy())
    a = tf.Variable(my_tensor, name="Mark")
    b = tf.Variable(my_tensor + 1, name="Mark")
    a.assign_add([[1.0, 1.0], [1.0, 1.0]])   # not in the guide: a variable never writes its initial tensor
    out["names_equal"] = [a.name, b.name, ints(a == b), rnd(my_tensor)]
    step_counter = tf.Variable(1, trainable=False)
    out["step_counter"] = [dtype_name(step_counter.dtype), step_counter.trainable, int(step_counter.numpy())]
    with tf.device('CPU:0'):
        a = tf.Variable([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
        b = tf.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
        c = tf.matmul(a, b)
    out["cpu_matmul"] = rnd(c)
    with tf.device('CPU:0'):
        a = tf.Variable([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
        b = tf.Variable([[1.0, 2.0, 3.0]])
    with tf.device('GPU:0'):             # no GPU here: soft placement runs it on the CPU
        k = a * b
    out["soft_placed"] = rnd(k)
    return out


def _autodiff_basics(out):
    x = tf.Variable(3.0)
    with tf.GradientTape() as tape:
        y = x**2
    out["dy_dx"] = rnd(tape.gradient(y, x).numpy())
    w = tf.Variable(normal((3, 2)), name='w')
    b = tf.Variable(tf.zeros(2, dtype=tf.float32), name='b')
    x = [[1., 2., 3.]]
    with tf.GradientTape(persistent=True) as tape:
        y = x @ w + b
        loss = tf.reduce_mean(y**2)
    [dl_dw, dl_db] = tape.gradient(loss, [w, b])
    out["dl_dw"] = [list(dl_dw.shape), rnd(dl_dw), rnd(dl_db)]
    my_vars = {'w': w, 'b': b}
    grad = tape.gradient(loss, my_vars)
    out["dict_sources"] = rnd(grad['b'])


def _autodiff_model(out):
    layer = tf.keras.layers.Dense(2, activation='relu')
    x = tf.constant([[1., 2., 3.]])
    layer.build((None, 3))   # not in the guide: build, then set the weights both sides start from
    layer.set_weights([np.array([[0.1, -0.2], [0.3, 0.4], [-0.5, 0.6]], "float32"), np.array([0.1, 0.2], "float32")])
    with tf.GradientTape() as tape:
        y = layer(x)
        loss = tf.reduce_mean(y**2)
    grad = tape.gradient(loss, layer.trainable_variables)
    out["model_grads"] = [[var.name.split("/")[-1].split(":")[0], list(g.shape), rnd(g)]
                          for var, g in zip(layer.trainable_variables, grad)]


def _autodiff_watch(out):
    x0 = tf.Variable(3.0, name='x0')
    x1 = tf.Variable(3.0, name='x1', trainable=False)
    x2 = tf.Variable(2.0, name='x2') + 1.0
    x3 = tf.constant(3.0, name='x3')
    with tf.GradientTape() as tape:
        y = (x0**2) + (x1**2) + (x2**2)
    grad = tape.gradient(y, [x0, x1, x2, x3])
    out["unwatched"] = [None if g is None else rnd(g) for g in grad]
    out["watched_variables"] = [var.name for var in tape.watched_variables()]
    x = tf.constant(3.0)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = x**2
    out["watch_constant"] = rnd(tape.gradient(y, x).numpy())
    x0 = tf.Variable(0.0)
    x1 = tf.Variable(10.0)
    with tf.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch(x1)
        y0 = sin(x0)
        y1 = softplus(x1)
        y = y0 + y1
        ys = tf.reduce_sum(y)
    grad = tape.gradient(ys, {'x0': x0, 'x1': x1})
    out["watch_accessed_false"] = [grad['x0'], rnd(grad['x1'].numpy())]


def _autodiff_targets(out):
    x = tf.constant(3.0)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = x * x
        z = y * y
    out["intermediate"] = rnd(tape.gradient(z, y).numpy())
    x = tf.constant([1, 3.0])
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = x * x
        z = y * y
    out["persistent"] = [rnd(tape.gradient(z, x).numpy()), rnd(tape.gradient(y, x).numpy())]
    del tape
    x = tf.Variable(2.0)
    with tf.GradientTape() as tape:
        y0 = x**2
        y1 = 1 / x
    out["dict_target"] = rnd(tape.gradient({'y0': y0, 'y1': y1}, x).numpy())
    x = tf.Variable(2.)
    with tf.GradientTape() as tape:
        y = x * [3., 4.]
    out["vector_target"] = rnd(tape.gradient(y, x).numpy())
    x = linspace(-10.0, 10.0, 200 + 1)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = sigmoid(x)
    dy_dx = tape.gradient(y, x)
    out["elementwise"] = [list(dy_dx.shape), rnd(dy_dx[95:105])]
    x = tf.constant(2.0)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = x * stop_gradient(x) + x
    out["stop_gradient"] = rnd(tape.gradient(y, x))
    x = tf.Variable(2.0)
    with tf.GradientTape(persistent=True) as tape:
        with tape.stop_recording():
            y = x * x
        z = x * 3.0
    out["stop_recording"] = [tape.gradient(y, x), rnd(tape.gradient(z, x))]


def _autodiff_control_and_none(out):
    x = tf.constant(1.0)
    v0 = tf.Variable(2.0)
    v1 = tf.Variable(2.0)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        if x > 0.0:
            result = v0
        else:
            result = v1**2
    dv0, dv1 = tape.gradient(result, [v0, v1])
    out["control_flow"] = [rnd(dv0), dv1, tape.gradient(result, x)]
    x = tf.Variable(2.)
    y = tf.Variable(3.)
    with tf.GradientTape() as tape:
        z = y * y
    out["none"] = tape.gradient(z, x)
    x = tf.Variable(2.0)
    seen = []
    for epoch in range(2):
        with tf.GradientTape() as tape:
            y = x + 1
        g = tape.gradient(y, x)
        seen.append(None if g is None else rnd(g))
        x = x + 1   # This should be `x.assign_add(1)`
    out["replaced_variable"] = seen
    x = tf.constant(10)
    with tf.GradientTape() as g:
        g.watch(x)
        y = x * x
    out["integer_source"] = g.gradient(y, x)
    x0 = tf.Variable(3.0)
    x1 = tf.Variable(0.0)
    with tf.GradientTape() as tape:
        x1.assign_add(x0)
        y = x1**2
    out["stateful"] = tape.gradient(y, x0)
    x = tf.Variable([2., 2.])
    y = tf.Variable(3.)
    with tf.GradientTape() as tape:
        z = y**2
    out["zeros"] = rnd(tape.gradient(z, x, unconnected_gradients=tf.UnconnectedGradients.ZERO))


def guide_autodiff():
    out = {}
    for part in (_autodiff_basics, _autodiff_model, _autodiff_watch, _autodiff_targets, _autodiff_control_and_none):
        try:
            part(out)
        except Exception as e:  # the observation is the exception (the rest of the guide still runs)
            out[part.__name__] = {"raises": type(e).__name__, "message": str(e)[:300]}
    return out


def guide_advanced_autodiff_jacobians():
    """The guide's "Jacobians" section (``tf.nn.elu`` -> torch.nn.functional.elu on md; weights set)."""
    elu = tf.nn.elu if IS_TF else __import__("torch").nn.functional.elu
    out = {}
    x = linspace(-10.0, 10.0, 200 + 1)
    delta = tf.Variable(0.0)
    with tf.GradientTape() as tape:
        y = sigmoid(x + delta)
    dy_dx = tape.jacobian(y, delta)
    out["scalar_source"] = [list(y.shape), list(dy_dx.shape), rnd(dy_dx[98:103])]
    x = normal([7, 5])
    layer = tf.keras.layers.Dense(10, activation=tf.nn.relu if IS_TF else "relu")
    layer.build((None, 5))
    deterministic(layer, scale=0.5)
    with tf.GradientTape(persistent=True) as tape:
        y = layer(x)
    j = tape.jacobian(y, layer.kernel)
    g = tape.gradient(y, layer.kernel)
    j_sum = tf.reduce_sum(j, axis=[0, 1])
    delta = tf.reduce_max(abs(g - j_sum)).numpy()
    out["tensor_source"] = [list(j.shape), bool(delta < 1e-3), rnd(tf.reduce_sum(j), 3)]
    layer1 = tf.keras.layers.Dense(8, activation=elu)
    layer2 = tf.keras.layers.Dense(6, activation=elu)
    layer1.build((None, 5))
    layer2.build((None, 8))
    deterministic(layer1, scale=0.5)
    deterministic(layer2, scale=0.5)
    with tf.GradientTape(persistent=True, watch_accessed_variables=False) as tape:
        tape.watch(x)
        y = layer1(x)
        y = layer2(y)
    j = tape.jacobian(y, x)
    jb = tape.batch_jacobian(y, x)
    out["batch"] = [list(j.shape), list(jb.shape), rnd(jb[2], 4)]
    out["batch_mismatch"] = raised(lambda: tape.batch_jacobian(y, x[:3]))["raises"]
    _higher_order(out)
    return out


def _higher_order(out):
    """The guide's "Higher-order gradients" section: a gradient taken inside an outer tape is recorded."""
    x = tf.Variable(1.0)
    with tf.GradientTape() as t2:
        with tf.GradientTape() as t1:
            y = x * x * x
        dy_dx = t1.gradient(y, x)
    d2y_dx2 = t2.gradient(dy_dx, x)
    out["second_order"] = [rnd(dy_dx.numpy()), rnd(d2y_dx2.numpy())]
    x = normal([7, 5], seed=3)
    layer = tf.keras.layers.Dense(10, activation=tf.nn.relu if IS_TF else "relu")
    layer.build((None, 5))
    deterministic(layer, scale=0.5)
    with tf.GradientTape() as t2:
        with tf.GradientTape() as t1:
            t1.watch(x)
            y = layer(x)
            out_ = tf.reduce_sum(layer(x) ** 2)
        g1 = t1.gradient(out_, x)
        g1_mag = tf.norm(g1) if IS_TF else __import__("torch").norm(g1)   # tf.norm: torch.norm
    dg1_mag = t2.gradient(g1_mag, layer.trainable_variables)
    out["input_gradient_regularization"] = [[list(d.shape), rnd(tf.reduce_sum(d), 4)] for d in dg1_mag]


PROGRAMS = [guide_variable, guide_autodiff, guide_advanced_autodiff_jacobians]
