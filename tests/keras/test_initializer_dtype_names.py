"""md.keras initializers called as TensorFlow and Keras 3 programs call them: ``dtype`` a name (``"float32"``), a
numpy dtype or a torch dtype. keras.io's VQ-VAE makes its codebook with ``tf.Variable(initial_value=w_init(shape=
(embedding_dim, num_embeddings), dtype="float32"), trainable=True)``, ``w_init = tf.random_uniform_initializer()``
(TypeError before: torch's ``empty`` refused the name)."""

import numpy as np
import pytest
import torch

import multidev as md

K = md.keras
NAMES = ["zeros", "ones", "constant", "random_uniform", "random_normal", "truncated_normal", "glorot_uniform",
         "glorot_normal", "he_normal", "he_uniform", "lecun_normal", "lecun_uniform", "orthogonal",
         "variance_scaling"]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype,want", [("float32", torch.float32), ("float64", torch.float64),
                                        (np.float64, torch.float64), (np.dtype("float16"), torch.float16),
                                        (torch.float64, torch.float64), (None, torch.float32)])
def test_dtype_names(name, dtype, want):
    out = K.initializers.get(name)(shape=(3, 4), dtype=dtype)
    assert out.dtype == want and tuple(out.shape) == (3, 4)


def test_vq_vae_codebook():
    w_init = K.initializers.RandomUniform()
    embeddings = md.Variable(initial_value=w_init(shape=(4, 16), dtype="float32"), trainable=True,
                             name="embeddings_vqvae")
    assert embeddings.dtype == torch.float32 and embeddings.trainable
    assert float(np.abs(embeddings.numpy()).max()) <= 0.05


def test_unknown_dtype_name_is_refused_with_the_names():
    with pytest.raises(ValueError, match=r"Unknown dtype 'float31'.*float32"):
        K.initializers.RandomUniform()(shape=(2,), dtype="float31")
    with pytest.raises(ValueError, match=r"Unknown dtype 'float31'.*float32"):
        K.initializers.Constant(2.0)(shape=(2,), dtype="float31")
