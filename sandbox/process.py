"""The subprocess layer of the sandbox: rlimits, process group, env, netns, wall clock."""
from __future__ import annotations

import ctypes
import functools
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from workers.errors import ResourceLimit

_CLONE_NEWNET = 0x40000000
_PR_SET_PDEATHSIG = 1
_MB = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandboxed process (and its children).

    cpu_seconds: CPU time (user + system) before SIGXCPU; wall_seconds: elapsed time
    before the whole process group is killed; memory_mb: address-space cap (RLIMIT_AS)
    unless the caller disables it for runtimes that reserve large virtual ranges.
    """

    cpu_seconds: float = 600.0
    memory_mb: int = 4096
    wall_seconds: float = 900.0
    file_size_mb: int = 1024


@dataclass(frozen=True)
class Completed:
    """What a sandboxed process left behind.

    ``max_rss_mb`` is an upper bound of the child's peak resident set: Linux carries the
    forking parent's footprint over the exec, so a small program run from a large
    worker reads as the worker's size. Benchmarks measure with GNU time instead.
    """

    returncode: int
    stdout: bytes
    stderr: bytes
    wall_seconds: float
    cpu_seconds: float
    max_rss_mb: float


def _unshare_network() -> bool:
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.unshare(_CLONE_NEWNET) == 0


@functools.lru_cache(maxsize=1)
def network_isolation_available() -> bool:
    """True when this kernel lets us give a child a network namespace of its own."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        os._exit(0 if _unshare_network() else 1)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


def _limit_child(limits: Limits, address_space_limit: bool, isolate_network: bool) -> None:
    """Runs in the child between fork and exec (no Python objects shared after this)."""
    # a worker killed mid-fit (SIGKILL, OOM) must not leave its fit running unowned
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    cpu = max(1, int(limits.cpu_seconds))
    # soft limit sends SIGXCPU; the hard limit (a little later) SIGKILLs a child that ignores it
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    fsize = limits.file_size_mb * _MB
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    if address_space_limit:
        mem = limits.memory_mb * _MB
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    if isolate_network:
        _unshare_network()  # best effort: without CAP_SYS_ADMIN the child keeps the host's


def run(
    argv: list[str],
    *,
    limits: Limits,
    cwd: Path,
    stdin: bytes = b"",
    env: dict[str, str] | None = None,
    address_space_limit: bool = True,
    isolate_network: bool = True,
) -> Completed:
    """Run ``argv`` under ``limits`` in ``cwd`` with exactly ``env`` (empty if None).

    Raises ResourceLimit(limit="timeout") when the wall clock runs out (the process
    group is killed) and ResourceLimit(limit="cpu") when the CPU limit killed it. Any
    other exit status, including failures caused by the memory cap, is returned.
    """
    isolate = isolate_network and network_isolation_available()
    started = time.monotonic()
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=str(cwd),
        env=dict(env or {}),
        start_new_session=True,
        close_fds=True,
        preexec_fn=functools.partial(_limit_child, limits, address_space_limit, isolate),
    )
    out: dict[str, bytes] = {}

    def pump(name: str, stream) -> None:
        out[name] = stream.read()
        stream.close()

    readers = [
        threading.Thread(target=pump, args=("stdout", proc.stdout), daemon=True),
        threading.Thread(target=pump, args=("stderr", proc.stderr), daemon=True),
    ]
    for t in readers:
        t.start()

    timed_out = threading.Event()

    def kill_group() -> None:
        timed_out.set()
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    timer = threading.Timer(limits.wall_seconds, kill_group)
    timer.start()
    try:
        try:
            proc.stdin.write(stdin)
        except BrokenPipeError:
            pass  # the child exited without reading its input; its status says why
        finally:
            proc.stdin.close()
        # wait4 gives this child's own CPU time and peak RSS (getrusage(CHILDREN) is
        # shared by every thread of a worker and would mix concurrent runs).
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        timer.cancel()
        # children the program left behind in its group do not outlive it
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    proc.returncode = os.waitstatus_to_exitcode(status)
    for t in readers:
        t.join()
    wall = time.monotonic() - started
    cpu = usage.ru_utime + usage.ru_stime

    if timed_out.is_set():
        raise ResourceLimit(
            f"stopped after the wall-clock limit of {limits.wall_seconds:g} s",
            limit="timeout",
            seconds=round(wall, 3),
        )
    # SIGXCPU comes only from RLIMIT_CPU; a SIGKILL counts when the CPU time shows the
    # hard limit was reached (rusage under-counts by up to a tick per thread, hence slack)
    if proc.returncode == -signal.SIGXCPU or (
            proc.returncode == -signal.SIGKILL and cpu >= 0.9 * int(limits.cpu_seconds)):
        raise ResourceLimit(
            f"stopped after the CPU-time limit of {limits.cpu_seconds:g} s",
            limit="cpu",
            seconds=round(cpu, 3),
        )
    return Completed(
        returncode=proc.returncode,
        stdout=out.get("stdout", b""),
        stderr=out.get("stderr", b""),
        wall_seconds=wall,
        cpu_seconds=cpu,
        max_rss_mb=usage.ru_maxrss / 1024.0,
    )


def python_argv(module: str) -> list[str]:
    """argv that runs ``python -m module`` with this interpreter, isolated from site tweaks."""
    return [sys.executable, "-m", module]
