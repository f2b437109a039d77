"""``md.keras.callbacks``: hooks into fit/evaluate/predict.

Example:
    model.fit(x, y, callbacks=[md.keras.callbacks.EarlyStopping(patience=2, restore_best_weights=True)])
"""

from multidev.keras._missing import missing_names
from multidev.keras.callbacks.backup import BackupAndRestore
from multidev.keras.callbacks.base import Callback, CallbackList
from multidev.keras.callbacks.checkpoint import ModelCheckpoint
from multidev.keras.callbacks.csv_logger import CSVLogger
from multidev.keras.callbacks.early_stopping import EarlyStopping
from multidev.keras.callbacks.history import History
from multidev.keras.callbacks.lambda_callback import LambdaCallback
from multidev.keras.callbacks.lr import LearningRateScheduler, ReduceLROnPlateau
from multidev.keras.callbacks.progbar import ProgbarLogger
from multidev.keras.callbacks.tensorboard import TensorBoard
from multidev.keras.callbacks.terminate_on_nan import TerminateOnNaN

__all__ = ["Callback", "CallbackList", "History", "ProgbarLogger", "ModelCheckpoint", "EarlyStopping",
           "LearningRateScheduler", "ReduceLROnPlateau", "CSVLogger", "TerminateOnNaN", "TensorBoard",
           "BackupAndRestore", "LambdaCallback"]

__getattr__ = missing_names(__name__, 'callbacks', globals())  # unknown names: does Keras 3 have them?
