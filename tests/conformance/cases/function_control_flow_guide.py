"""tensorflow.org's guide/function, "AutoGraph transformations" and "Accumulating values in a loop",
typed as printed with ``tf.`` -> ``md.``: Python loops and conditionals on tensors inside a function,
``tf.cond``, ``tf.while_loop`` and ``tf.TensorArray`` (TensorFlow's eager implementations are what an
md.function runs), with the errors of bad arguments.
"""

from conformance_support import raises, val


def case_loop_over_tensor(tf):
    @tf.function
    def sum_even(items):
        s = 0
        for c in items:
            if c % 2 > 0:
                continue
            s += c
        return s

    return val(sum_even(tf.constant([10, 12, 15, 20])))


def case_while_on_tensor(tf):
    @tf.function
    def f(x):
        while tf.reduce_sum(x) > 1:
            x = tf.tanh(x)
        return x

    return [round(v, 5) for v in val(f(tf.constant([0.9, 0.5, 0.3, 0.7, 0.2])))]


def case_if_on_tensor(tf):
    @tf.function
    def fizzbuzz_count(n):
        fizz = 0
        for i in tf.range(1, n + 1):
            if i % 15 == 0:
                fizz += 100
            elif i % 3 == 0:
                fizz += 1
            elif i % 5 == 0:
                fizz += 10
        return fizz

    return val(fizzbuzz_count(tf.constant(15)))


def case_cond(tf):
    x = tf.constant(2)
    y = tf.constant(5)

    def f1(): return tf.multiply(x, 17)

    def f2(): return tf.add(y, 23)

    r = tf.cond(tf.less(x, y), f1, f2)
    nested = tf.cond(x > 3, lambda: (x, [y]), lambda: (y, [x]))
    return [val(r), val(tf.cond(tf.constant(False), f1, f2)), val(nested), raises(tf.cond, x < 3, f1),
            raises(tf.cond, x < 3, f1, 3)]


def case_cond_in_function(tf):
    @tf.function
    def f(x):
        return tf.cond(tf.reduce_sum(x) > 0, lambda: x * 2.0, lambda: -x)

    return [val(f(tf.constant([1.0, 2.0]))), val(f(tf.constant([-1.0, -2.0])))]


def case_while_loop(tf):
    i = tf.constant(0)
    c = lambda i: tf.less(i, 10)
    b = lambda i: (tf.add(i, 1), )
    r = tf.while_loop(c, b, [i])
    pair = tf.while_loop(lambda i, s: i < 4, lambda i, s: (i + 1, s + i), (tf.constant(0), tf.constant(0)))
    capped = tf.while_loop(lambda i: i < 100, lambda i: (i + 2,), (tf.constant(0),), maximum_iterations=3)
    return [val(r), type(r).__name__, val(pair), type(pair).__name__, val(capped),
            raises(tf.while_loop, lambda i: i < 3, lambda i: i + 1, tf.constant(1))]


def case_while_loop_bad_body(tf):
    return raises(tf.while_loop, lambda i, s: i < 4, lambda i, s: (i + 1,), [tf.constant(0), tf.constant(0)])


def case_tensor_array_dynamic_rnn(tf):
    batch_size = 2
    seq_len = 3
    feature_size = 4

    def rnn_step(inp, state):
        return inp + state

    @tf.function
    def dynamic_rnn(rnn_step, input_data, initial_state):
        # [batch, time, features] -> [time, batch, features]
        input_data = tf.transpose(input_data, [1, 0, 2])
        max_seq_len = input_data.shape[0]

        states = tf.TensorArray(tf.float32, size=max_seq_len)
        state = initial_state
        for i in tf.range(max_seq_len):
            state = rnn_step(input_data[i], state)
            states = states.write(i, state)
        return tf.transpose(states.stack(), [1, 0, 2])

    data = tf.reshape(tf.range(batch_size * seq_len * feature_size, dtype=tf.float32) / 10.0,
                      [batch_size, seq_len, feature_size])
    return [round(v, 5) for row in val(dynamic_rnn(rnn_step, data, tf.zeros([batch_size, feature_size])))
            for step in row for v in step]


def case_tensor_array_api(tf):
    ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True, clear_after_read=False)
    ta = ta.write(0, 10)
    ta = ta.write(1, 20)
    ta = ta.write(2, 30)
    out = [val(ta.read(0)), val(ta.read(1)), val(ta.stack()), int(val(ta.size())), val(ta.gather([2, 0]))]
    fixed = tf.TensorArray(tf.int32, size=2)
    fixed = fixed.unstack(tf.constant([[1, 2], [3, 4]]))
    out += [val(fixed.read(1)), raises(fixed.read, 1)]
    small = tf.TensorArray(tf.float32, size=1)
    out += [raises(small.write, 3, 1.0), raises(small.write, 0, tf.constant(1)), raises(small.read, 5),
            raises(tf.TensorArray, tf.float32)]
    unwritten = tf.TensorArray(tf.float32, size=3, element_shape=[2])
    out.append(val(unwritten.write(1, [1.0, 2.0]).stack()))
    return out
