"""``md.keras.preprocessing.image``: tf.keras 2's home of ``load_img``/``img_to_array`` (older tutorials'
``tf.keras.preprocessing.image.load_img``); the same functions as ``md.keras.utils``'s."""

from multidev.keras.utils.image_dataset import img_to_array, load_img

__all__ = ["img_to_array", "load_img"]
