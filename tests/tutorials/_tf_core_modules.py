"""tensorflow.org's guide/basic_training_loops and guide/intro_to_modules, typed as printed with
``tf.`` -> ``md.``.

Substitutions (``_tf_core_common``): ``tf.linspace`` (torch.linspace), ``tf.random.normal`` (a seeded
numpy draw), ``tf.nn.relu`` (torch.relu). Plotting lines are dropped; the guides' graph and tracing
sections (tf.function's printed graphs) are skipped; ``print`` lines became observations.
"""

import os

import numpy as np

from _tf_core_common import copies_agree, history, linspace, normal, raised, relu, rnd, scope, tf


#: The guide's ``tf.keras.losses.mean_squared_error`` (Keras 2's name): TF 2.21's Keras 3 lacks it
#: (AttributeError), so TensorFlow's reference run uses ``MeanSquaredError()``, the same loss.
MSE = tf.keras.losses.MeanSquaredError() if not hasattr(tf.keras.losses, "mean_squared_error") \
    else tf.keras.losses.mean_squared_error


class MyModel(tf.Module):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.w = tf.Variable(5.0)
        self.b = tf.Variable(0.0)

    def __call__(self, x):
        return self.w * x + self.b


class MyModelKeras(tf.keras.Model):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.w = tf.Variable(5.0)
        self.b = tf.Variable(0.0)

    def call(self, x):
        return self.w * x + self.b


def _data():
    TRUE_W = 3.0
    TRUE_B = 2.0
    NUM_EXAMPLES = 201
    x = linspace(-2, 2, NUM_EXAMPLES)
    x = tf.cast(x, tf.float32)

    def f(x):
        return x * TRUE_W + TRUE_B
    noise = normal([NUM_EXAMPLES])
    return x, f(x) + noise


def loss(target_y, predicted_y):
    return tf.reduce_mean(tf.square(target_y - predicted_y))


def train(model, x, y, learning_rate):
    with tf.GradientTape() as t:
        current_loss = loss(y, model(x))
    dw, db = t.gradient(current_loss, [model.w, model.b])
    model.w.assign_sub(learning_rate * dw)
    model.b.assign_sub(learning_rate * db)


def report(model, loss):
    return f"W = {model.w.numpy():1.2f}, b = {model.b.numpy():1.2f}, loss={loss:2.5f}"


def training_loop(model, x, y, out):
    for epoch in range(10):
        train(model, x, y, learning_rate=0.1)
        current_loss = loss(y, model(x))
        out.append(report(model, current_loss))


def basic_training_loops():
    x, y = _data()
    model = MyModel()
    out = {"variables": sorted(rnd(v) for v in model.variables)}
    assert model(3.0).numpy() == 15.0
    out["printed_current_loss"] = "Current loss: %1.6f" % loss(y, model(x)).numpy()
    out["current_loss"] = rnd(loss(y, model(x)).numpy())
    model = MyModel()
    out["loop"] = [report(model, loss(y, model(x)))]
    training_loop(model, x, y, out["loop"])
    keras_model = MyModelKeras()
    out["keras_loop"] = []
    training_loop(keras_model, x, y, out["keras_loop"])
    out["save_weights"] = raised(lambda: keras_model.save_weights("my_checkpoint"))
    return out


def basic_training_loops_fit(replicas):
    x, y = _data()
    with scope(replicas):
        keras_model = MyModelKeras()
        keras_model.compile(
            run_eagerly=False,
            optimizer=tf.keras.optimizers.SGD(learning_rate=0.1),
            loss=MSE,   # tf.keras.losses.mean_squared_error (see MSE)
        )
    out = {"n": x.shape[0], "fit": history(keras_model.fit(x, y, epochs=10, batch_size=1000, verbose=0))}
    out["weights"] = rnd([keras_model.w.numpy(), keras_model.b.numpy()])
    out["copies_agree"] = copies_agree(keras_model.trainable_variables)
    return out


class SimpleModule(tf.Module):
    def __init__(self, name=None):
        super().__init__(name=name)
        self.a_variable = tf.Variable(5.0, name="train_me")
        self.non_trainable_variable = tf.Variable(5.0, trainable=False, name="do_not_train_me")

    def __call__(self, x):
        return self.a_variable * x + self.non_trainable_variable


class Dense(tf.Module):
    def __init__(self, in_features, out_features, name=None):
        super().__init__(name=name)
        self.w = tf.Variable(normal([in_features, out_features]), name='w')
        self.b = tf.Variable(tf.zeros([out_features]), name='b')

    def __call__(self, x):
        y = tf.matmul(x, self.w) + self.b
        return relu(y)


class SequentialModule(tf.Module):
    def __init__(self, name=None):
        super().__init__(name=name)
        self.dense_1 = Dense(in_features=3, out_features=3)
        self.dense_2 = Dense(in_features=3, out_features=2)

    def __call__(self, x):
        x = self.dense_1(x)
        return self.dense_2(x)


class FlexibleDenseModule(tf.Module):
    def __init__(self, out_features, name=None):
        super().__init__(name=name)
        self.is_built = False
        self.out_features = out_features

    def __call__(self, x):
        if not self.is_built:
            self.w = tf.Variable(normal([x.shape[-1], self.out_features], seed=self.out_features + 3), name='w')
            self.b = tf.Variable(tf.zeros([self.out_features]), name='b')
            self.is_built = True
        y = tf.matmul(x, self.w) + self.b
        return relu(y)


class MySequentialModule(tf.Module):
    def __init__(self, name=None):
        super().__init__(name=name)
        self.dense_1 = FlexibleDenseModule(out_features=3)
        self.dense_2 = FlexibleDenseModule(out_features=2)

    def __call__(self, x):
        x = self.dense_1(x)
        return self.dense_2(x)


class TracedSequentialModule(tf.Module):   # the guide's second MySequentialModule: __call__ is a tf.function
    def __init__(self, name=None):
        super().__init__(name=name)
        self.dense_1 = Dense(in_features=3, out_features=3)
        self.dense_2 = Dense(in_features=3, out_features=2)

    @tf.function
    def __call__(self, x):
        x = self.dense_1(x)
        return self.dense_2(x)


def intro_to_modules():
    simple_module = SimpleModule(name="simple")
    out = {"simple": rnd(simple_module(tf.constant(5.0)))}
    out["simple_variables"] = [[v.name for v in simple_module.trainable_variables],
                               sorted(v.name for v in simple_module.variables)]
    my_model = SequentialModule(name="the_model")
    out["sequential"] = rnd(my_model(tf.constant([[2.0, 2.0, 2.0]])))
    out["submodules"] = [type(m).__name__ for m in my_model.submodules]
    out["variables"] = sorted([v.name, list(v.shape)] for v in my_model.variables)
    my_model = MySequentialModule(name="the_model")
    out["flexible"] = rnd(my_model(tf.constant([[2.0, 2.0, 2.0]])))
    chkp_path = "my_checkpoint"
    checkpoint = tf.train.Checkpoint(model=my_model)
    checkpoint.write(chkp_path)
    out["ls"] = any(f.startswith("my_checkpoint") for f in os.listdir("."))   # !ls my_checkpoint*
    out["list_variables"] = [[name, list(shape)] for name, shape in tf.train.list_variables(chkp_path)]
    new_model = MySequentialModule()
    new_checkpoint = tf.train.Checkpoint(model=new_model)
    new_checkpoint.restore("my_checkpoint")
    out["restored"] = rnd(new_model(tf.constant([[2.0, 2.0, 2.0]])))
    my_model = TracedSequentialModule(name="the_model")
    out["traced"] = [rnd(my_model([[2.0, 2.0, 2.0]])), rnd(my_model([[[2.0, 2.0, 2.0], [2.0, 2.0, 2.0]]]))]
    out["saved_model"] = raised(lambda: _saved_model(my_model))
    return out


def _saved_model(my_model):
    tf.saved_model.save(my_model, "the_saved_model")
    new_model = tf.saved_model.load("the_saved_model")
    return [isinstance(new_model, SequentialModule), rnd(new_model([[2.0, 2.0, 2.0]])),
            rnd(new_model([[[2.0, 2.0, 2.0], [2.0, 2.0, 2.0]]]))]


class MyDense(tf.keras.layers.Layer):
    def __init__(self, in_features, out_features, **kwargs):
        super().__init__(**kwargs)
        self.w = tf.Variable(normal([in_features, out_features]), name='w')
        self.b = tf.Variable(tf.zeros([out_features]), name='b')

    def call(self, x):
        y = tf.matmul(x, self.w) + self.b
        return relu(y)


class FlexibleDense(tf.keras.layers.Layer):
    def __init__(self, out_features, **kwargs):
        super().__init__(**kwargs)
        self.out_features = out_features

    def build(self, input_shape):
        self.w = tf.Variable(normal([input_shape[-1], self.out_features], seed=self.out_features + 3), name='w')
        self.b = tf.Variable(tf.zeros([self.out_features]), name='b')

    def call(self, inputs):
        return tf.matmul(inputs, self.w) + self.b


class MySequentialModel(tf.keras.Model):
    def __init__(self, name=None, **kwargs):
        super().__init__(**kwargs)
        self.dense_1 = FlexibleDense(out_features=3)
        self.dense_2 = FlexibleDense(out_features=2)

    def call(self, x):
        x = self.dense_1(x)
        return self.dense_2(x)


def intro_to_modules_keras():
    simple_layer = MyDense(name="simple", in_features=3, out_features=3)
    out = {"simple_list": raised(lambda: rnd(simple_layer([[2.0, 2.0, 2.0]])))}   # Keras 3 refuses a list
    out["simple"] = rnd(simple_layer(tf.constant([[2.0, 2.0, 2.0]])))
    flexible_dense = FlexibleDense(out_features=3)
    out["unbuilt_variables"] = len(flexible_dense.variables)
    out["flexible"] = rnd(flexible_dense(tf.constant([[2.0, 2.0, 2.0], [3.0, 3.0, 3.0]])))
    out["built_variables"] = len(flexible_dense.variables)
    try:
        flexible_dense(tf.constant([[2.0, 2.0, 2.0, 2.0]]))
        out["failed"] = False
    except tf.errors.InvalidArgumentError:
        out["failed"] = True
    my_sequential_model = MySequentialModel(name="the_model")
    out["sequential"] = rnd(my_sequential_model(tf.constant([[2.0, 2.0, 2.0]])))
    out["variables"] = len(my_sequential_model.variables)
    out["submodules"] = sorted(type(m).__name__ for m in my_sequential_model.submodules)
    inputs = tf.keras.Input(shape=[3, ])
    x = FlexibleDense(3)(inputs)
    x = FlexibleDense(2)(x)
    my_functional_model = tf.keras.Model(inputs=inputs, outputs=x)
    my_functional_model.summary(print_fn=lambda *a, **k: None)
    out["functional"] = rnd(my_functional_model(tf.constant([[2.0, 2.0, 2.0]])))
    out["save"] = raised(lambda: my_sequential_model.save("exname_of_file")).get("raises", "saved")
    my_sequential_model.save("exname_of_file.keras")
    reconstructed = raised(lambda: tf.keras.models.load_model("exname_of_file.keras"))
    out["load_model"] = reconstructed.get("raises", "loaded")
    return out


PROGRAMS = [basic_training_loops, intro_to_modules, intro_to_modules_keras]
REPLICATED = [basic_training_loops_fit]
