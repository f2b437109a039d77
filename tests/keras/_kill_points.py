"""Simulated kills: run a save in a forked child that dies (``os._exit``) at its N-th file-system step."""

import os

import torch

POINTS = ("rename", "replace", "fsync", "mkdir", "remove", "unlink", "rmdir")


def killed_at(point_index, save, points=POINTS):
    """Run ``save()`` in a forked child that dies (os._exit) just before its ``point_index``-th file-system
    step (rename, replace, fsync, mkdir, remove...). Returns True if it was killed, False if the
    save finished before reaching that step."""
    pid = os.fork()
    if pid == 0:   # child
        try:
            torch.set_num_threads(1)
            count = [0]

            def wrap(real):
                def injected(*args, **kwargs):
                    count[0] += 1
                    if count[0] == point_index:
                        os._exit(99)
                    return real(*args, **kwargs)
                return injected

            for name in points:
                setattr(os, name, wrap(getattr(os, name)))
            save()
            os._exit(0)
        except BaseException:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    assert code in (0, 99), f"the child failed with exit code {code}"
    return code == 99
