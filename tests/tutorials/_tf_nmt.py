"""tensorflow.org's tutorials/text/nmt_with_attention, typed as printed with ``tf.`` -> ``md.``.

Data: 20 Spanish -> English pairs written here (never downloaded); the first 16 train, the rest validate;
BATCH_SIZE 8, units 8. Every weight is set from a pattern of its shape alone (``_tf_transformer.by_shape``).
Left out: ``ShapeChecker`` (it is einops, not tf), ``tf_text.normalize_utf8`` (tensorflow_text, not tf; the
texts here are ASCII but for '¿'), the translate loop (string tensors: ``id_to_word``,
``tf.strings.reduce_join``). Substitution on md: ``TextVectorization(ragged=True)`` -> ``ragged=False``
(md refuses ragged=True saying why) and ``process_text`` drops each target's [END] before slicing the padded
ids, which gives the ragged ``target[:, :-1].to_tensor()``. The page's ``shuffle(BUFFER_SIZE)`` is on
"<name>"; "<name>_no_shuffle" leaves it out so training compares throughout.
"""

import numpy as np

from _tf_core_common import IS_TF, copies_agree, history, rnd, scope, tf
from _tf_transformer import by_shape

PAIRS = [("Hola, amigo!", "Hi, friend!"), ("¿Dónde está la casa?", "Where is the house?"),
         ("Es mi perro.", "It is my dog."), ("Tengo un gato.", "I have a cat."), ("Ven aquí.", "Come here."),
         ("La casa es grande.", "The house is big."), ("¿Tienes un perro?", "Do you have a dog?"),
         ("Mi amigo es alto.", "My friend is tall."), ("El gato come.", "The cat eats."),
         ("Me gusta el café.", "I like coffee."), ("¿Es tu casa?", "Is it your house?"),
         ("El perro corre.", "The dog runs."), ("Tengo hambre.", "I am hungry."), ("Hace frío.", "It is cold."),
         ("Mi casa es tu casa.", "My house is your house."), ("Ella lee un libro.", "She reads a book."),
         ("El libro es mío.", "The book is mine."), ("¿Quién eres?", "Who are you?"),
         ("Vamos a casa.", "Let us go home."), ("Tengo un libro.", "I have a book.")]


def tf_lower_and_split_punct(text):
    text = tf.strings.lower(text)
    text = tf.strings.regex_replace(text, '[^ a-z.?!,¿]', '')
    text = tf.strings.regex_replace(text, '[.?!,¿]', r' \0 ')
    text = tf.strings.strip(text)
    text = tf.strings.join(['[START]', text, '[END]'], separator=' ')
    return text


class Encoder(tf.keras.layers.Layer):
    def __init__(self, text_processor, units):
        super(Encoder, self).__init__()
        self.text_processor = text_processor
        self.vocab_size = text_processor.vocabulary_size()
        self.units = units
        self.embedding = tf.keras.layers.Embedding(self.vocab_size, units, mask_zero=True)
        self.rnn = tf.keras.layers.Bidirectional(
            merge_mode='sum',
            layer=tf.keras.layers.GRU(units, return_sequences=True, recurrent_initializer='glorot_uniform'))

    def call(self, x):
        x = self.embedding(x)
        x = self.rnn(x)
        return x


class CrossAttention(tf.keras.layers.Layer):
    def __init__(self, units, **kwargs):
        super().__init__()
        self.mha = tf.keras.layers.MultiHeadAttention(key_dim=units, num_heads=1, **kwargs)
        self.layernorm = tf.keras.layers.LayerNormalization()
        self.add = tf.keras.layers.Add()

    def call(self, x, context):
        attn_output, attn_scores = self.mha(query=x, value=context, return_attention_scores=True)
        attn_scores = tf.reduce_mean(attn_scores, axis=1)
        self.last_attention_weights = attn_scores
        x = self.add([x, attn_output])
        x = self.layernorm(x)
        return x


class Decoder(tf.keras.layers.Layer):
    @classmethod
    def add_method(cls, fun):
        setattr(cls, fun.__name__, fun)
        return fun

    def __init__(self, text_processor, units):
        super(Decoder, self).__init__()
        self.text_processor = text_processor
        self.vocab_size = text_processor.vocabulary_size()
        self.word_to_id = tf.keras.layers.StringLookup(
            vocabulary=text_processor.get_vocabulary(), mask_token='', oov_token='[UNK]')
        self.start_token = self.word_to_id('[START]')
        self.end_token = self.word_to_id('[END]')
        self.units = units
        self.embedding = tf.keras.layers.Embedding(self.vocab_size, units, mask_zero=True)
        self.rnn = tf.keras.layers.GRU(units, return_sequences=True, return_state=True,
                                       recurrent_initializer='glorot_uniform')
        self.attention = CrossAttention(units)
        self.output_layer = tf.keras.layers.Dense(self.vocab_size)


@Decoder.add_method
def call(self, context, x, state=None, return_state=False):
    x = self.embedding(x)
    x, state = self.rnn(x, initial_state=state)
    x = self.attention(x, context)
    self.last_attention_weights = self.attention.last_attention_weights
    logits = self.output_layer(x)
    if return_state:
        return logits, state
    else:
        return logits


class Translator(tf.keras.Model):
    def __init__(self, units, context_text_processor, target_text_processor):
        super().__init__()
        encoder = Encoder(context_text_processor, units)
        decoder = Decoder(target_text_processor, units)
        self.encoder = encoder
        self.decoder = decoder

    def call(self, inputs):
        context, x = inputs
        context = self.encoder(context)
        logits = self.decoder(context, x)
        try:
            del logits._keras_mask
        except AttributeError:
            pass
        return logits


def masked_loss(y_true, y_pred):
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction='none')
    loss = loss_fn(y_true, y_pred)
    mask = tf.cast(y_true != 0, loss.dtype)
    loss *= mask
    return tf.reduce_sum(loss) / tf.reduce_sum(mask)


def masked_acc(y_true, y_pred):
    y_pred = tf.argmax(y_pred, axis=-1)
    y_pred = tf.cast(y_pred, y_true.dtype)
    match = tf.cast(y_true == y_pred, tf.float32)
    mask = tf.cast(y_true != 0, tf.float32)
    return tf.reduce_sum(match) / tf.reduce_sum(mask)


def _processors(max_vocab_size):
    ragged = {"ragged": True} if IS_TF else {}   # md: ragged=False (see the docstring)
    context = tf.keras.layers.TextVectorization(standardize=tf_lower_and_split_punct, max_tokens=max_vocab_size,
                                                **ragged)
    target = tf.keras.layers.TextVectorization(standardize=tf_lower_and_split_punct, max_tokens=max_vocab_size,
                                               **ragged)
    return context, target


def _process_text(context_text_processor, target_text_processor):
    if IS_TF:
        def process_text(context, target):
            context = context_text_processor(context).to_tensor()
            target = target_text_processor(target)
            targ_in = target[:, :-1].to_tensor()
            targ_out = target[:, 1:].to_tensor()
            return (context, targ_in), targ_out
        return process_text
    end = target_text_processor.get_vocabulary().index('[END]')

    def process_text(context, target):   # each row's [END] -> 0 before the padded [:, :-1]: the ragged slice
        context = context_text_processor(context)
        target = target_text_processor(target)
        targ_in = tf.where(target == end, tf.zeros_like(target), target)[:, :-1]
        targ_out = target[:, 1:]
        return (context, targ_in), targ_out
    return process_text


def nmt_with_attention(replicas, shuffle=True):
    out = {}
    context_raw = np.array([c for c, _ in PAIRS])
    target_raw = np.array([t for _, t in PAIRS])
    is_train = np.arange(len(PAIRS)) < 16
    BUFFER_SIZE, BATCH_SIZE = len(context_raw), 8
    train_raw = tf.data.Dataset.from_tensor_slices((context_raw[is_train], target_raw[is_train]))
    train_raw = (train_raw.shuffle(BUFFER_SIZE) if shuffle else train_raw).batch(BATCH_SIZE)
    val_raw = tf.data.Dataset.from_tensor_slices((context_raw[~is_train], target_raw[~is_train])).batch(BATCH_SIZE)
    standardized = tf_lower_and_split_punct(tf.constant('¿Todavía está en casa?'))
    out["standardized"] = standardized.numpy().decode() if IS_TF else standardized   # md: a str, no string tensors
    with scope(replicas):   # TF: a lookup table made outside the scope cannot join the model in it
        context_text_processor, target_text_processor = _processors(max_vocab_size=5000)
    context_text_processor.adapt(train_raw.map(lambda context, target: context))
    target_text_processor.adapt(train_raw.map(lambda context, target: target))
    out["context_vocabulary"] = context_text_processor.get_vocabulary()[:10]
    out["target_vocabulary"] = sorted(target_text_processor.get_vocabulary())
    process_text = _process_text(context_text_processor, target_text_processor)
    train_ds = train_raw.map(process_text, tf.data.AUTOTUNE)
    val_ds = val_raw.map(process_text, tf.data.AUTOTUNE)
    for (ex_context_tok, ex_tar_in), ex_tar_out in val_ds.take(1):
        out["val_batch"] = [ex_context_tok.numpy().tolist(), ex_tar_in.numpy().tolist(), ex_tar_out.numpy().tolist()]
    UNITS = 8
    with scope(replicas):
        model = Translator(UNITS, context_text_processor, target_text_processor)
        logits = model((ex_context_tok, ex_tar_in))
        by_shape(model)
        model.compile(optimizer='adam', loss=masked_loss, metrics=[masked_acc, masked_loss])
    out["logits"] = list(logits.shape)
    out["start_end"] = [int(model.decoder.start_token.numpy()), int(model.decoder.end_token.numpy())]
    out["attention_weights"] = list(model.decoder.last_attention_weights.shape)
    out["count_params"] = model.count_params()
    vocab_size = 1.0 * target_text_processor.vocabulary_size()
    out["vocab_size"] = repr(vocab_size)
    out["expected"] = rnd([tf.math.log(vocab_size).numpy(), 1 / vocab_size], 5)
    out["evaluate_untrained"] = {k: rnd(v, 5) for k, v in sorted(
        model.evaluate(val_ds, steps=1, return_dict=True, verbose=0).items())}
    h = model.fit(train_ds.repeat(), epochs=3, steps_per_epoch=2, validation_data=val_ds, validation_steps=1,
                  callbacks=[tf.keras.callbacks.EarlyStopping(patience=3)], verbose=0)
    out["fit"] = history(h)
    out["copies_agree"] = copies_agree(model.trainable_variables)
    return out


def nmt_with_attention_no_shuffle(replicas):
    return nmt_with_attention(replicas, shuffle=False)


PROGRAMS = []
REPLICATED = [nmt_with_attention, nmt_with_attention_no_shuffle]
