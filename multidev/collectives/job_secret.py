"""The per-job secret in the environment (``MULTIDEV_JOB_SECRET``): made by the launcher, read by each task.

Torch-free, so that ``multidev launch`` can make one without importing torch. How the secret is used
at the rendezvous: ``process_auth``.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping

SECRET_ENV = "MULTIDEV_JOB_SECRET"
MIN_SECRET_LENGTH = 16


def new_secret() -> str:
    """A fresh random job secret (256 bits, hex), as ``multidev launch`` generates for each job.

    Example:
        >>> len(new_secret())
        64
    """
    return secrets.token_hex(32)


def job_secret(environ: Mapping[str, str] | None = None) -> bytes | None:
    """This process's job secret from ``MULTIDEV_JOB_SECRET`` (None when unset).

    Raises:
        ValueError: set but with fewer than 16 non-blank characters; the value itself is never shown.
    """
    raw = (os.environ if environ is None else environ).get(SECRET_ENV)
    if raw is None:
        return None
    if len(raw.strip()) < MIN_SECRET_LENGTH:
        raise ValueError(
            f"{SECRET_ENV} is set but has {len(raw.strip())} non-blank characters; a job secret needs at least "
            f"{MIN_SECRET_LENGTH}. Use a random one, e.g. {SECRET_ENV}=$(python -c 'import secrets; "
            "print(secrets.token_hex(32))'), the same on every task, or unset it."
        )
    return raw.strip().encode("utf-8")


__all__ = ["SECRET_ENV", "MIN_SECRET_LENGTH", "new_secret", "job_secret"]
