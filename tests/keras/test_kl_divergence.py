"""``md.keras.losses.KLDivergence`` / ``kl_divergence`` (keras.io's knowledge distillation uses it): the numbers of
Keras's own docstring example (tf.keras and Keras 3 print the same), the names ``get`` resolves, its config."""

import pytest
import torch

from multidev.keras import losses

Y_TRUE = [[0.0, 1.0], [0.0, 0.0]]
Y_PRED = [[0.6, 0.4], [0.4, 0.6]]


def test_keras_docstring_numbers():
    kl = losses.KLDivergence()
    assert float(kl(Y_TRUE, Y_PRED)) == pytest.approx(0.458, abs=5e-4)
    assert float(kl(Y_TRUE, Y_PRED, sample_weight=[0.8, 0.2])) == pytest.approx(0.366, abs=1e-3)
    assert float(losses.KLDivergence(reduction="sum")(Y_TRUE, Y_PRED)) == pytest.approx(0.916, abs=5e-4)
    per = losses.KLDivergence(reduction="none")(Y_TRUE, Y_PRED)
    torch.testing.assert_close(per, torch.tensor([0.916, -3.08e-06]), atol=5e-4, rtol=0)


def test_function_form_equals_torch_kl_div_on_clipped_probabilities():
    g = torch.Generator().manual_seed(0)
    p = torch.softmax(torch.randn(5, 4, generator=g), -1)
    q = torch.softmax(torch.randn(5, 4, generator=g), -1)
    want = torch.nn.functional.kl_div(q.log(), p, reduction="none").sum(-1)
    torch.testing.assert_close(losses.kl_divergence(p, q), want)
    for name in ("kl_divergence", "kld", "KLD"):
        assert losses.get(name) is losses.kl_divergence
    assert isinstance(losses.get("KLDivergence"), losses.KLDivergence)
    restored = losses.get(losses.serialize(losses.KLDivergence(reduction="sum")))
    assert isinstance(restored, losses.KLDivergence) and restored.reduction == "sum"
