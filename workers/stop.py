"""Stop this process's sandboxed runs at once (a cancelled audit, issue 13).

``sandbox.run`` starts every run in a session of its own (``start_new_session``): the
child it spawns (bubblewrap, or the program itself in ``none`` mode) leads its own
process group, and killing that group ends the run (bubblewrap's PID namespace dies
with it), exactly as the sandbox does at its wall-clock limit. A Celery pool process
runs one task at a time (prefetch 1, one scope), so every such child of this process
belongs to the scope being cancelled. The sandbox's own loop then sees the exit and
reaps the child; nothing here waits or reaps. Other children (a plain
``subprocess.run`` that did not start a session) are left alone.
"""
from __future__ import annotations

import os
import signal


def _children(pid: int) -> list[tuple[int, int]]:
    """(pid, process group) of the live children of ``pid``, read from /proc."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                # after the command name, which may hold spaces: state ppid pgrp ...
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # exited meanwhile
        if fields[0] not in ("Z", "X") and int(fields[1]) == pid:
            out.append((int(entry), int(fields[2])))
    return out


def kill_own_runs(pid: int | None = None) -> list[int]:
    """SIGKILL the process group of each child of ``pid`` (default: this process) that
    leads its own group, i.e. each sandboxed run in progress. Returns the groups killed."""
    pid = os.getpid() if pid is None else pid
    killed = []
    for child, group in _children(pid):
        if child != group:
            continue
        try:
            os.killpg(group, signal.SIGKILL)
            killed.append(group)
        except (ProcessLookupError, PermissionError):
            pass  # ended (and reaped) since /proc was read
    return killed
