"""keras.io/examples/vision/masked_image_modeling (MAE), typed with ``tf.`` -> ``keras.ops`` / ``keras.random``
and ``tf.GradientTape`` -> ``md.GradientTape``: a ``Patches`` layer (``ops.image.extract_patches``), a
``PatchEncoder`` that masks a random 75% of each image's patches inside the model (the indices an ``argsort``
of ``keras.random.uniform`` noise over (batch, patches), gathered with ``take_along_axis``), a small
transformer encoder and a Dense decoder, and the ``MaskedAutoencoder`` whose ``train_step`` computes the MSE
between the masked patches and their reconstructions, with ``test_step`` alike; ``fit`` on a dataset of images
(``md.data`` for ``tf.data``) with ``validation_data`` and ``AdamW``.

Keras 3.15 on torch refuses to fit it on one device too: its symbolic build of the compiled metrics calls the
model, which has no ``call`` ("Unable to automatically build the model"; given a ``call`` returning the
reconstruction, the symbolic pass fails in ``ops.repeat`` by the unknown batch size).

The masking noise is drawn in the step over the replica's batch: in a Keras step on replicas each replica
takes its rows of one device's draw (``keras.random`` in md.keras, Keras 3's ``SeedGenerator`` on multidev),
so the masks, and the training, are one device's. Shrunk: 16x16 images in 4x4 patches (16 patches, 12 masked),
projection 16, one encoder layer with 2 heads, 128 training and 32 validation images, batch 16, 2 epochs.
"""

import numpy as np

import multidev as md

SOURCE = "https://keras.io/examples/vision/masked_image_modeling/"
IMAGE_SIZE, PATCH_SIZE, MASK_PROPORTION, ENC_PROJECTION_DIM = 16, 4, 0.75, 16
NUM_PATCHES = (IMAGE_SIZE // PATCH_SIZE) ** 2


def run(keras, strategy, workdir, scale=1):
    layers, ops = keras.layers, keras.ops

    class Patches(layers.Layer):
        def __init__(self, patch_size=PATCH_SIZE, **kwargs):
            super().__init__(**kwargs)
            self.patch_size = patch_size
            self.resize = layers.Reshape((-1, patch_size * patch_size * 3))

        def call(self, images):
            # Create patches from the input images
            patches = ops.image.extract_patches(images, size=self.patch_size)
            # Reshape the patches to (batch, num_patches, patch_area) and return it.
            return self.resize(patches)

    class PatchEncoder(layers.Layer):
        def __init__(self, patch_size=PATCH_SIZE, projection_dim=ENC_PROJECTION_DIM,
                     mask_proportion=MASK_PROPORTION, downstream=False, **kwargs):
            super().__init__(**kwargs)
            self.patch_size = patch_size
            self.projection_dim = projection_dim
            self.mask_proportion = mask_proportion
            self.downstream = downstream
            self.seed_generator = keras.random.SeedGenerator(1337)
            # This is a trainable mask token initialized randomly from a normal distribution.
            self.mask_token = self.add_weight(shape=(1, patch_size * patch_size * 3), initializer="random_normal",
                                              trainable=True, name="mask_token")

        def build(self, input_shape):
            _, self.num_patches, self.patch_area = input_shape
            # Create the projection layer for the patches.
            self.projection = layers.Dense(units=self.projection_dim)
            # Create the positional embedding layer.
            self.position_embedding = layers.Embedding(input_dim=self.num_patches, output_dim=self.projection_dim)
            # Number of patches that will be masked.
            self.num_mask = int(self.mask_proportion * self.num_patches)

        def call(self, patches):
            # Get the positional embeddings.
            batch_size = ops.shape(patches)[0]
            positions = ops.arange(start=0, stop=self.num_patches, step=1)
            pos_embeddings = self.position_embedding(positions[None, ...])
            pos_embeddings = ops.tile(pos_embeddings, [batch_size, 1, 1])  # (B, num_patches, projection_dim)
            # Embed the patches.
            patch_embeddings = self.projection(patches) + pos_embeddings  # (B, num_patches, projection_dim)
            mask_indices, unmask_indices = self.get_random_indices(batch_size)
            # The encoder input is the unmasked patch embeddings. Here we gather all the patches that should be
            # unmasked.
            unmasked_embeddings = ops.take_along_axis(patch_embeddings, unmask_indices[..., None], axis=1)
            # Get the unmasked and masked position embeddings. We will need them for the decoder.
            unmasked_positions = ops.take_along_axis(pos_embeddings, unmask_indices[..., None], axis=1)
            masked_positions = ops.take_along_axis(pos_embeddings, mask_indices[..., None], axis=1)
            # Repeat the mask token number of mask times.
            mask_tokens = ops.repeat(self.mask_token, repeats=self.num_mask, axis=0)
            mask_tokens = ops.repeat(mask_tokens[None, ...], repeats=batch_size, axis=0)
            # Get the masked embeddings for the tokens.
            masked_embeddings = self.projection(mask_tokens) + masked_positions
            return (unmasked_embeddings, masked_embeddings, unmasked_positions, mask_indices, unmask_indices)

        def get_random_indices(self, batch_size):
            # Create random indices from a uniform distribution and then split it into mask and unmask indices.
            rand_indices = ops.argsort(keras.random.uniform(shape=(batch_size, self.num_patches),
                                                            seed=self.seed_generator), axis=-1)
            mask_indices = rand_indices[:, : self.num_mask]
            unmask_indices = rand_indices[:, self.num_mask:]
            return mask_indices, unmask_indices

    def create_encoder():
        inputs = layers.Input((None, ENC_PROJECTION_DIM))
        x = layers.LayerNormalization(epsilon=1e-6)(inputs)
        attention_output = layers.MultiHeadAttention(num_heads=2, key_dim=ENC_PROJECTION_DIM)(x, x)
        x2 = layers.Add()([attention_output, inputs])
        x3 = layers.LayerNormalization(epsilon=1e-6)(x2)
        x3 = layers.Dense(ENC_PROJECTION_DIM, activation="gelu")(x3)
        outputs = layers.LayerNormalization(epsilon=1e-6)(layers.Add()([x3, x2]))
        return keras.Model(inputs, outputs, name="mae_encoder")

    def create_decoder():
        inputs = layers.Input((NUM_PATCHES, ENC_PROJECTION_DIM))
        x = layers.LayerNormalization(epsilon=1e-6)(inputs)
        x = layers.Flatten()(x)
        pre_final = layers.Dense(units=IMAGE_SIZE * IMAGE_SIZE * 3, activation="sigmoid")(x)
        outputs = layers.Reshape((IMAGE_SIZE, IMAGE_SIZE, 3))(pre_final)
        return keras.Model(inputs, outputs, name="mae_decoder")

    class MaskedAutoencoder(keras.Model):
        def __init__(self, patch_layer, patch_encoder, encoder, decoder, **kwargs):
            super().__init__(**kwargs)
            self.patch_layer = patch_layer
            self.patch_encoder = patch_encoder
            self.encoder = encoder
            self.decoder = decoder

        def calculate_loss(self, images, test=False):
            patches = self.patch_layer(images)
            (unmasked_embeddings, masked_embeddings, unmasked_positions, mask_indices,
             unmask_indices) = self.patch_encoder(patches)
            # Pass the unmasked patches to the encoder.
            encoder_outputs = self.encoder(unmasked_embeddings)
            # Create the decoder inputs.
            encoder_outputs = encoder_outputs + unmasked_positions
            decoder_inputs = ops.concatenate([encoder_outputs, masked_embeddings], axis=1)
            # Decode the inputs.
            decoder_outputs = self.decoder(decoder_inputs)
            decoder_patches = self.patch_layer(decoder_outputs)
            loss_patch = ops.take_along_axis(patches, mask_indices[..., None], axis=1)
            loss_output = ops.take_along_axis(decoder_patches, mask_indices[..., None], axis=1)
            # Compute the total loss.
            total_loss = self.compute_loss(y=loss_patch, y_pred=loss_output)
            return total_loss, loss_patch, loss_output

        def train_step(self, images):
            with md.GradientTape() as tape:
                total_loss, loss_patch, loss_output = self.calculate_loss(images)
            # Apply gradients.
            train_vars = [self.patch_layer.trainable_variables, self.patch_encoder.trainable_variables,
                          self.encoder.trainable_variables, self.decoder.trainable_variables]
            grads = tape.gradient(total_loss, train_vars)
            tv_list = []
            for grad, var in zip(grads, train_vars):
                for g, v in zip(grad, var):
                    tv_list.append((g, v))
            self.optimizer.apply_gradients(tv_list)
            # Report progress.
            results = {}
            for metric in self.metrics:
                metric.update_state(loss_patch, loss_output)
                results[metric.name] = metric.result()
            return results

        def test_step(self, images):
            total_loss, loss_patch, loss_output = self.calculate_loss(images, test=True)
            # Update the trackers.
            results = {}
            for metric in self.metrics:
                metric.update_state(loss_patch, loss_output)
                results[metric.name] = metric.result()
            return results

    rng = np.random.RandomState(0)
    x_train = rng.random((128 * scale, IMAGE_SIZE, IMAGE_SIZE, 3)).astype("float32")
    x_val = rng.random((32, IMAGE_SIZE, IMAGE_SIZE, 3)).astype("float32")
    keras.utils.set_random_seed(0)
    with strategy.scope():
        mae_model = MaskedAutoencoder(patch_layer=Patches(), patch_encoder=PatchEncoder(),
                                      encoder=create_encoder(), decoder=create_decoder())
        mae_model.compile(optimizer=keras.optimizers.AdamW(learning_rate=0.01, weight_decay=1e-4),
                          loss=keras.losses.MeanSquaredError(), metrics=["mae"])
    train_ds = md.data.Dataset.from_tensor_slices(x_train).batch(16)
    val_ds = md.data.Dataset.from_tensor_slices(x_val).batch(16)
    history = mae_model.fit(train_ds, epochs=2, validation_data=val_ds, verbose=0)
    loss, mae = mae_model.evaluate(val_ds, verbose=0)
    return {"_model": mae_model.decoder, "history": history.history, "evaluate": [loss, mae],
            "decoded": mae_model.decoder.predict(rng.random((2, NUM_PATCHES, ENC_PROJECTION_DIM)).astype("float32"),
                                                 verbose=0)[:, :4, :4, 0]}
