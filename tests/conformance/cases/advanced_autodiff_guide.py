"""tensorflow.org's guide/advanced_autodiff, the cells autodiff_guide.py and tests/tutorials leave out, and the
API examples of ``tf.autodiff.ForwardAccumulator``, typed as printed with ``tf.`` -> ``md.``: forward-mode
JVPs (which tensors carry a tangent, several primals, nested accumulators, forward-over-backward
Hessian-vector products, bad primals/tangents), the guide's Hessian and Newton step, and ``batch_jacobian``
against the jacobian's diagonal blocks.

Substitutions: ``tf.random.normal`` is a fixed table and the layers' weights are set after building;
``tf.eye``, ``tf.linalg.solve``, ``tf.einsum``, ``tf.nn.relu`` and ``tf.nn.elu`` (which multidev leaves to
torch, naming the torch function) are torch's on multidev.
The API's Dense-kernel example is left out: TF 2.21 fails on a Keras 3 variable as a primal
(AttributeError in ``_watch``); a ``tf.Variable`` primal runs in the other cases.
"""

from conformance_support import fixed_weights, raises, rounded, torch_or_tf, val

X = [[((i * 3 + j * 5) % 11) / 11.0 - 0.5 for j in range(5)] for i in range(7)]


def _two_layers(tf, activation, scale):
    """The guide's ``Dense(8)`` and ``Dense(6)`` on 5 features, built, their weights a fixed pattern."""
    layer1 = tf.keras.layers.Dense(8, activation=activation)
    layer2 = tf.keras.layers.Dense(6, activation=activation)
    layer1.build((None, 5))
    layer2.build((None, 8))
    return fixed_weights(layer1, scale), fixed_weights(layer2, scale)


def case_forward_over_backward_hvp(tf):
    v = tf.Variable([1., 2.])
    with tf.autodiff.ForwardAccumulator(
            v,
            # The "vector" in Hessian-vector product.
            tf.constant([1., 0.])) as acc:
        with tf.GradientTape() as tape:
            y = tf.reduce_sum(v ** 3.)
        backward = tape.gradient(y, v)
    return [rounded(backward), rounded(acc.jvp(backward))]


def case_which_tensors_carry_a_tangent(tf):
    x = tf.constant(2.)
    before = x * 3
    with tf.autodiff.ForwardAccumulator(x, tf.constant(1.)) as acc:
        y = x * x
        z = tf.constant(5.) * 2
    after = x * x
    return {"inside": rounded(acc.jvp(y)), "primal": rounded(acc.jvp(x)), "before": rounded(acc.jvp(before)),
            "unconnected": rounded(acc.jvp(z)), "after": rounded(acc.jvp(after)),
            "zero": rounded(acc.jvp(z, unconnected_gradients=tf.UnconnectedGradients.ZERO)),
            "structure": rounded(acc.jvp({"y": y, "pair": [y, after]}))}


def case_several_primals(tf):
    x, x2 = tf.constant(2.), tf.constant(3.)
    w = tf.Variable([[1.0, -2.0], [0.5, 0.25]])
    with tf.autodiff.ForwardAccumulator([x, x2, w], [tf.constant(1.), tf.constant(10.), tf.ones([2, 2])]) as acc:
        y = x * x2
        m = tf.reduce_sum(tf.matmul(w, w) * x)
    return [rounded(acc.jvp(y)), rounded(acc.jvp(m)), rounded(acc.jvp(w))]


def case_nested_accumulators(tf):
    x = tf.constant(2.)
    with tf.autodiff.ForwardAccumulator(x, 1.) as acc:
        with tf.autodiff.ForwardAccumulator(x, 1.) as acc2:
            y = x ** 3.
        inner = rounded(acc2.jvp(y))
    return [inner, rounded(acc.jvp(acc2.jvp(y)))]


def case_bad_primals_and_tangents(tf):
    x, x2 = tf.constant(2.), tf.constant(3.)

    def shape_mismatch():
        with tf.autodiff.ForwardAccumulator(x, tf.constant([1., 0.])):
            return x * 3
    return [raises(tf.autodiff.ForwardAccumulator, [x, x], [tf.constant(1.), tf.constant(1.)]),
            raises(tf.autodiff.ForwardAccumulator, [x, x2], [tf.constant(1.)]),
            raises(tf.autodiff.ForwardAccumulator, x, tf.constant(1, tf.int32)),
            raises(shape_mismatch)]


def case_integer_primal_has_no_jvp(tf):
    i = tf.constant(3)
    with tf.autodiff.ForwardAccumulator(i, tf.constant(1)) as acc:
        y = i * 2
    return val(acc.jvp(y))


def case_hessian_and_newton_step(tf):
    """The guide's "Example: Hessian": the Hessian of a loss w.r.t. a layer's kernel, a Newton step."""
    x = tf.constant(X)
    layer1, layer2 = _two_layers(tf, torch_or_tf(tf, "nn.relu", "relu"), 0.6)

    with tf.GradientTape() as t2:
        with tf.GradientTape() as t1:
            x = layer1(x)
            x = layer2(x)
            loss = tf.reduce_mean(x**2)

        g = t1.gradient(loss, layer1.kernel)

    h = t2.jacobian(g, layer1.kernel)
    shapes = [list(layer1.kernel.shape), list(h.shape)]   # the guide prints them
    n_params = tf.reduce_prod(layer1.kernel.shape)
    g_vec = tf.reshape(g, [n_params, 1])
    h_mat = tf.reshape(h, [n_params, n_params])
    eps = 1e-3
    eye_eps = torch_or_tf(tf, "eye", "eye")(h_mat.shape[0]) * eps
    # X(k+1) = X(k) - (∇²f(X(k)))^-1 @ ∇f(X(k))
    # h_mat = ∇²f(X(k))
    # g_vec = ∇f(X(k))
    update = torch_or_tf(tf, "linalg.solve", "linalg.solve")(h_mat + eye_eps, g_vec)
    # Reshape the update and apply it to the variable.
    _ = layer1.kernel.assign_sub(tf.reshape(update, layer1.kernel.shape))
    return {"shapes": shapes,
            "symmetric": bool(rounded(tf.reduce_max(abs(h_mat - tf.transpose(h_mat))), 4) == 0.0),
            "h_trace_and_sum": [rounded(tf.reduce_sum(h_mat * torch_or_tf(tf, "eye", "eye")(h_mat.shape[0])), 3),
                                rounded(tf.reduce_sum(h_mat), 3)],
            "kernel_sum_after_step": rounded(tf.reduce_sum(layer1.kernel), 2)}


def case_batch_jacobian_against_full_jacobian(tf):
    """The guide's batch jacobian by the long way: the full jacobian summed over the batch of the sources
    (equal when examples are independent), and its diagonal blocks (``einsum('bxby->bxy')``)."""
    x = tf.constant(X)
    layer1, layer2 = _two_layers(tf, torch_or_tf(tf, "nn.elu", "nn.functional.elu"), 0.5)
    with tf.GradientTape(persistent=True, watch_accessed_variables=False) as tape:
        tape.watch(x)
        y = layer1(x)
        y = layer2(y)
    j = tape.jacobian(y, x)
    j_sum = tf.reduce_sum(j, axis=2)
    j_select = torch_or_tf(tf, "einsum", "einsum")('bxby->bxy', j)
    jb = tape.batch_jacobian(y, x)
    return [list(j_sum.shape), list(j_select.shape), list(jb.shape),
            rounded(tf.reduce_max(abs(j_sum - jb)), 5), rounded(tf.reduce_max(abs(j_select - jb)), 5), rounded(jb[3][2], 4)]


def case_jacobian_unconnected(tf):
    x = tf.Variable([1.0, 2.0, 3.0])
    y = tf.Variable(2.0)
    with tf.GradientTape(persistent=True) as tape:
        z = y * tf.constant([1.0, 2.0])
    return [val(tape.jacobian(z, x)), list(tape.jacobian(z, x, unconnected_gradients=tf.UnconnectedGradients.ZERO).shape),
            rounded(tape.jacobian(z, y))]
