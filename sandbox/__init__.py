"""Run untrusted work in a resource-limited subprocess.

Layers, innermost first (after openedx/codejail): the child is given rlimits before it
execs (CPU seconds, address space, file size, no core dumps), a new session so that the
whole process group can be killed, only the environment the caller passes, a working
directory the caller owns, and a fresh network namespace with no interfaces where the
kernel lets us create one. The parent enforces the wall-clock limit. Failures of the
limits are raised as :class:`workers.errors.ResourceLimit`; any other exit is returned
to the caller, who knows what its program prints.
"""
from __future__ import annotations

from sandbox.process import Completed, Limits, network_isolation_available, run

__all__ = ["Completed", "Limits", "network_isolation_available", "run"]
