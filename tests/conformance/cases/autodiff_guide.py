"""tensorflow.org's guide/advanced_autodiff (and what guide/autodiff's remaining cells rely on), typed as
printed with ``tf.`` -> ``md.``: ``tape.reset``, ``tf.stop_gradient`` of a term, ``tf.custom_gradient``
(the clipping example), several tapes at once, a persistent tape's jacobian, and gradients with respect
to a model's ``trainable_variables`` inside ``strategy.run`` on two replicas.

Ops multidev leaves to torch (``tf.math.sin``, ``tf.nn.sigmoid``) are taken from ``torch_or_tf``.
"""

from conformance_support import loop_model, raises, torch_or_tf, two_cpus, val


def case_tape_reset(tf):
    x = tf.Variable(2.0)
    y = tf.Variable(3.0)
    reset = True
    with tf.GradientTape() as t:
        y_sq = y * y
        if reset:
            # Throw out all the tape recorded so far.
            t.reset()
        z = x * x + y_sq
    grad = t.gradient(z, {'x': x, 'y': y})
    return [val(grad['x']), val(grad['y'])]


def case_stop_gradient_term(tf):
    x = tf.Variable(2.0)
    y = tf.Variable(3.0)
    with tf.GradientTape() as t:
        y_sq = y**2
        z = x**2 + tf.stop_gradient(y_sq)
    grad = t.gradient(z, {'x': x, 'y': y})
    return [val(grad['x']), val(grad['y'])]


def _clip_gradients(tf):
    """The guide's cell, as printed."""
    # Establish an identity operation, but clip during the gradient pass.
    @tf.custom_gradient
    def clip_gradients(y):
        def backward(dy):
            return tf.clip_by_norm(dy, 0.5)
        return y, backward
    return clip_gradients


def case_custom_gradient_clip(tf):
    clip_gradients = _clip_gradients(tf)
    v = tf.Variable(2.0)
    with tf.GradientTape() as t:
        output = clip_gradients(v * v)
    return [val(output), val(t.gradient(output, v))]


def case_custom_gradient_log1pexp(tf):
    """tf.custom_gradient's API example: a numerically stable gradient of log(1 + e^x) at x = 100."""
    @tf.custom_gradient
    def log1pexp(x):
        e = tf.exp(x)

        def grad(upstream):
            return upstream * (1 - 1 / (1 + e))
        return tf.math.log(1 + e), grad

    x = tf.constant(100.)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = log1pexp(x)
    x2 = tf.constant([0.0, 1.0])
    with tf.GradientTape() as tape2:
        tape2.watch(x2)
        y2 = tf.reduce_sum(log1pexp(x2) * tf.constant([2.0, 3.0]))
    return [val(tape.gradient(y, x)), [round(g, 5) for g in val(tape2.gradient(y2, x2))]]


def case_custom_gradient_vector_clip(tf):
    """The clipping example on a vector: the upstream gradient's norm is clipped, not each element."""
    clip_gradients = _clip_gradients(tf)
    v = tf.Variable([3.0, 4.0])
    with tf.GradientTape() as t:
        output = tf.reduce_sum(clip_gradients(v * v))
    return [round(g, 5) for g in val(t.gradient(output, v))]


def case_multiple_tapes(tf):
    sin = torch_or_tf(tf, "math.sin", "sin")
    sigmoid = torch_or_tf(tf, "nn.sigmoid", "sigmoid")
    x0 = tf.constant(0.0)
    x1 = tf.constant(0.0)
    with tf.GradientTape() as tape0, tf.GradientTape() as tape1:
        tape0.watch(x0)
        tape1.watch(x1)
        y0 = sin(x0)
        y1 = sigmoid(x1)
        y = y0 + y1
        ys = tf.reduce_sum(y)
    return [val(tape0.gradient(ys, x0)), val(tape1.gradient(ys, x1))]


def case_nonpersistent_second_gradient(tf):
    """A non-persistent tape's resources are released after one ``gradient``: a second call raises."""
    x = tf.constant(3.0)
    with tf.GradientTape() as g:
        g.watch(x)
        y = x * x
    first = val(g.gradient(y, x))
    return [first, raises(g.gradient, y, x)]


def case_persistent_jacobian_and_gradient(tf):
    x = tf.Variable([1.0, 2.0])
    with tf.GradientTape(persistent=True) as tape:
        y = x * x * tf.constant([1.0, 3.0])
    return [val(tape.jacobian(y, x)), val(tape.gradient(y, x))]


def case_gradient_of_int_variable_source(tf):
    """An integer variable as a source: no gradient (TF warns and returns None)."""
    x = tf.Variable(3)
    y = tf.Variable(2.0)
    with tf.GradientTape() as tape:
        z = tf.cast(x, tf.float32) * y
    grads = tape.gradient(z, [x, y])
    return [val(grads[0]), val(grads[1])]


def case_unconnected_zero_and_none(tf):
    x = tf.Variable([2., 2.])
    y = tf.Variable(3.)
    with tf.GradientTape(persistent=True) as tape:
        z = y**2
    return [val(tape.gradient(z, x)),
            val(tape.gradient(z, x, unconnected_gradients=tf.UnconnectedGradients.ZERO)),
            val(tape.gradient(z, x, unconnected_gradients='zero')),
            val(tape.gradient(z, [x, y], unconnected_gradients=tf.UnconnectedGradients.NONE))]


def _replica_gradients(tf, fn):
    """``fn(x)`` -> (loss, tape) on each of two replicas, with x the replica's half of a batch."""
    s = two_cpus(tf)
    with s.scope():
        model = loop_model(tf)
    batch = tf.constant([[0.5, -1.0, 2.0], [1.0, 0.25, -0.5], [0.0, 1.5, 1.0], [-1.0, 0.5, 0.5]])
    dist = s.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices(batch).batch(4))

    def step(x):
        with tf.GradientTape() as tape:
            loss = fn(model(x, training=True))
        return tape.gradient(loss, model.trainable_variables)

    grads = s.run(step, args=(next(iter(dist)),))
    return [[[round(v, 5) for v in _flat(val(r))] for r in s.experimental_local_results(g)] for g in grads]


def _flat(x):
    return [v for row in x for v in _flat(row)] if isinstance(x, list) else [x]


def case_model_gradients_in_strategy_run(tf):
    return _replica_gradients(tf, lambda out: tf.reduce_sum(out * out))


def case_stop_gradient_in_strategy_run(tf):
    return _replica_gradients(tf, lambda out: tf.reduce_sum(out * tf.stop_gradient(out)))


def case_custom_gradient_in_strategy_run(tf):
    clip_gradients = _clip_gradients(tf)
    return _replica_gradients(tf, lambda out: tf.reduce_sum(clip_gradients(out) ** 2))


def case_custom_gradient_bad_backward(tf):
    """A backward function returning a gradient for each of two inputs of a one-input function."""
    @tf.custom_gradient
    def f(x):
        def backward(dy):
            return dy, dy
        return x * 2.0, backward

    x = tf.constant(1.0)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = f(x)
    return raises(tape.gradient, y, x)
