"""Run untrusted work: the OS boundary first, then resource limits.

Layers, outermost first (after Flatpak's bubblewrap and openedx/codejail):
``isolation`` puts the process under bubblewrap as uid 65534 in new user, PID, IPC,
UTS, cgroup and network namespaces, seeing only the host paths its caller names (read
only, or its own output directory writable) and a size-capped private /tmp, dying with
its parent; ``process`` gives it rlimits before it execs (CPU seconds, address space,
file size, processes, no core dumps), feeds its stdin, bounds what the parent reads of
its output, enforces the wall clock and reaps it. If the OS layer cannot be set up,
nothing runs (:class:`workers.errors.SandboxUnavailable`). Threat model:
docs/SECURITY.md.
"""
from __future__ import annotations

from sandbox.isolation import View, check_available, mode
from sandbox.process import Completed, Control, Limits, network_isolation_available, run

__all__ = ["Completed", "Control", "Limits", "View", "check_available", "mode",
           "network_isolation_available", "run"]
