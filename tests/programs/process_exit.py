"""How a program's process leaves once its results are written (imports only torch)."""
from __future__ import annotations

import os
import sys

import torch.distributed as dist


def leave_process_group() -> None:
    """End a process that owns a Gloo process group: wait for every rank, tear the group down, and leave
    without the interpreter's teardown. torch's Gloo threads can drop their last tensor reference while the
    interpreter is being torn down, which aborts the process ("terminate called without an active
    exception", exit code -6) after its work is done: seen once in CI, in a DDP rank of ``ddp_features.py``
    that had written right results. Only a test harness's exit is changed, never what the program ran."""
    dist.barrier()   # no rank tears its group down while another is still in a collective (Gloo aborts)
    dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
