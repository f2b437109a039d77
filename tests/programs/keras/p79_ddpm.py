"""keras.io/examples/generative/ddpm, typed with ``tf.GradientTape`` -> ``md.GradientTape`` and ``tf.*`` ->
``keras.ops``/``keras.random``: a ``GaussianDiffusion`` utility holding the schedule as float32 constants
(``_extract`` gathers one entry per example, ``ops.take``, reshaped to ``[batch_size, 1, 1, 1]``); a U-Net with a
sinusoidal ``TimeEmbedding`` layer of an int64 ``time_input``, ``ResidualBlock``s (``GroupNormalization``, swish,
the time embedding added as ``Dense(...)(temb)[:, None, None, :]``), ``VarianceScaling`` ``kernel_init``, strided
``DownSample``, ``UpSampling2D`` ``UpSample`` and an ``AttentionBlock`` layer (einsum attention); a
``DiffusionModel`` whose ``train_step`` draws one timestep PER EXAMPLE (``randint(shape=(batch_size,))``) and the
noise, diffuses the images, calls the compiled loss (``self.loss``: ``MeanSquaredError``) on the predicted noise,
applies the gradients and moves every ``ema_network`` weight with ``ema_weight.assign(self.ema * ema_weight + (1 -
self.ema) * weight)``, returning ``{"loss": loss}``; ``ema_network.set_weights(network.get_weights())`` first;
``fit(train_ds, epochs=..., batch_size=batch_size)`` on a dataset of images only.

The example's generation callback is replaced by one reverse step of the EMA network on fixed noise after fit
(its ``p_sample`` loop over 1000 steps). Shrunk: 8x8 RGB images (64x64), 20 timesteps (1000), widths [8, 16]
(first_conv_channels 8; [64, 128, 256, 512]), attention on the second, 1 res block (2), 4 groups (8), 32 images,
batch 8, 2 epochs, ema 0.9 (0.999).
"""

import math

import numpy as np

import multidev as md

SOURCE = "https://keras.io/examples/generative/ddpm/"
img_size, img_channels, total_timesteps, norm_groups = 8, 3, 20, 4
first_conv_channels, widths, has_attention, num_res_blocks = 8, [8, 16], [False, True], 1


def run(keras, strategy, workdir, scale=1):
    layers, ops = keras.layers, keras.ops

    class GaussianDiffusion:
        def __init__(self, beta_start=1e-4, beta_end=0.02, timesteps=1000, clip_min=-1.0, clip_max=1.0):
            self.beta_start, self.beta_end, self.timesteps = beta_start, beta_end, timesteps
            self.clip_min, self.clip_max = clip_min, clip_max
            self.betas = betas = np.linspace(beta_start, beta_end, timesteps, dtype=np.float64)
            self.num_timesteps = int(timesteps)
            alphas = 1.0 - betas
            alphas_cumprod = np.cumprod(alphas, axis=0)
            self.betas = ops.convert_to_tensor(betas, dtype="float32")
            self.alphas_cumprod = ops.convert_to_tensor(alphas_cumprod, dtype="float32")
            self.sqrt_alphas_cumprod = ops.convert_to_tensor(np.sqrt(alphas_cumprod), dtype="float32")
            self.sqrt_one_minus_alphas_cumprod = ops.convert_to_tensor(np.sqrt(1.0 - alphas_cumprod),
                                                                       dtype="float32")
            self.sqrt_recip_alphas_cumprod = ops.convert_to_tensor(np.sqrt(1.0 / alphas_cumprod), dtype="float32")
            self.sqrt_recipm1_alphas_cumprod = ops.convert_to_tensor(np.sqrt(1.0 / alphas_cumprod - 1),
                                                                     dtype="float32")

        def _extract(self, a, t, x_shape):
            batch_size = x_shape[0]
            out = ops.take(a, t)
            return ops.reshape(out, [batch_size, 1, 1, 1])

        def q_sample(self, x_start, t, noise):
            x_start_shape = ops.shape(x_start)
            return (self._extract(self.sqrt_alphas_cumprod, t, ops.shape(x_start)) * x_start
                    + self._extract(self.sqrt_one_minus_alphas_cumprod, t, x_start_shape) * noise)

        def predict_start_from_noise(self, x_t, t, noise):
            x_t_shape = ops.shape(x_t)
            return (self._extract(self.sqrt_recip_alphas_cumprod, t, x_t_shape) * x_t
                    - self._extract(self.sqrt_recipm1_alphas_cumprod, t, x_t_shape) * noise)

    def kernel_init(scale):
        scale = max(scale, 1e-10)
        return keras.initializers.VarianceScaling(scale, mode="fan_avg", distribution="uniform")

    class AttentionBlock(layers.Layer):
        def __init__(self, units, groups=8, **kwargs):
            self.units = units
            self.groups = groups
            super().__init__(**kwargs)
            self.norm = layers.GroupNormalization(groups=groups)
            self.query = layers.Dense(units, kernel_initializer=kernel_init(1.0))
            self.key = layers.Dense(units, kernel_initializer=kernel_init(1.0))
            self.value = layers.Dense(units, kernel_initializer=kernel_init(1.0))
            self.proj = layers.Dense(units, kernel_initializer=kernel_init(0.0))

        def call(self, inputs):
            batch_size = ops.shape(inputs)[0]
            height = ops.shape(inputs)[1]
            width = ops.shape(inputs)[2]
            scale = ops.cast(self.units, "float32") ** (-0.5)
            inputs = self.norm(inputs)
            q = self.query(inputs)
            k = self.key(inputs)
            v = self.value(inputs)
            attn_score = ops.einsum("bhwc,bHWc->bhwHW", q, k) * scale
            attn_score = ops.reshape(attn_score, [batch_size, height, width, height * width])
            attn_score = ops.softmax(attn_score, -1)
            attn_score = ops.reshape(attn_score, [batch_size, height, width, height, width])
            proj = ops.einsum("bhwHW,bHWc->bhwc", attn_score, v)
            proj = self.proj(proj)
            return inputs + proj

    class TimeEmbedding(layers.Layer):
        def __init__(self, dim, **kwargs):
            super().__init__(**kwargs)
            self.dim = dim
            self.half_dim = dim // 2
            self.emb = math.log(10000) / (self.half_dim - 1)
            self.emb = ops.exp(ops.arange(self.half_dim, dtype="float32") * -self.emb)

        def call(self, inputs):
            inputs = ops.cast(inputs, dtype="float32")
            emb = inputs[:, None] * self.emb[None, :]
            emb = ops.concatenate([ops.sin(emb), ops.cos(emb)], axis=-1)
            return emb

    def ResidualBlock(width, groups=8, activation_fn=keras.activations.swish):
        def apply(inputs):
            x, t = inputs
            input_width = x.shape[3]
            if input_width == width:
                residual = x
            else:
                residual = layers.Conv2D(width, kernel_size=1, kernel_initializer=kernel_init(1.0))(x)
            temb = activation_fn(t)
            temb = layers.Dense(width, kernel_initializer=kernel_init(1.0))(temb)[:, None, None, :]
            x = layers.GroupNormalization(groups=groups)(x)
            x = activation_fn(x)
            x = layers.Conv2D(width, kernel_size=3, padding="same", kernel_initializer=kernel_init(1.0))(x)
            x = layers.Add()([x, temb])
            x = layers.GroupNormalization(groups=groups)(x)
            x = activation_fn(x)
            x = layers.Conv2D(width, kernel_size=3, padding="same", kernel_initializer=kernel_init(0.0))(x)
            x = layers.Add()([x, residual])
            return x
        return apply

    def DownSample(width):
        def apply(x):
            return layers.Conv2D(width, kernel_size=3, strides=2, padding="same",
                                 kernel_initializer=kernel_init(1.0))(x)
        return apply

    def UpSample(width, interpolation="nearest"):
        def apply(x):
            x = layers.UpSampling2D(size=2, interpolation=interpolation)(x)
            return layers.Conv2D(width, kernel_size=3, padding="same", kernel_initializer=kernel_init(1.0))(x)
        return apply

    def TimeMLP(units, activation_fn=keras.activations.swish):
        def apply(inputs):
            temb = layers.Dense(units, activation=activation_fn, kernel_initializer=kernel_init(1.0))(inputs)
            return layers.Dense(units, kernel_initializer=kernel_init(1.0))(temb)
        return apply

    def build_model(img_size, img_channels, widths, has_attention, num_res_blocks=2, norm_groups=8,
                    interpolation="nearest", activation_fn=keras.activations.swish):
        image_input = layers.Input(shape=(img_size, img_size, img_channels), name="image_input")
        time_input = keras.Input(shape=(), dtype="int64", name="time_input")
        x = layers.Conv2D(first_conv_channels, kernel_size=(3, 3), padding="same",
                          kernel_initializer=kernel_init(1.0))(image_input)
        temb = TimeEmbedding(dim=first_conv_channels * 4)(time_input)
        temb = TimeMLP(units=first_conv_channels * 4, activation_fn=activation_fn)(temb)
        skips = [x]
        # DownBlock
        for i in range(len(widths)):
            for _ in range(num_res_blocks):
                x = ResidualBlock(widths[i], groups=norm_groups, activation_fn=activation_fn)([x, temb])
                if has_attention[i]:
                    x = AttentionBlock(widths[i], groups=norm_groups)(x)
                skips.append(x)
            if widths[i] != widths[-1]:
                x = DownSample(widths[i])(x)
                skips.append(x)
        # MiddleBlock
        x = ResidualBlock(widths[-1], groups=norm_groups, activation_fn=activation_fn)([x, temb])
        x = AttentionBlock(widths[-1], groups=norm_groups)(x)
        x = ResidualBlock(widths[-1], groups=norm_groups, activation_fn=activation_fn)([x, temb])
        # UpBlock
        for i in reversed(range(len(widths))):
            for _ in range(num_res_blocks + 1):
                x = layers.Concatenate(axis=-1)([x, skips.pop()])
                x = ResidualBlock(widths[i], groups=norm_groups, activation_fn=activation_fn)([x, temb])
                if has_attention[i]:
                    x = AttentionBlock(widths[i], groups=norm_groups)(x)
            if i != 0:
                x = UpSample(widths[i], interpolation=interpolation)(x)
        # End block
        x = layers.GroupNormalization(groups=norm_groups)(x)
        x = activation_fn(x)
        x = layers.Conv2D(3, (3, 3), padding="same", kernel_initializer=kernel_init(0.0))(x)
        return keras.Model([image_input, time_input], x, name="unet")

    class DiffusionModel(keras.Model):
        def __init__(self, network, ema_network, timesteps, gdf_util, ema=0.999):
            super().__init__()
            self.network = network
            self.ema_network = ema_network
            self.timesteps = timesteps
            self.gdf_util = gdf_util
            self.ema = ema

        def train_step(self, images):
            # 1. Get the batch size
            batch_size = ops.shape(images)[0]
            # 2. Sample timesteps uniformly
            t = keras.random.randint(minval=0, maxval=self.timesteps, shape=(batch_size,), dtype="int64")
            with md.GradientTape() as tape:
                # 3. Sample random noise to be added to the images in the batch
                noise = keras.random.normal(shape=ops.shape(images), dtype=images.dtype)
                # 4. Diffuse the images with noise
                images_t = self.gdf_util.q_sample(images, t, noise)
                # 5. Pass the diffused images and time steps to the network
                pred_noise = self.network([images_t, t], training=True)
                # 6. Calculate the loss
                loss = self.loss(noise, pred_noise)
            # 7. Get the gradients
            gradients = tape.gradient(loss, self.network.trainable_weights)
            # 8. Update the weights of the network
            self.optimizer.apply_gradients(zip(gradients, self.network.trainable_weights))
            # 9. Updates the weight values for the network with EMA weights
            for weight, ema_weight in zip(self.network.weights, self.ema_network.weights):
                ema_weight.assign(self.ema * ema_weight + (1 - self.ema) * weight)
            # 10. Return loss values
            return {"loss": loss}

    rng = np.random.RandomState(0)
    n = 32 * scale
    images = np.clip(rng.normal(0, 0.5, (n, img_size, img_size, img_channels)), -1.0, 1.0).astype("float32")
    train_ds = md.data.Dataset.from_tensor_slices(images).batch(8)
    keras.utils.set_random_seed(0)
    with strategy.scope():
        network = build_model(img_size=img_size, img_channels=img_channels, widths=widths,
                              has_attention=has_attention, num_res_blocks=num_res_blocks, norm_groups=norm_groups,
                              activation_fn=keras.activations.swish)
        ema_network = build_model(img_size=img_size, img_channels=img_channels, widths=widths,
                                  has_attention=has_attention, num_res_blocks=num_res_blocks,
                                  norm_groups=norm_groups, activation_fn=keras.activations.swish)
        ema_network.set_weights(network.get_weights())  # Initially the weights are the same
        gdf_util = GaussianDiffusion(timesteps=total_timesteps)
        model = DiffusionModel(network=network, ema_network=ema_network, gdf_util=gdf_util,
                               timesteps=total_timesteps, ema=0.9)
        model.compile(loss=keras.losses.MeanSquaredError(), optimizer=keras.optimizers.Adam(learning_rate=2e-3))
    history = model.fit(train_ds, epochs=2, batch_size=8, verbose=0)
    noise = np.random.RandomState(1).normal(size=(4, img_size, img_size, img_channels)).astype("float32")
    t = np.full((4,), total_timesteps - 1, dtype="int64")
    pred_noise = ema_network.predict([noise, t], verbose=0, batch_size=4)
    x0 = gdf_util.predict_start_from_noise(ops.convert_to_tensor(noise), ops.convert_to_tensor(t), pred_noise)
    gap = max(float(np.abs(a - b).max()) for a, b in zip(network.get_weights(), ema_network.get_weights()))
    return {"_model": network, "history": history.history, "ema_pred_noise": pred_noise,
            "x0": ops.convert_to_numpy(x0), "ema_gap": gap,
            "net_pred": network.predict([noise, t], verbose=0, batch_size=4)}
