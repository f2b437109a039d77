"""keras.io/examples/nlp/masked_language_modeling as printed (Keras 3 version): BERT-style 15% masking made with
numpy's global generator (80/10/10, ``sample_weights`` 1 on the masked tokens), a functional ``MaskedLanguageModel``
whose overridden ``compute_loss`` calls a module-level ``SparseCategoricalCrossentropy(reduction=None)`` with the
sample weights, updates a module-level ``keras.metrics.Mean(name="loss")`` made OUTSIDE the strategy's scope
(``loss_tracker.update_state(loss, sample_weight=sample_weight)``) and returns ``keras.ops.sum(loss)`` (a sum over
the batch's tokens, not a mean); ``compute_metrics`` returns the tracker's result and a ``metrics`` property lists it.
A ``MaskedTextGenerator`` callback predicts a masked sentence in ``on_epoch_end``. The model is saved as ``.keras``,
loaded with ``custom_objects``, cut at ``encoder_0_ffn_layernormalization``, frozen under a classifier, fit, then
unfrozen, compiled again and fit again.

Made up: IMDB token ids (the TextVectorization layer and the raw strings left out: Keras 3's needs TensorFlow), the
mask token is the last id; keras_hub's ``PositionEmbedding`` is a small layer of the same weights. Shrunk: vocabulary
40, 12 tokens, embedding 16, 2 heads, 1 layer, 64 reviews, batch 16, 2 epochs (5).
"""

import os

import numpy as np

import multidev as md

SOURCE = "https://keras.io/examples/nlp/masked_language_modeling/"
VOCAB_SIZE, MAX_LEN, EMBED_DIM, NUM_HEAD, FF_DIM, NUM_LAYERS, BATCH_SIZE, LR = 40, 12, 16, 2, 16, 1, 16, 0.001


def reviews(rng, n):
    sentiment = rng.randint(0, 2, n)
    tokens = rng.randint(3, VOCAB_SIZE - 1, (n, MAX_LEN))
    tokens[:, 0] = 3 + 10 * sentiment + rng.randint(0, 3, n)   # the sentiment shows in the first word
    lengths = rng.randint(MAX_LEN // 2, MAX_LEN + 1, n)
    tokens[np.arange(MAX_LEN)[None, :] >= lengths[:, None]] = 0   # padding
    return tokens.astype("int64"), sentiment.astype("float32")


def run(keras, strategy, workdir, scale=1):
    layers = keras.layers
    rng = np.random.RandomState(0)
    x_train, y_train = reviews(rng, 64 * scale)
    x_test, y_test = reviews(rng, 16)
    mask_token_id = VOCAB_SIZE - 1
    keras.utils.set_random_seed(0)

    def get_masked_input_and_labels(encoded_texts):
        inp_mask = np.random.rand(*encoded_texts.shape) < 0.15
        inp_mask[encoded_texts <= 2] = False
        labels = -1 * np.ones(encoded_texts.shape, dtype=int)
        labels[inp_mask] = encoded_texts[inp_mask]
        encoded_texts_masked = np.copy(encoded_texts)
        inp_mask_2mask = inp_mask & (np.random.rand(*encoded_texts.shape) < 0.90)
        encoded_texts_masked[inp_mask_2mask] = mask_token_id
        inp_mask_2random = inp_mask_2mask & (np.random.rand(*encoded_texts.shape) < 1 / 9)
        encoded_texts_masked[inp_mask_2random] = np.random.randint(3, mask_token_id, inp_mask_2random.sum())
        sample_weights = np.ones(labels.shape)
        sample_weights[labels == -1] = 0
        y_labels = np.copy(encoded_texts)
        return encoded_texts_masked, y_labels, sample_weights

    train_classifier_ds = md.data.Dataset.from_tensor_slices((x_train, y_train)).batch(BATCH_SIZE)
    test_classifier_ds = md.data.Dataset.from_tensor_slices((x_test, y_test)).batch(BATCH_SIZE)
    x_masked_train, y_masked_labels, sample_weights = get_masked_input_and_labels(np.concatenate([x_train, x_test]))
    mlm_ds = md.data.Dataset.from_tensor_slices((x_masked_train, y_masked_labels, sample_weights)).batch(BATCH_SIZE)

    class PositionEmbedding(layers.Layer):   # keras_hub.layers.PositionEmbedding's weights and call
        def __init__(self, sequence_length, **kwargs):
            super().__init__(**kwargs)
            self.sequence_length = sequence_length

        def build(self, inputs_shape):
            self.position_embeddings = self.add_weight(
                name="embeddings", shape=[self.sequence_length, inputs_shape[-1]], initializer="glorot_uniform")

        def call(self, inputs):
            shape = keras.ops.shape(inputs)
            return keras.ops.broadcast_to(self.position_embeddings[: shape[-2], :], shape)

        def get_config(self):
            return {**super().get_config(), "sequence_length": self.sequence_length}

    def bert_module(query, key, value, i):
        attention_output = layers.MultiHeadAttention(num_heads=NUM_HEAD, key_dim=EMBED_DIM // NUM_HEAD,
                                                     name="encoder_{}_multiheadattention".format(i))(query, key, value)
        attention_output = layers.Dropout(0.1, name="encoder_{}_att_dropout".format(i))(attention_output)
        attention_output = layers.LayerNormalization(epsilon=1e-6, name="encoder_{}_att_layernormalization".format(i))(
            query + attention_output)
        ffn = keras.Sequential([layers.Dense(FF_DIM, activation="relu"), layers.Dense(EMBED_DIM)],
                               name="encoder_{}_ffn".format(i))
        ffn_output = ffn(attention_output)
        ffn_output = layers.Dropout(0.1, name="encoder_{}_ffn_dropout".format(i))(ffn_output)
        return layers.LayerNormalization(epsilon=1e-6, name="encoder_{}_ffn_layernormalization".format(i))(
            attention_output + ffn_output)

    loss_fn = keras.losses.SparseCategoricalCrossentropy(reduction=None)
    loss_tracker = keras.metrics.Mean(name="loss")

    class MaskedLanguageModel(keras.Model):
        def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None):
            loss = loss_fn(y, y_pred, sample_weight)
            loss_tracker.update_state(loss, sample_weight=sample_weight)
            return keras.ops.sum(loss)

        def compute_metrics(self, x, y, y_pred, sample_weight):
            return {"loss": loss_tracker.result()}

        @property
        def metrics(self):
            return [loss_tracker]

    def create_masked_language_bert_model():
        inputs = layers.Input((MAX_LEN,), dtype="int64")
        word_embeddings = layers.Embedding(VOCAB_SIZE, EMBED_DIM, name="word_embedding")(inputs)
        position_embeddings = PositionEmbedding(sequence_length=MAX_LEN)(word_embeddings)
        embeddings = word_embeddings + position_embeddings
        encoder_output = embeddings
        for i in range(NUM_LAYERS):
            encoder_output = bert_module(encoder_output, encoder_output, encoder_output, i)
        mlm_output = layers.Dense(VOCAB_SIZE, name="mlm_cls", activation="softmax")(encoder_output)
        mlm_model = MaskedLanguageModel(inputs, mlm_output, name="masked_bert_model")
        mlm_model.compile(optimizer=keras.optimizers.Adam(learning_rate=LR))
        return mlm_model

    class MaskedTextGenerator(keras.callbacks.Callback):
        def __init__(self, sample_tokens, top_k=5):
            self.sample_tokens = sample_tokens
            self.k = top_k
            self.seen = []

        def on_epoch_end(self, epoch, logs=None):
            prediction = self.model.predict(self.sample_tokens, verbose=0)
            masked_index = np.where(self.sample_tokens == mask_token_id)[1]
            mask_prediction = prediction[0][masked_index]
            top_indices = mask_prediction[0].argsort()[-self.k:][::-1]
            self.seen.append(mask_prediction[0][top_indices])

    sample_tokens = x_test[:1].copy()
    sample_tokens[0, 2] = mask_token_id
    generator_callback = MaskedTextGenerator(sample_tokens)
    with strategy.scope():
        bert_masked_model = create_masked_language_bert_model()
    mlm_history = bert_masked_model.fit(mlm_ds, epochs=2, callbacks=[generator_callback], verbose=0)
    path = os.path.join(workdir, "bert_mlm_imdb.keras")
    bert_masked_model.save(path)

    with strategy.scope():
        mlm_model = keras.models.load_model(path, custom_objects={"MaskedLanguageModel": MaskedLanguageModel,
                                                                  "PositionEmbedding": PositionEmbedding})
        pretrained_bert_model = keras.Model(mlm_model.input,
                                            mlm_model.get_layer("encoder_0_ffn_layernormalization").output)
        pretrained_bert_model.trainable = False

        def create_classifier_bert_model():
            inputs = layers.Input((MAX_LEN,), dtype="int64")
            sequence_output = pretrained_bert_model(inputs)
            pooled_output = layers.GlobalMaxPooling1D()(sequence_output)
            hidden_layer = layers.Dense(8, activation="relu")(pooled_output)
            outputs = layers.Dense(1, activation="sigmoid")(hidden_layer)
            classifer_model = keras.Model(inputs, outputs, name="classification")
            classifer_model.compile(optimizer=keras.optimizers.Adam(), loss="binary_crossentropy",
                                    metrics=["accuracy"])
            return classifer_model

        classifer_model = create_classifier_bert_model()
    def encoder_weights():
        return [np.array(keras.ops.convert_to_numpy(w)) for w in pretrained_bert_model.weights]

    before = encoder_weights()
    frozen = classifer_model.fit(train_classifier_ds, epochs=2, validation_data=test_classifier_ds, verbose=0)
    with strategy.scope():
        pretrained_bert_model.trainable = True
        classifer_model.compile(optimizer=keras.optimizers.Adam(), loss="binary_crossentropy", metrics=["accuracy"])
    after_frozen = encoder_weights()
    tuned = classifer_model.fit(train_classifier_ds, epochs=2, validation_data=test_classifier_ds, verbose=0)
    moved = [max(float(np.abs(a - b).max()) for a, b in zip(before, w)) for w in (after_frozen, encoder_weights())]
    return {"_model": classifer_model, "mlm": mlm_history.history, "generated": generator_callback.seen,
            "mlm_predict": bert_masked_model.predict(x_test[:2], verbose=0),
            "loaded_predict": mlm_model.predict(x_test[:2], verbose=0),
            "frozen": frozen.history, "tuned": tuned.history,
            "encoder_moved": [moved[0], float(moved[1] > 0)],
            "classifier_predict": classifer_model.predict(x_test, verbose=0)}
