"""A Keras training script for jobs started by ``multidev launch --nnodes ...`` (torchrun's variables).

Configured by environment variables:
  JOB_DIR            backups (JOB_DIR/backup), markers and results go here (shared by all "hosts").
  JOB_TIMEOUT        collective timeout in seconds (default 30).
  JOB_DROPOUT=1      add a Dropout layer (tests that per-worker RNG states are restored).
  JOB_BACKUP_FREQ    BackupAndRestore save_freq (N batches); unset: no BackupAndRestore.
  JOB_KILL="R:B"     the worker of global rank R SIGKILLs itself after the B-th batch of its fit, once
                     per job: a marker file JOB_DIR/killed-R guards it, so the restarted worker trains on.
  JOB_PAUSE=B        after batch B every worker writes JOB_DIR/paused-<rank> and waits (bounded) for
                     JOB_DIR/go: the test injects a fault while the job is paused.
Each worker prints ``HOST <rank> <GLOO_SOCKET_IFNAME> <restart count>`` when it starts, ``RESULT {...}``
at the end, or ``FAILED <time.time()> <ErrorType>: <message>`` and exits 3 when fit raises.
"""

import os

PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_elastic_job_script.py")
FAILED_EXIT_CODE = 3
