"""keras.io/examples/generative/vq_vae as printed (``tf.`` -> ``md.``/``keras.ops``): a ``VectorQuantizer(layers.
Layer)`` whose ``__init__`` makes its codebook as a bare ``tf.Variable(initial_value=w_init(shape=..., dtype=
"float32"), trainable=True, name="embeddings_vqvae")`` attribute (``md.Variable`` on md.keras, ``keras.Variable`` on
Keras 3), ``call`` flattening with ``tf.reshape(x, [-1, embedding_dim])``, ``argmin`` distances, ``one_hot``,
``matmul(..., transpose_b=True)``, the commitment and codebook losses through ``self.add_loss`` and the straight-
through estimator; encoder and decoder (``get_decoder`` sizes its input from a throwaway ``get_encoder(latent_dim).
output.shape[1:]``); a ``VQVAETrainer(keras.models.Model)`` holding the ``vqvae`` and three ``Mean`` trackers in a
``metrics`` property, whose ``train_step`` adds ``sum(self.vqvae.losses)`` to the reconstruction loss divided by the
data variance; ``compile(optimizer=keras.optimizers.Adam())``, ``fit(x_train_scaled, epochs=..., batch_size=...)``;
then the trained ``vqvae.predict``, ``get_layer("encoder").predict`` and the quantizer's ``get_code_indices`` of
the flattened encodings, ``.numpy().reshape(...)``.

MNIST is made up (p100's 8x8 strokes, padded to 12x12: two stride-2 convolutions give 3x3 codes). Shrunk: 8/16
filters (32/64), latent 4 (16), 16 codes (128), batch 16 (128), 2 epochs (30), 64 images (60000).
"""

import numpy as np

import multidev as md

from tests.programs.keras import p100_pixelcnn as p100

SOURCE = "https://keras.io/examples/generative/vq_vae/"
size, latent_dim, num_embeddings = 12, 4, 16


def images(rng, n):
    return np.pad(p100.digits(rng, n), ((0, 0), (2, 2), (2, 2), (0, 0)))


def run(keras, strategy, workdir, scale=1):
    layers, ops = keras.layers, keras.ops
    if keras is md.keras:
        tf_Variable = md.Variable
    else:   # Keras 3's Variable names its first argument `initializer`
        def tf_Variable(initial_value, **kwargs):
            return keras.Variable(initializer=initial_value, **kwargs)

    class VectorQuantizer(layers.Layer):
        def __init__(self, num_embeddings, embedding_dim, beta=0.25, **kwargs):
            super().__init__(**kwargs)
            self.embedding_dim = embedding_dim
            self.num_embeddings = num_embeddings
            self.beta = beta
            w_init = keras.initializers.RandomUniform()   # tf.random_uniform_initializer(): U(-0.05, 0.05)
            self.embeddings = tf_Variable(
                initial_value=w_init(shape=(self.embedding_dim, self.num_embeddings), dtype="float32"),
                trainable=True, name="embeddings_vqvae")

        def call(self, x):
            input_shape = ops.shape(x)
            flattened = ops.reshape(x, [-1, self.embedding_dim])
            encoding_indices = self.get_code_indices(flattened)
            encodings = ops.one_hot(encoding_indices, self.num_embeddings)
            quantized = ops.matmul(encodings, ops.transpose(self.embeddings))
            quantized = ops.reshape(quantized, input_shape)
            commitment_loss = ops.mean((ops.stop_gradient(quantized) - x) ** 2)
            codebook_loss = ops.mean((quantized - ops.stop_gradient(x)) ** 2)
            self.add_loss(self.beta * commitment_loss + codebook_loss)
            quantized = x + ops.stop_gradient(quantized - x)
            return quantized

        def get_code_indices(self, flattened_inputs):
            similarity = ops.matmul(flattened_inputs, self.embeddings)
            distances = (ops.sum(flattened_inputs**2, axis=1, keepdims=True) + ops.sum(self.embeddings**2, axis=0)
                         - 2 * similarity)
            encoding_indices = ops.argmin(distances, axis=1)
            return encoding_indices

    def get_encoder(latent_dim=16):
        encoder_inputs = keras.Input(shape=(size, size, 1))
        x = layers.Conv2D(8, 3, activation="relu", strides=2, padding="same")(encoder_inputs)
        x = layers.Conv2D(16, 3, activation="relu", strides=2, padding="same")(x)
        encoder_outputs = layers.Conv2D(latent_dim, 1, padding="same")(x)
        return keras.Model(encoder_inputs, encoder_outputs, name="encoder")

    def get_decoder(latent_dim=16):
        latent_inputs = keras.Input(shape=get_encoder(latent_dim).output.shape[1:])
        x = layers.Conv2DTranspose(16, 3, activation="relu", strides=2, padding="same")(latent_inputs)
        x = layers.Conv2DTranspose(8, 3, activation="relu", strides=2, padding="same")(x)
        decoder_outputs = layers.Conv2DTranspose(1, 3, padding="same")(x)
        return keras.Model(latent_inputs, decoder_outputs, name="decoder")

    def get_vqvae(latent_dim=16, num_embeddings=64):
        vq_layer = VectorQuantizer(num_embeddings, latent_dim, name="vector_quantizer")
        encoder = get_encoder(latent_dim)
        decoder = get_decoder(latent_dim)
        inputs = keras.Input(shape=(size, size, 1))
        encoder_outputs = encoder(inputs)
        quantized_latents = vq_layer(encoder_outputs)
        reconstructions = decoder(quantized_latents)
        return keras.Model(inputs, reconstructions, name="vq_vae")

    class VQVAETrainer(keras.models.Model):
        def __init__(self, train_variance, latent_dim=32, num_embeddings=128, **kwargs):
            super().__init__(**kwargs)
            self.train_variance = train_variance
            self.latent_dim = latent_dim
            self.num_embeddings = num_embeddings
            self.vqvae = get_vqvae(self.latent_dim, self.num_embeddings)
            self.total_loss_tracker = keras.metrics.Mean(name="total_loss")
            self.reconstruction_loss_tracker = keras.metrics.Mean(name="reconstruction_loss")
            self.vq_loss_tracker = keras.metrics.Mean(name="vq_loss")

        @property
        def metrics(self):
            return [self.total_loss_tracker, self.reconstruction_loss_tracker, self.vq_loss_tracker]

        def train_step(self, x):
            with md.GradientTape() as tape:
                reconstructions = self.vqvae(x)
                reconstruction_loss = (ops.mean((x - reconstructions) ** 2) / self.train_variance)
                total_loss = reconstruction_loss + sum(self.vqvae.losses)
            grads = tape.gradient(total_loss, self.vqvae.trainable_variables)
            self.optimizer.apply_gradients(zip(grads, self.vqvae.trainable_variables))
            self.total_loss_tracker.update_state(total_loss)
            self.reconstruction_loss_tracker.update_state(reconstruction_loss)
            self.vq_loss_tracker.update_state(sum(self.vqvae.losses))
            return {"loss": self.total_loss_tracker.result(),
                    "reconstruction_loss": self.reconstruction_loss_tracker.result(),
                    "vqvae_loss": self.vq_loss_tracker.result()}

    rng = np.random.RandomState(0)
    x_train, x_test = images(rng, 64 * scale), images(rng, 8)
    x_train_scaled = ((x_train / 255.0) - 0.5).astype("float32")
    x_test_scaled = ((x_test / 255.0) - 0.5).astype("float32")
    data_variance = np.var(x_train / 255.0)

    keras.utils.set_random_seed(0)
    with strategy.scope():
        vqvae_trainer = VQVAETrainer(data_variance, latent_dim=latent_dim, num_embeddings=num_embeddings)
        vqvae_trainer.compile(optimizer=keras.optimizers.Adam())
    history = vqvae_trainer.fit(x_train_scaled, epochs=2, batch_size=16, verbose=0)

    trained_vqvae_model = vqvae_trainer.vqvae
    reconstructions_test = trained_vqvae_model.predict(x_test_scaled, verbose=0)
    encoder = vqvae_trainer.vqvae.get_layer("encoder")
    quantizer = vqvae_trainer.vqvae.get_layer("vector_quantizer")
    encoded_outputs = encoder.predict(x_test_scaled, verbose=0)
    flat_enc_outputs = encoded_outputs.reshape(-1, encoded_outputs.shape[-1])
    codebook_indices = quantizer.get_code_indices(flat_enc_outputs)
    codebook_indices = codebook_indices.numpy().reshape(encoded_outputs.shape[:-1])
    return {"_model": trained_vqvae_model, "history": history.history, "reconstructions": reconstructions_test,
            "codes": codebook_indices, "codebook": keras.ops.convert_to_numpy(quantizer.embeddings),
            "trainable_count": len(trained_vqvae_model.trainable_variables)}
