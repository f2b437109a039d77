"""Teacher-student programs (see ssl_programs.py)."""
from __future__ import annotations
SSL_PROGRAMS2 = []
