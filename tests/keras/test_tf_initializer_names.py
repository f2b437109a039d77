"""TF's own initializers (pix2pix's ``initializer = tf.random_normal_initializer(0., 0.02)``) are refused
naming the Keras initializer of the same arguments, not "use torch's equivalent"."""

import pytest

import multidev as md


@pytest.mark.parametrize("name, keras", [("random_normal_initializer", "RandomNormal(mean, stddev)"),
                                         ("random_uniform_initializer", "RandomUniform(minval, maxval)"),
                                         ("constant_initializer", "Constant(value)"),
                                         ("zeros_initializer", "Zeros()"), ("ones_initializer", "Ones()")])
def test_tf_initializer_names_the_keras_one(name, keras):
    with pytest.raises(AttributeError, match=rf"tf\.{name} is not part of multidev.*md\.keras\.initializers\."
                                             rf"{keras.replace('(', '[(]').replace(')', '[)]')}"):
        getattr(md, name)


def test_the_named_initializer_works_as_kernel_initializer():
    layer = md.keras.layers.Conv2D(4, 3, kernel_initializer=md.keras.initializers.RandomNormal(0., 0.02))
    layer.build((None, 8, 8, 3))
    assert layer.kernel.shape == (3, 3, 3, 4) and float(layer.kernel.detach().std()) < 0.05
