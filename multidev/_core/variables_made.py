"""How many ``md.Variable``s this thread (or replica) made: ``md.function`` compares it before and after
a call to refuse variables made on a call after its first trace, as ``tf.function`` does."""

from __future__ import annotations

import contextvars

VARIABLES_MADE: contextvars.ContextVar[int] = contextvars.ContextVar("md_variables_made", default=0)


def note_variable_made() -> None:
    """Count one more md.Variable made here."""
    VARIABLES_MADE.set(VARIABLES_MADE.get() + 1)


def variables_made() -> int:
    """The count now (a function: an md.function pickled for other processes refers to it by name)."""
    return VARIABLES_MADE.get()
