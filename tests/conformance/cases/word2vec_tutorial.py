"""tensorflow.org's tutorials/text/word2vec, typed as printed with ``tf.`` -> ``md.``: the skip-gram pairs of its
example sentence (``tf.keras.preprocessing.sequence.skipgrams``, ``make_sampling_table``) and the model part: the
subclassed ``Word2Vec`` model with two ``Embedding`` layers (``input_length`` as printed), ``tf.squeeze`` of a
rank-2 target and the ``einsum('be,bce->bc', ...)`` dot products, compiled with
``CategoricalCrossentropy(from_logits=True)`` and ``'accuracy'``, ``fit`` on ``((targets, contexts), labels)``
batches and the ``w2v_embedding`` weights read back; on one device and on a MirroredStrategy of two.

Substitutions: ``tf.einsum`` is torch's on multidev (md refuses md.einsum, naming torch.einsum); the training
examples are synthetic (the tutorial draws its negative samples with ``tf.random.log_uniform_candidate_sampler``,
which multidev leaves to torch); ``random.seed`` fixes the Python stream ``skipgrams`` shuffles with; the dataset is
not shuffled; the embeddings are set after building.
"""

import random

import numpy as np

from conformance_support import approx, fixed_weights, scope_of, torch_or_tf, two_cpus

NUM_NS = 4
N = 16
# No index twice in a batch (see case_word2vec_model_repeated_indices).
TARGETS = np.array([(i * 7) % 63 + 1 for i in range(N)], "int64")
CONTEXTS = np.array([[((i % 8) * 5 + k + 3 * (i // 8)) % 63 + 1 for k in range(NUM_NS + 1)] for i in range(N)], "int64")
LABELS = np.array([[1] + [0] * NUM_NS] * N, "int64")
REPEATED = (np.array([(i * 5) % 11 + 1 for i in range(N)], "int64"),
            np.array([[(i * 3 + k * 7) % 11 + 1 for k in range(NUM_NS + 1)] for i in range(N)], "int64"))


def case_skipgrams_of_the_example_sentence(tf):
    sentence = "The wide road shimmered in the hot sun"
    tokens = list(sentence.lower().split())
    vocab, index = {}, 1  # start indexing from 1
    vocab['<pad>'] = 0  # add a padding token
    for token in tokens:
        if token not in vocab:
            vocab[token] = index
            index += 1
    vocab_size = len(vocab)
    example_sequence = [vocab[word] for word in tokens]
    window_size = 2
    random.seed(7)
    positive_skip_grams, _ = tf.keras.preprocessing.sequence.skipgrams(
        example_sequence,
        vocabulary_size=vocab_size,
        window_size=window_size,
        negative_samples=0)
    random.seed(7)
    with_negatives = tf.keras.preprocessing.sequence.skipgrams(example_sequence, vocabulary_size=vocab_size,
                                                               window_size=1, negative_samples=1.0, categorical=True)
    sampling_table = tf.keras.preprocessing.sequence.make_sampling_table(size=10)
    random.seed(3)
    sampled = tf.keras.preprocessing.sequence.skipgrams(example_sequence, vocabulary_size=vocab_size, window_size=1,
                                                        sampling_table=sampling_table * 40, shuffle=False, seed=1)
    return {"positive": [[int(a), int(b)] for a, b in positive_skip_grams], "with_negatives": with_negatives,
            "sampling_table": approx(sampling_table.tolist(), 1e-9), "sampled": sampled}


def _word2vec(tf, strategy=None, epochs=3, data=(TARGETS, CONTEXTS)):
    layers = tf.keras.layers
    num_ns = NUM_NS
    einsum = torch_or_tf(tf, "einsum", "einsum")

    class Word2Vec(tf.keras.Model):
        def __init__(self, vocab_size, embedding_dim):
            super(Word2Vec, self).__init__()
            self.target_embedding = layers.Embedding(vocab_size,
                                                     embedding_dim,
                                                     input_length=1,
                                                     name="w2v_embedding")
            self.context_embedding = layers.Embedding(vocab_size,
                                                      embedding_dim,
                                                      input_length=num_ns+1)

        def call(self, pair):
            target, context = pair
            # target: (batch, dummy?)  # The dummy axis doesn't exist in TF2.7+
            # context: (batch, context)
            if len(target.shape) == 2:
                target = tf.squeeze(target, axis=1)
            # target: (batch,)
            word_emb = self.target_embedding(target)
            # word_emb: (batch, embed)
            context_emb = self.context_embedding(context)
            # context_emb: (batch, context, embed)
            dots = einsum('be,bce->bc', word_emb, context_emb)
            # dots: (batch, context)
            return dots

    targets, contexts = data
    dataset = tf.data.Dataset.from_tensor_slices(((targets, contexts), LABELS))
    dataset = dataset.batch(8, drop_remainder=True)
    embedding_dim = 4
    vocab_size = int(max(targets.max(), contexts.max())) + 1
    with scope_of(strategy):
        word2vec = Word2Vec(vocab_size, embedding_dim)
        rank2 = word2vec((tf.constant(targets[:2, None]), tf.constant(contexts[:2])))
        fixed_weights(word2vec, 0.5)
        word2vec.compile(optimizer='adam',
                         loss=tf.keras.losses.CategoricalCrossentropy(from_logits=True),
                         metrics=['accuracy'])
    history = word2vec.fit(dataset, epochs=epochs, verbose=0)
    weights = word2vec.get_layer('w2v_embedding').get_weights()[0]
    return {"rank2_target": list(rank2.shape), "history": {k: approx(v, 2e-5) for k, v in history.history.items()},
            "weights": approx(weights[1:4], 1e-5), "shape": list(weights.shape),
            "dots": approx(word2vec((targets[:3], contexts[:3])).numpy(), 1e-5)}


def case_word2vec_model(tf):
    return _word2vec(tf)


def case_word2vec_model_two_replicas(tf):
    return _word2vec(tf, two_cpus(tf))



def case_word2vec_model_repeated_indices(tf):
    """Batches where an index repeats (the tutorial's: 1024 examples of a 4096-word vocabulary): TF's Adam gets
    the Embedding gradient as IndexedSlices and squares each occurrence's slice before summing (the second
    moment of a repeated row is the sum of squares, not the square of the sum); md.keras's Adam gets torch's
    dense gradient."""
    out = _word2vec(tf, epochs=2, data=REPEATED)
    return {"history": out["history"], "dots": out["dots"]}
