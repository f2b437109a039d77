"""``md.saved_model``: export a model's inference functions and load them without the Python class.

``save(obj, export_dir, signatures=None)`` traces each signature with ``torch.export`` and writes the
program in torch.export's JSON form with its weights in safetensors — no pickle anywhere, and
nothing of ``obj``'s Python class is needed to load it. ``load(export_dir)`` returns an object whose
``signatures`` map names (``"serving_default"``) to functions returning ``{output_name: tensor}``,
and which is callable with the default signature's inputs.

Portable: the traced computation and weights of each signature, on any machine with a torch that
reads the same export format, under any strategy's scope or none. Not portable: Python logic that
depends on values (traced once), training behaviour (dropout, batch statistics: the export is in
inference mode), optimizer state (use ``md.train.Checkpoint`` or ``model.save``) and methods that
are not signatures. ``options`` (``SaveOptions``/``LoadOptions``, e.g. ``experimental_io_device=
'/job:localhost'``) are accepted and change nothing: files are read and written by the calling process.

Example:
    md.saved_model.save(model, "/tmp/export")
    loaded = md.saved_model.load("/tmp/export")
    loaded.signatures["serving_default"](x)   # {"dense_1": tensor(...)}
"""

from multidev.saved_model.export import DEFAULT_SERVING_SIGNATURE_DEF_KEY, save
from multidev.saved_model.loader import load
from multidev.saved_model.options import LoadOptions, SaveOptions

__all__ = ["save", "load", "DEFAULT_SERVING_SIGNATURE_DEF_KEY", "SaveOptions", "LoadOptions"]
