"""Guides "Making new layers and models via subclassing" and "The Sequential model"."""

import numpy as np

from _guides_common import K, L, X, Y, deterministic, fingerprint, history, ops, rnd, scope


class Linear(L.Layer):
    def __init__(self, units=32, **kwargs):
        super().__init__(**kwargs)
        self.units = units

    def build(self, input_shape):
        self.w = self.add_weight(shape=(input_shape[-1], self.units), initializer="random_normal", trainable=True)
        self.b = self.add_weight(shape=(self.units,), initializer="zeros", trainable=True)

    def call(self, inputs):
        return ops.matmul(inputs, self.w) + self.b

    def get_config(self):
        config = super().get_config()
        config.update({"units": self.units})
        return config


class ComputeSum(L.Layer):
    def __init__(self, input_dim):
        super().__init__()
        self.total = self.add_weight(initializer="zeros", shape=(input_dim,), trainable=False)

    def call(self, inputs):
        self.total.assign_add(ops.sum(inputs, axis=0))
        return self.total


class SumPassThrough(ComputeSum):
    def call(self, inputs):
        super().call(inputs)
        return inputs


class MLPBlock(L.Layer):
    def __init__(self):
        super().__init__()
        self.linear_1 = Linear(32)
        self.linear_2 = Linear(32)
        self.linear_3 = Linear(1)

    def call(self, inputs):
        x = ops.relu(self.linear_1(inputs))
        x = ops.relu(self.linear_2(x))
        return self.linear_3(x)


class ActivityRegularizationLayer(L.Layer):
    def __init__(self, rate=1e-2):
        super().__init__()
        self.rate = rate

    def call(self, inputs):
        self.add_loss(self.rate * ops.mean(inputs))
        return inputs


class OuterLayer(L.Layer):
    def __init__(self):
        super().__init__()
        self.activity_reg = ActivityRegularizationLayer(1e-2)

    def call(self, inputs):
        return self.activity_reg(inputs)


class CustomDropout(L.Layer):
    def __init__(self, rate, **kwargs):
        super().__init__(**kwargs)
        self.rate = rate

    def call(self, inputs, training=None):
        if training:
            return inputs * 0.0 + self.rate   # the guide draws a dropout mask; a constant keeps the sides equal
        return inputs


def layer_weights_and_state(r):
    out = {}
    with scope(r):
        my_sum = ComputeSum(2)
    x = ops.ones((2, 2))
    y = my_sum(x)
    y = my_sum(x)
    out["sum"] = rnd(y)
    out["counts"] = [len(my_sum.weights), len(my_sum.non_trainable_weights), len(my_sum.trainable_weights)]
    with scope(r):
        mlp = MLPBlock()
        y = mlp(ops.ones(shape=(3, 64)))
    out["mlp"] = [len(mlp.weights), len(mlp.trainable_weights), list(y.shape)]
    layer = Linear(64)
    config = layer.get_config()
    new_layer = Linear.from_config(config)
    out["config"] = [new_layer.units, config["units"], config["trainable"], new_layer.name != layer.name]
    drop = CustomDropout(0.5)
    out["training"] = [rnd(drop(np.ones((1, 2), "float32"), training=True)),
                       rnd(drop(np.ones((1, 2), "float32"), training=False)), rnd(drop(np.ones((1, 2), "float32")))]
    return out


def non_trainable_state_in_fit(r):
    """A weight updated with assign_add in call, during fit and predict (TF: per replica or aggregated?)."""
    with scope(r):
        summer = SumPassThrough(4)
        model = K.Sequential([K.Input((4,)), summer, L.Dense(1)])
        deterministic(model.layers[-1])
        model.compile(optimizer=K.optimizers.SGD(0.1), loss="mse")
    h = model.fit(X, Y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    return {"h": history(h), "total": rnd(summer.total)}


def add_loss(r):
    out = {}
    layer = OuterLayer()
    _ = layer(ops.zeros((1, 1)))
    out["losses_zero"] = len(layer.losses)
    _ = layer(ops.zeros((1, 1)))
    out["losses_again"] = len(layer.losses)
    with scope(r):
        inputs = K.Input(shape=(4,))
        x = L.Dense(3, activation="relu")(inputs)
        x = ActivityRegularizationLayer(0.5)(x)
        outputs = L.Dense(1)(x)
        model = K.Model(inputs, outputs)
        deterministic(model)
        model.compile(optimizer=K.optimizers.SGD(0.1), loss="mse")
    h = model.fit(X, Y, batch_size=4, epochs=2, shuffle=False, verbose=0)
    out["fit"] = {"h": history(h), "w": fingerprint(model.get_weights()),
                  "evaluate": round(float(model.evaluate(X, Y, batch_size=4, verbose=0)), 5)}
    return out


class Sampling(L.Layer):
    """Uses (z_mean, z_log_var) to sample z (epsilon fixed at 0.5: the guide draws it at random)."""

    def call(self, inputs):
        z_mean, z_log_var = inputs
        epsilon = ops.ones_like(z_mean) * 0.5
        return z_mean + ops.exp(0.5 * z_log_var) * epsilon


class Encoder(L.Layer):
    def __init__(self, latent_dim=2, intermediate_dim=8, name="encoder", **kwargs):
        super().__init__(name=name, **kwargs)
        self.dense_proj = L.Dense(intermediate_dim, activation="relu")
        self.dense_mean = L.Dense(latent_dim)
        self.dense_log_var = L.Dense(latent_dim)
        self.sampling = Sampling()

    def call(self, inputs):
        x = self.dense_proj(inputs)
        z_mean = self.dense_mean(x)
        z_log_var = self.dense_log_var(x)
        z = self.sampling((z_mean, z_log_var))
        return z_mean, z_log_var, z


class Decoder(L.Layer):
    def __init__(self, original_dim, intermediate_dim=8, name="decoder", **kwargs):
        super().__init__(name=name, **kwargs)
        self.dense_proj = L.Dense(intermediate_dim, activation="relu")
        self.dense_output = L.Dense(original_dim, activation="sigmoid")

    def call(self, inputs):
        return self.dense_output(self.dense_proj(inputs))


class VariationalAutoEncoder(K.Model):
    def __init__(self, original_dim, intermediate_dim=8, latent_dim=2, name="autoencoder", **kwargs):
        super().__init__(name=name, **kwargs)
        self.original_dim = original_dim
        self.encoder = Encoder(latent_dim=latent_dim, intermediate_dim=intermediate_dim)
        self.decoder = Decoder(original_dim, intermediate_dim=intermediate_dim)

    def call(self, inputs):
        z_mean, z_log_var, z = self.encoder(inputs)
        reconstructed = self.decoder(z)
        kl_loss = -0.5 * ops.mean(z_log_var - ops.square(z_mean) - ops.exp(z_log_var) + 1)
        self.add_loss(kl_loss)
        return reconstructed


def vae_fit(r):
    x_train = ((np.sin(np.arange(12 * 6) * 0.9) + 1) / 2).reshape(12, 6).astype("float32")
    with scope(r):
        vae = VariationalAutoEncoder(6, 8, 2)
        vae(x_train[:1])
        deterministic(vae)
        optimizer = K.optimizers.Adam(learning_rate=1e-2)
        vae.compile(optimizer, loss=K.losses.MeanSquaredError())
    h = vae.fit(x_train, x_train, epochs=2, batch_size=4, shuffle=False, verbose=0)
    return {"h": history(h), "w": fingerprint(vae.get_weights())}


def sequential_model(r):
    out = {}
    with scope(r):
        model = K.Sequential()
        model.add(K.Input(shape=(4,)))
        model.add(L.Dense(2, activation="relu"))
        model.add(L.Dense(3, activation="relu"))
        model.add(L.Dense(4))
        model.pop()
    out["after_pop"] = [len(model.layers), len(model.weights)]
    with scope(r):
        layer = L.Dense(3)
        unbuilt = [len(layer.weights)]
        layer(ops.ones((1, 4)))
        model = K.Sequential([L.Dense(2, activation="relu"), L.Dense(3, activation="relu"), L.Dense(4)])
        unbuilt += [len(layer.weights), len(model.weights)]
        model.build((None, 4))
        unbuilt += [len(model.weights), [list(w.shape) for w in model.weights]]
        model = K.Sequential()
        model.add(L.Dense(2, activation="relu", input_shape=(4,)))
        unbuilt += [len(model.weights), list(model.output_shape)]
    out["build"] = unbuilt
    with scope(r):
        initial_model = K.Sequential([K.Input(shape=(4,)), L.Dense(3, activation="relu", name="first"),
                                      L.Dense(3, activation="relu", name="my_intermediate_layer"), L.Dense(1)])
        deterministic(initial_model)
        feature_extractor = K.Model(inputs=initial_model.inputs,
                                    outputs=[layer.output for layer in initial_model.layers])
        one = K.Model(inputs=initial_model.inputs, outputs=initial_model.get_layer(name="my_intermediate_layer").output)
    out["features"] = [rnd(f) for f in feature_extractor(X[:2])]
    out["one_feature"] = rnd(one(X[:2]))
    with scope(r):   # transfer: freeze all but the last layer, then train
        for layer in initial_model.layers[:-1]:
            layer.trainable = False
        initial_model.compile(optimizer=K.optimizers.SGD(0.1), loss="mse")
    frozen = fingerprint(initial_model.layers[0].get_weights())
    h = initial_model.fit(X, Y, batch_size=4, epochs=2, shuffle=False, verbose=0)
    out["transfer"] = {"h": history(h), "w": fingerprint(initial_model.get_weights()),
                       "frozen_kept": frozen == fingerprint(initial_model.layers[0].get_weights()),
                       "trainable": len(initial_model.trainable_weights)}
    return out


def functional_layer_order(r):
    """Branching graphs list layers (and weights) in Keras's order: by depth, then first visit from the outputs."""
    def shapes(model):
        return [[type(layer).__name__, [list(w.shape) for w in layer.get_weights()]] for layer in model.layers]

    out = {}
    with scope(r):
        a, b = K.Input((4,)), K.Input((3,))
        y = L.Dense(2)(L.Dense(6)(b))
        out["two_inputs"] = shapes(K.Model([a, b], L.Dense(1)(L.Concatenate()([L.Dense(5)(a), y]))))
        i = K.Input((4,))
        h = L.Dense(4)(i)
        h2 = L.Dense(4)(h)
        out["skip_two_outputs"] = shapes(K.Model(i, [L.Dense(1)(L.Dense(3)(L.Add()([h, h2]))), h2]))
        shared, a, b = L.Dense(3), K.Input((3,)), K.Input((3,))
        out["shared"] = shapes(K.Model([a, b], L.Add()([shared(a), shared(L.Dense(3)(b))])))
    return out


SNIPPETS = [functional_layer_order, layer_weights_and_state, non_trainable_state_in_fit, add_loss, vae_fit, sequential_model]
