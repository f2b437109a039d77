"""Adapters for other front ends (one module per front end). Importing them registers each with the
strategies (``multidev.distribute.front_end``); torch hooks are installed only while a strategy lives."""

from multidev.integrations import keras3, peft

keras3.register()
peft.register()   # peft's adapter switches inside strategy.run (nothing imported from peft)

__all__ = ["keras3", "peft"]
