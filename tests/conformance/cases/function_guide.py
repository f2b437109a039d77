"""tensorflow.org's guide/intro_to_graphs and guide/function ("Better performance with tf.function"),
typed as printed with ``tf.`` -> ``md.``: a Function gives the regular function's results; its
polymorphism; retracing rules (Python scalars vs tensors, ``input_signature``, ``reduce_retracing``)
read through ``experimental_get_tracing_count``; ``get_concrete_function``; variables created only
on the first call (loops and conditionals on tensors: function_control_flow_guide.py). ``print`` lines became observations: the
number of lines a cell printed (``_printed``).
"""

import contextlib
import io

from conformance_support import raises, val


def _printed(fn, *args):
    """The lines ``fn(*args)`` printed with Python's ``print`` (what the guide's cells show)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        fn(*args)
    return out.getvalue().splitlines()


def case_function_equals_regular(tf):
    def a_regular_function(x, y, b):
        x = tf.matmul(x, y)
        x = x + b
        return x

    a_function_that_uses_a_graph = tf.function(a_regular_function)
    x1 = tf.constant([[1.0, 2.0]])
    y1 = tf.constant([[2.0], [3.0]])
    b1 = tf.constant(4.0)
    orig_value = a_regular_function(x1, y1, b1).numpy()
    tf_function_value = a_function_that_uses_a_graph(x1, y1, b1).numpy()
    return [val(orig_value), val(tf_function_value), bool(orig_value == tf_function_value)]


def case_inner_outer_function(tf):
    def inner_function(x, y, b):
        x = tf.matmul(x, y)
        x = x + b
        return x

    @tf.function
    def outer_function(x):
        y = tf.constant([[2.0], [3.0]])
        b = tf.constant(4.0)
        return inner_function(x, y, b)

    return val(outer_function(tf.constant([[1.0, 2.0]])))


def case_polymorphism(tf):
    @tf.function
    def my_relu(x):
        return tf.maximum(0., x)

    out = [val(my_relu(tf.constant(5.5))), val(my_relu([1, -1])), val(my_relu(tf.constant([3., -3.])))]
    return out + [my_relu.experimental_get_tracing_count()]


def case_same_signature_no_retrace(tf):
    @tf.function
    def my_relu(x):
        return tf.maximum(0., x)

    my_relu(tf.constant(5.5))
    my_relu([1, -1])
    my_relu(tf.constant([3., -3.]))
    # These two calls do *not* create new graphs.
    out = [val(my_relu(tf.constant(-2.5))), val(my_relu(tf.constant([-1., 1.])))]
    return out + [my_relu.experimental_get_tracing_count()]


def _get_mse(tf):
    """The guide's cell, as printed: the function and its two tensors."""
    @tf.function
    def get_MSE(y_true, y_pred):
        print("Calculating MSE!")
        sq_diff = tf.pow(y_true - y_pred, 2)
        return tf.reduce_mean(sq_diff)

    y_true = tf.constant([5, 1, 7, 2, 4], dtype=tf.int32)
    y_pred = tf.constant([4, 1, 5, 1, 3], dtype=tf.int32)
    return get_MSE, y_true, y_pred


def case_python_side_effect_once_per_trace(tf):
    get_MSE, y_true, y_pred = _get_mse(tf)
    return [len(_printed(get_MSE, y_true, y_pred)) for _ in range(3)]


def case_tracing_python_scalars_vs_tensors(tf):
    @tf.function
    def f(x):
        return x + 1

    f(1)
    f(2)
    scalars = f.experimental_get_tracing_count()
    f(tf.constant(1))
    f(tf.constant(2))
    f(tf.constant(1.0))
    return [scalars, f.experimental_get_tracing_count(), val(f(2)), val(f(tf.constant(2.5)))]


def case_train_num_steps(tf):
    def train_one_step():
        pass

    @tf.function
    def train(num_steps):
        for _ in tf.range(num_steps):
            train_one_step()

    counts = []
    for num_steps in (10, 20):
        train(num_steps=num_steps)
        counts.append(train.experimental_get_tracing_count())
    for num_steps in (10, 20):
        train(num_steps=tf.constant(num_steps))
        counts.append(train.experimental_get_tracing_count())
    return counts


def case_input_signature(tf):
    @tf.function(input_signature=(tf.TensorSpec(shape=[None], dtype=tf.int32),))
    def next_collatz(x):
        return tf.where(x % 2 == 0, x // 2, 3 * x + 1)

    out = [val(next_collatz(tf.constant([1, 2]))), val(next_collatz(tf.constant([1, 2, 3, 4, 5])))]
    out.append(raises(next_collatz, tf.constant([[1, 2], [3, 4]])))   # only 1-D tensors
    out.append(raises(next_collatz, tf.constant([1.0, 2.0])))         # only int32 tensors
    return out + [next_collatz.experimental_get_tracing_count()]


def case_input_signature_python_list(tf):
    @tf.function(input_signature=(tf.TensorSpec(shape=[None], dtype=tf.int32),))
    def next_collatz(x):
        return tf.where(x % 2 == 0, x // 2, 3 * x + 1)

    return [val(next_collatz([3, 4])), raises(next_collatz, [1.5, 2.5]), raises(next_collatz)]


def case_reduce_retracing(tf):
    @tf.function(reduce_retracing=True)
    def g(x):
        return x * 2

    out = [val(g(tf.constant([1, 2, 3]))), val(g(tf.constant([1, 2, 3, 4, 5])))]
    counts = [g.experimental_get_tracing_count()]
    g(tf.constant([1, 2, 3, 4, 5, 6, 7]))
    counts.append(g.experimental_get_tracing_count())
    return [out, counts]


def case_shapes_retrace_without_reduce(tf):
    @tf.function
    def g(x):
        return x * 2

    for n in (1, 2, 3, 3):
        g(tf.ones([n]))
    return g.experimental_get_tracing_count()


def case_get_concrete_function(tf):
    @tf.function
    def double(a):
        return a + a

    double(tf.constant(1))
    double(tf.constant(1.1))
    double_int = double.get_concrete_function(tf.TensorSpec(shape=None, dtype=tf.int32))
    out = [val(double_int(tf.constant(4))), raises(double_int, tf.constant(1.5))]
    return out + [double.experimental_get_tracing_count()]


def case_run_functions_eagerly(tf):
    get_MSE, y_true, y_pred = _get_mse(tf)
    tf.config.run_functions_eagerly(True)
    try:
        printed = [len(_printed(get_MSE, y_true, y_pred)) for _ in range(3)]
        error = get_MSE(y_true, y_pred)
    finally:
        tf.config.run_functions_eagerly(False)
    return [printed, val(error)]


def case_variable_created_once(tf):
    class Count(tf.Module):
        def __init__(self):
            self.count = None

        @tf.function
        def __call__(self):
            if self.count is None:
                self.count = tf.Variable(0)
            return self.count.assign_add(1)

    c = Count()
    return [val(c()), val(c())]


def case_variable_created_every_call(tf):
    @tf.function
    def f(x):
        v = tf.Variable(1.0)
        return v

    return [raises(f, 1.0), raises(f, 1.0)]


def case_external_list_side_effect(tf):
    external_list = []

    @tf.function
    def side_effect(x):
        print('Python side effect')
        external_list.append(x)

    side_effect(1)
    side_effect(1)
    side_effect(1)
    return len(external_list)


def case_variable_assign_in_function(tf):
    v = tf.Variable(1.0)

    @tf.function
    def add_twice(x):
        v.assign_add(x)
        v.assign_add(x)
        return v.read_value()

    return [val(add_twice(tf.constant(2.0))), val(add_twice(tf.constant(0.5))), val(v)]


def case_not_a_callable(tf):
    return raises(tf.function, 3)


def case_tf_print_every_call(tf):
    """The guide's ``print`` vs ``tf.print`` cell: tf.print runs on every call (written to a file here:
    TensorFlow's kernel prints below Python's sys.stdout); the Python print's lines are the
    python_side_effect_once_per_trace case."""
    import os
    import tempfile
    path = os.path.join(tempfile.mkdtemp(), "printed.txt")

    @tf.function
    def f(x):
        print("Traced with", x)
        tf.print("Executed with", x, output_stream="file://" + path)

    with contextlib.redirect_stdout(io.StringIO()):
        f(1)
        f(1)
        f(2)
        f(tf.constant([1.5, 2.5]))
    with open(path) as lines:
        return [lines.read().splitlines(), f.experimental_get_tracing_count()]


def case_unused_gather_eager(tf):
    """The guide's non-strict execution cell, eagerly: the out-of-range gather raises."""
    def unused_return_eager(x):
        # Get index 1 will fail when `len(x) == 1`
        tf.gather(x, [1])  # unused
        return x

    try:
        return val(unused_return_eager(tf.constant([0.0])))
    except tf.errors.InvalidArgumentError as e:
        return type(e).__name__


def case_unused_gather_in_function(tf):
    """The same in a tf.function: TensorFlow prunes the unused op (non-strict execution)."""
    @tf.function
    def unused_return_graph(x):
        tf.gather(x, [1])  # unused
        return x

    try:
        return val(unused_return_graph(tf.constant([0.0])))
    except tf.errors.InvalidArgumentError as e:
        return type(e).__name__

