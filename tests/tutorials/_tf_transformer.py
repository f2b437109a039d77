"""tensorflow.org's tutorials/text/transformer, typed as printed with ``tf.`` -> ``md.``.

Data: token ids made here (never downloaded): 16 (context, target) pairs over a vocabulary of 20, zero
padded at the tail (the page's ``Embedding(mask_zero=True)`` masks reach MultiHeadAttention, the Add and
LayerNormalization layers and ``masked_loss``); ``((context, x), labels)`` batches of 4 as the page's
``prepare_batch``. Sizes are tiny (num_layers=2, d_model=8, dff=16, num_heads=2). Every weight is set from
a pattern that depends only on its shape, so the order a framework lists weights in does not matter.
Substitution: ``tf.math.rsqrt`` -> ``torch.rsqrt`` in CustomSchedule (md refuses it naming torch.rsqrt).
Dropout's rate is a parameter (the page's 0.1 on "<name>", 0.0 on "<name>_no_dropout").
"""

import numpy as np

from _tf_core_common import IS_TF, copies_agree, history, ints, rnd, scope, tf

if IS_TF:
    rsqrt = tf.math.rsqrt
else:
    import torch
    rsqrt = torch.rsqrt


def positional_encoding(length, depth):
    depth = depth / 2
    positions = np.arange(length)[:, np.newaxis]     # (seq, 1)
    depths = np.arange(depth)[np.newaxis, :] / depth   # (1, depth)
    angle_rates = 1 / (10000**depths)         # (1, depth)
    angle_rads = positions * angle_rates      # (pos, depth)
    pos_encoding = np.concatenate([np.sin(angle_rads), np.cos(angle_rads)], axis=-1)
    return tf.cast(pos_encoding, dtype=tf.float32)


class PositionalEmbedding(tf.keras.layers.Layer):
    def __init__(self, vocab_size, d_model):
        super().__init__()
        self.d_model = d_model
        self.embedding = tf.keras.layers.Embedding(vocab_size, d_model, mask_zero=True)
        self.pos_encoding = positional_encoding(length=2048, depth=d_model)

    def compute_mask(self, *args, **kwargs):
        return self.embedding.compute_mask(*args, **kwargs)

    def call(self, x):
        length = tf.shape(x)[1]
        x = self.embedding(x)
        x *= tf.math.sqrt(tf.cast(self.d_model, tf.float32))
        x = x + self.pos_encoding[tf.newaxis, :length, :]
        return x


class BaseAttention(tf.keras.layers.Layer):
    def __init__(self, **kwargs):
        super().__init__()
        self.mha = tf.keras.layers.MultiHeadAttention(**kwargs)
        self.layernorm = tf.keras.layers.LayerNormalization()
        self.add = tf.keras.layers.Add()


class CrossAttention(BaseAttention):
    def call(self, x, context):
        attn_output, attn_scores = self.mha(query=x, key=context, value=context, return_attention_scores=True)
        self.last_attn_scores = attn_scores
        x = self.add([x, attn_output])
        x = self.layernorm(x)
        return x


class GlobalSelfAttention(BaseAttention):
    def call(self, x):
        attn_output = self.mha(query=x, value=x, key=x)
        x = self.add([x, attn_output])
        x = self.layernorm(x)
        return x


class CausalSelfAttention(BaseAttention):
    def call(self, x):
        attn_output = self.mha(query=x, value=x, key=x, use_causal_mask=True)
        x = self.add([x, attn_output])
        x = self.layernorm(x)
        return x


class FeedForward(tf.keras.layers.Layer):
    def __init__(self, d_model, dff, dropout_rate=0.1):
        super().__init__()
        self.seq = tf.keras.Sequential([
            tf.keras.layers.Dense(dff, activation='relu'),
            tf.keras.layers.Dense(d_model),
            tf.keras.layers.Dropout(dropout_rate)])
        self.add = tf.keras.layers.Add()
        self.layer_norm = tf.keras.layers.LayerNormalization()

    def call(self, x):
        x = self.add([x, self.seq(x)])
        x = self.layer_norm(x)
        return x


class EncoderLayer(tf.keras.layers.Layer):
    def __init__(self, *, d_model, num_heads, dff, dropout_rate=0.1):
        super().__init__()
        self.self_attention = GlobalSelfAttention(num_heads=num_heads, key_dim=d_model, dropout=dropout_rate)
        self.ffn = FeedForward(d_model, dff, dropout_rate)   # the page leaves the FFN's rate at 0.1

    def call(self, x):
        x = self.self_attention(x)
        x = self.ffn(x)
        return x


class Encoder(tf.keras.layers.Layer):
    def __init__(self, *, num_layers, d_model, num_heads, dff, vocab_size, dropout_rate=0.1):
        super().__init__()
        self.d_model = d_model
        self.num_layers = num_layers
        self.pos_embedding = PositionalEmbedding(vocab_size=vocab_size, d_model=d_model)
        self.enc_layers = [EncoderLayer(d_model=d_model, num_heads=num_heads, dff=dff, dropout_rate=dropout_rate)
                           for _ in range(num_layers)]
        self.dropout = tf.keras.layers.Dropout(dropout_rate)

    def call(self, x):
        x = self.pos_embedding(x)
        x = self.dropout(x)
        for i in range(self.num_layers):
            x = self.enc_layers[i](x)
        return x


class DecoderLayer(tf.keras.layers.Layer):
    def __init__(self, *, d_model, num_heads, dff, dropout_rate=0.1):
        super(DecoderLayer, self).__init__()
        self.causal_self_attention = CausalSelfAttention(num_heads=num_heads, key_dim=d_model,
                                                         dropout=dropout_rate)
        self.cross_attention = CrossAttention(num_heads=num_heads, key_dim=d_model, dropout=dropout_rate)
        self.ffn = FeedForward(d_model, dff, dropout_rate)

    def call(self, x, context):
        x = self.causal_self_attention(x=x)
        x = self.cross_attention(x=x, context=context)
        self.last_attn_scores = self.cross_attention.last_attn_scores
        x = self.ffn(x)
        return x


class Decoder(tf.keras.layers.Layer):
    def __init__(self, *, num_layers, d_model, num_heads, dff, vocab_size, dropout_rate=0.1):
        super(Decoder, self).__init__()
        self.d_model = d_model
        self.num_layers = num_layers
        self.pos_embedding = PositionalEmbedding(vocab_size=vocab_size, d_model=d_model)
        self.dropout = tf.keras.layers.Dropout(dropout_rate)
        self.dec_layers = [DecoderLayer(d_model=d_model, num_heads=num_heads, dff=dff, dropout_rate=dropout_rate)
                           for _ in range(num_layers)]
        self.last_attn_scores = None

    def call(self, x, context):
        x = self.pos_embedding(x)
        x = self.dropout(x)
        for i in range(self.num_layers):
            x = self.dec_layers[i](x, context)
        self.last_attn_scores = self.dec_layers[-1].last_attn_scores
        return x


class Transformer(tf.keras.Model):
    def __init__(self, *, num_layers, d_model, num_heads, dff, input_vocab_size, target_vocab_size,
                 dropout_rate=0.1):
        super().__init__()
        self.encoder = Encoder(num_layers=num_layers, d_model=d_model, num_heads=num_heads, dff=dff,
                               vocab_size=input_vocab_size, dropout_rate=dropout_rate)
        self.decoder = Decoder(num_layers=num_layers, d_model=d_model, num_heads=num_heads, dff=dff,
                               vocab_size=target_vocab_size, dropout_rate=dropout_rate)
        self.final_layer = tf.keras.layers.Dense(target_vocab_size)

    def call(self, inputs):
        context, x = inputs
        context = self.encoder(context)
        x = self.decoder(x, context)
        logits = self.final_layer(x)
        try:
            del logits._keras_mask
        except AttributeError:
            pass
        return logits


class CustomSchedule(tf.keras.optimizers.schedules.LearningRateSchedule):
    def __init__(self, d_model, warmup_steps=4000):
        super().__init__()
        self.d_model = d_model
        self.d_model = tf.cast(self.d_model, tf.float32)
        self.warmup_steps = warmup_steps

    def __call__(self, step):
        step = tf.cast(step, dtype=tf.float32)
        arg1 = rsqrt(step)
        arg2 = step * (self.warmup_steps ** -1.5)
        return rsqrt(self.d_model) * tf.math.minimum(arg1, arg2)


def masked_loss(label, pred):
    mask = label != 0
    loss_object = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction='none')
    loss = loss_object(label, pred)
    mask = tf.cast(mask, dtype=loss.dtype)
    loss *= mask
    loss = tf.reduce_sum(loss) / tf.reduce_sum(mask)
    return loss


def masked_accuracy(label, pred):
    pred = tf.argmax(pred, axis=2)
    label = tf.cast(label, pred.dtype)
    match = label == pred
    mask = label != 0
    match = match & mask
    match = tf.cast(match, dtype=tf.float32)
    mask = tf.cast(mask, dtype=tf.float32)
    return tf.reduce_sum(match) / tf.reduce_sum(mask)


def _tokens(n, length, seed):
    """(n, length) int64 ids in 3..19 after a start token 1, an end token 2 and zero padding."""
    rng = np.random.RandomState(seed)
    out = np.zeros((n, length), "int64")
    for i in range(n):
        k = 2 + (i * 7 + seed) % (length - 3)
        out[i, :k + 2] = [1] + list(rng.randint(3, 20, size=k)) + [2]
    return out


def by_shape(model):
    """Every weight from a pattern of its shape alone (the weights' order differs between frameworks)."""
    model.set_weights([(np.sin(np.arange(w.size) * 0.37 + w.ndim) * 0.3).reshape(w.shape).astype(w.dtype)
                       if w.dtype.kind == "f" else w for w in model.get_weights()])   # not a lookup's table


def transformer(replicas, rate=0.1):
    out = {}
    pt, en = _tokens(16, 6, 1), _tokens(16, 7, 2)
    out["pos_encoding"] = list(positional_encoding(length=2048, depth=8).shape)
    embed = PositionalEmbedding(vocab_size=20, d_model=8)
    emb = embed(tf.constant(en[:3]))
    out["keras_mask"] = ints(emb._keras_mask)
    with scope(replicas):
        model = Transformer(num_layers=2, d_model=8, num_heads=2, dff=16, input_vocab_size=20,
                            target_vocab_size=20, dropout_rate=rate)
        output = model((tf.constant(pt[:4]), tf.constant(en[:4, :-1])))
        by_shape(model)
        learning_rate = CustomSchedule(8, warmup_steps=4)
        optimizer = tf.keras.optimizers.Adam(learning_rate, beta_1=0.9, beta_2=0.98, epsilon=1e-9)
        model.compile(loss=masked_loss, optimizer=optimizer, metrics=[masked_accuracy])
    out["output"] = list(output.shape)
    out["attn_scores"] = list(model.decoder.dec_layers[-1].last_attn_scores.shape)
    out["count_params"] = model.count_params()
    out["learning_rate"] = rnd(learning_rate(tf.range(1, 9, dtype=tf.float32)), 6)
    logits = model((tf.constant(pt[:4]), tf.constant(en[:4, :-1])), training=False)
    out["logits"] = rnd(logits[:2, :3, :4], 4)
    out["masked_loss"] = rnd(masked_loss(tf.constant(en[:4, 1:]), logits), 5)
    batches = tf.data.Dataset.from_tensor_slices(((pt, en[:, :-1]), en[:, 1:])).batch(4)
    val = tf.data.Dataset.from_tensor_slices(((pt[:8], en[:8, :-1]), en[:8, 1:])).batch(4)
    h = model.fit(batches, epochs=3, validation_data=val, verbose=0)
    out["fit"] = history(h)
    out["evaluate"] = rnd(model.evaluate(val, verbose=0), 5)
    out["iterations"] = int(optimizer.iterations.numpy())
    out["copies_agree"] = copies_agree(model.trainable_variables)
    return out


def transformer_no_dropout(replicas):
    return transformer(replicas, rate=0.0)


PROGRAMS = []
REPLICATED = [transformer, transformer_no_dropout]
