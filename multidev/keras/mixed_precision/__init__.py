"""``md.keras.mixed_precision``: Keras's dtype policies and loss scaling.

Example:
    md.keras.mixed_precision.set_global_policy("mixed_float16")   # float16 compute, float32 weights
    model = ...; model.compile("adam", loss)                       # the optimizer is wrapped in a LossScaleOptimizer
    md.keras.mixed_precision.set_global_policy("mixed_bfloat16")  # bfloat16 compute, no loss scaling needed
"""

from multidev.keras._missing import missing_names
from multidev.keras.mixed_precision.loss_scale_optimizer import LossScaleOptimizer, wrap_for_policy
from multidev.keras.mixed_precision.policy import Policy, global_policy, resolve, set_global_policy

__all__ = ["Policy", "set_global_policy", "global_policy", "LossScaleOptimizer"]

__getattr__ = missing_names(__name__, 'mixed_precision', globals())  # unknown names: does Keras 3 have them?
