"""Two non-persistent tapes that recorded the same ops each take their gradient once (the DCGAN tutorial's
``with tf.GradientTape() as gen_tape, tf.GradientTape() as disc_tape:``): torch frees a graph's saved tensors
after one backward pass, TensorFlow's tapes each keep their own record. The conformance case
dcgan_tutorial.train_no_dropout checks the tutorial's numbers against TensorFlow's."""

import pytest

import multidev as md


def _shared_graph():
    g, d = md.Variable(2.0), md.Variable(3.0)
    with md.GradientTape() as gen_tape, md.GradientTape() as disc_tape:
        fake = g * g            # the generator's output
        out = d * fake * fake   # the discriminator on it: the part both losses share
        gen_loss, disc_loss = -out, out + d * d
    return g, d, gen_tape, disc_tape, gen_loss, disc_loss


@pytest.mark.parametrize("first", ["gen", "disc"])
def test_side_by_side_tapes_each_give_their_gradient_in_either_order(first):
    g, d, gen_tape, disc_tape, gen_loss, disc_loss = _shared_graph()
    steps = [(gen_tape, gen_loss, g, -4 * 3.0 * 2.0 ** 3), (disc_tape, disc_loss, d, 2.0 ** 4 + 2 * 3.0)]
    for tape, loss, source, expected in (steps if first == "gen" else steps[::-1]):
        assert float(tape.gradient(loss, source)) == expected


def test_a_non_persistent_tape_still_refuses_a_second_gradient():
    g, _, gen_tape, _, gen_loss, _ = _shared_graph()
    gen_tape.gradient(gen_loss, g)
    with pytest.raises(RuntimeError, match="non-persistent"):
        gen_tape.gradient(gen_loss, g)


def test_a_tape_entered_inside_another_leaves_the_outer_its_graph():
    """The outer tape differentiates after the inner one took its gradient, both exited (TF: 6.75). (The inner
    tape's own value differs: md's gives 6.75, differentiating through ``y`` computed before it started; TF's
    gives 2.25.)"""
    x = md.Variable(1.5)
    with md.GradientTape() as outer:
        y = x * x
        with md.GradientTape() as inner:
            z = y * x
    inner.gradient(z, x)
    assert float(outer.gradient(z, x)) == pytest.approx(3 * 1.5 ** 2)


def test_a_tape_alone_frees_its_graph():
    """One tape: the graph is freed after its gradient (torch's error on a second backward through it)."""
    x = md.Variable(2.0)
    with md.GradientTape() as tape:
        y = (x * x).exp()
    tape.gradient(y, x)
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()
