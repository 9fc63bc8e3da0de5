"""The process layer of the sandbox: rlimits, wall clock, bounded output, reaping.

One event loop in the calling thread (no reader threads): it feeds stdin, reads stdout
up to a cap and keeps only a tail of stderr, watches the child's pidfd and the wall
clock. Beyond the stdout cap, at the wall-clock limit, or when the parent's caller
stops, the whole run is killed (bubblewrap's PID namespace, or the process group in
``none`` mode) and reaped. Nothing the child does can make the parent hold more than
``max_stdout_bytes + stderr_tail_bytes`` of its output or wait past the wall limit by
more than a couple of seconds.
"""
from __future__ import annotations

import ctypes
import errno
import functools
import logging
import os
import resource
import select
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from sandbox import isolation
from sandbox.isolation import View
from workers.errors import ResourceLimit, SandboxUnavailable

log = logging.getLogger(__name__)

_CLONE_NEWNET = 0x40000000
_PR_SET_PDEATHSIG = 1
_MB = 1024 * 1024
#: After the child exits, how long its pipes may stay open (held by an escaped
#: descendant in ``none`` mode) before the parent stops reading them, seconds.
_DRAIN_SECONDS = 2.0
_CHUNK = 65536
#: Processes (threads count) of the sandbox user, per run: stops fork bombs.
_MAX_PROCESSES = 4096


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandboxed process (and its children).

    cpu_seconds: CPU time (user + system) before SIGXCPU; wall_seconds: elapsed time
    before the whole run is killed; memory_mb: address-space cap (RLIMIT_AS) unless the
    caller disables it for runtimes that reserve large virtual ranges; file_size_mb:
    largest file the process may write.
    """

    cpu_seconds: float = 600.0
    memory_mb: int = 4096
    wall_seconds: float = 900.0
    file_size_mb: int = 1024


@dataclass(frozen=True)
class Completed:
    """What a sandboxed process left behind.

    ``stderr`` is the last ``stderr_tail_bytes`` only. ``max_rss_mb`` is an upper bound
    of the child's peak resident set (Linux carries the forking parent's footprint over
    the exec). ``sandbox`` is ``bwrap`` or ``none`` (recorded in the evidence).
    """

    returncode: int
    stdout: bytes
    stderr: bytes
    wall_seconds: float
    cpu_seconds: float
    max_rss_mb: float
    sandbox: str = "bwrap"
    stdin_unread: bool = False


class Control:
    """Lets another thread end a run early (a persistent child whose caller gave up on
    it). :meth:`kill` is a no-op before the run starts and after it has been reaped, so a
    recycled process ID is never signalled."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid: int | None = None
        self.killed = False

    def _started(self, pid: int) -> None:
        with self._lock:
            self._pid = pid
            if self.killed:
                _kill_group(pid)

    def _reaped(self) -> None:
        with self._lock:
            self._pid = None

    def kill(self) -> None:
        with self._lock:
            self.killed = True
            if self._pid is not None:
                _kill_group(self._pid)


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


def _limit_child(limits: Limits, address_space_limit: bool, view: View | None,
                 isolate_network: bool) -> None:
    """Runs in the child between fork and exec (no Python objects shared after this)."""
    cpu = max(1, int(limits.cpu_seconds))
    # soft limit sends SIGXCPU; the hard limit (a little later) SIGKILLs a child that ignores it
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    fsize = limits.file_size_mb * _MB
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    if address_space_limit:
        mem = limits.memory_mb * _MB
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    if view is not None:
        isolation.enter(view)  # private mounts, then uid/gid 65534
        if isolation.drops_privileges():
            resource.setrlimit(resource.RLIMIT_NPROC, (_MAX_PROCESSES, _MAX_PROCESSES))
    elif isolate_network:
        _unshare_network()  # best effort: without CAP_SYS_ADMIN the child keeps the host's
    # after any uid change (which clears it): a worker killed mid-fit (SIGKILL, OOM)
    # must not leave its fit running unowned
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def run(
    argv: list[str],
    *,
    limits: Limits,
    view: View,
    stdin: bytes = b"",
    env: dict[str, str] | None = None,
    max_stdout_bytes: int = 16 * _MB,
    stderr_tail_bytes: int = 256 * 1024,
    address_space_limit: bool = True,
    isolate_network: bool = True,
    control: Control | None = None,
) -> Completed:
    """Run ``argv`` in the sandbox: inside ``view``, under ``limits``, with exactly ``env``.

    Raises SandboxUnavailable when the OS sandbox cannot be set up (nothing runs);
    ResourceLimit with ``limit`` = ``timeout`` (wall clock), ``cpu`` (RLIMIT_CPU) or
    ``output`` (stdout beyond ``max_stdout_bytes``), the run killed and reaped in each
    case. Any other exit status is returned. ``isolate_network`` matters only in
    ``none`` mode (bubblewrap always isolates the network). ``control`` lets another
    thread kill the run (it then ends like any killed process: exit -SIGKILL returned).
    """
    sandbox_mode = isolation.mode()
    env = dict(env or {})
    if sandbox_mode == "bwrap":
        isolation.check_available()
        isolation.prepare_writable(view)
        command = isolation.wrap(argv, view, env)
        popen_env: dict[str, str] = {}
        cwd = "/"
        preexec = functools.partial(_limit_child, limits, address_space_limit, view, False)
    else:
        log.warning("PPL_AUDIT_SANDBOX=none: running %s WITHOUT the OS sandbox "
                    "(rlimits only; trusted local use)", Path(argv[0]).name)
        command, popen_env, cwd = list(argv), env, view.cwd
        preexec = functools.partial(_limit_child, limits, address_space_limit, None,
                                    isolate_network and network_isolation_available())
    started = time.monotonic()
    try:
        proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, cwd=cwd, env=popen_env,
                                start_new_session=True, close_fds=True, preexec_fn=preexec)
    except subprocess.SubprocessError as err:  # the preexec staging failed
        raise SandboxUnavailable(f"the OS sandbox cannot start: {err}") from None
    if control is not None:
        control._started(proc.pid)
    pump = _Pump(proc, stdin, max_stdout_bytes, stderr_tail_bytes,
                 isolation.READY_MARKER if sandbox_mode == "bwrap" else None)
    try:
        stop = pump.run(deadline=started + limits.wall_seconds)
    finally:
        _kill_run(proc)
        _, status, usage = os.wait4(proc.pid, 0)
        if control is not None:
            control._reaped()
        pump.close()
    wall = time.monotonic() - started
    cpu = usage.ru_utime + usage.ru_stime
    returncode = os.waitstatus_to_exitcode(status)
    proc.returncode = returncode  # reaped here; Popen must not wait again
    if sandbox_mode == "bwrap" and 128 < returncode < 128 + 65:
        returncode = -(returncode - 128)  # bwrap reports a signalled child as 128 + signal
    if not pump.ready and stop == "exit" and returncode != 0 \
            and not (control is not None and control.killed):
        detail = bytes(pump.stderr[-300:]).decode("utf-8", "replace").strip()
        raise SandboxUnavailable(f"the OS sandbox could not be set up (bwrap exit "
                                 f"{returncode}), so the program did not run: {detail}")
    if stop == "timeout":
        raise ResourceLimit(f"stopped after the wall-clock limit of {limits.wall_seconds:g} s",
                            limit="timeout", seconds=round(wall, 3))
    if stop == "output":
        raise ResourceLimit(f"the program wrote more than {max_stdout_bytes:,} bytes of output "
                            "(the most its result can need); stopped",
                            limit="output", bytes=max_stdout_bytes)
    # SIGXCPU comes only from RLIMIT_CPU; a SIGKILL counts when the CPU time shows the
    # hard limit was reached (rusage under-counts by up to a tick per thread, hence slack)
    if returncode == -signal.SIGXCPU or (
            returncode == -signal.SIGKILL and cpu >= 0.9 * int(limits.cpu_seconds)):
        raise ResourceLimit(f"stopped after the CPU-time limit of {limits.cpu_seconds:g} s",
                            limit="cpu", seconds=round(cpu, 3))
    return Completed(returncode=returncode, stdout=bytes(pump.stdout),
                     stderr=bytes(pump.stderr[-stderr_tail_bytes:]), wall_seconds=wall,
                     cpu_seconds=cpu, max_rss_mb=usage.ru_maxrss / 1024.0,
                     sandbox=sandbox_mode, stdin_unread=pump.stdin_unread)


def _kill_run(proc: subprocess.Popen) -> None:
    """Kill the run: bwrap's group (its PID namespace dies with it) or the program's."""
    _kill_group(proc.pid)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class _Pump:
    """Moves bytes between the parent and one child until it exits or must be stopped."""

    def __init__(self, proc: subprocess.Popen, stdin: bytes, max_stdout: int,
                 stderr_tail: int, ready_marker: bytes | None = None) -> None:
        self.proc, self.max_stdout, self.stderr_tail = proc, max_stdout, stderr_tail
        self.stdout, self.stderr = bytearray(), bytearray()
        # bwrap mode: None until stderr has shown whether it starts with the marker
        # (True: stripped, the sandbox was built; False: bubblewrap's own words)
        self.ready_marker = ready_marker
        self.ready: bool | None = None if ready_marker else True
        self.pending = memoryview(stdin)
        self.stdin_unread = False
        self.pidfd = os.pidfd_open(proc.pid)
        self.poll = select.poll()
        self.files = {proc.stdout.fileno(): "stdout", proc.stderr.fileno(): "stderr",
                      proc.stdin.fileno(): "stdin", self.pidfd: "exit"}
        for fd, name in self.files.items():
            os.set_blocking(fd, False) if name != "exit" else None
            self.poll.register(fd, select.POLLOUT if name == "stdin" else select.POLLIN)
        if not stdin:
            self._close_stdin()

    def run(self, deadline: float) -> str:
        """Pump until the child exits and its pipes close; returns ``exit``, ``timeout``
        or ``output``."""
        exited_at = None
        while True:
            now = time.monotonic()
            if exited_at is None and now >= deadline:
                return "timeout"
            open_pipes = [n for n in self.files.values() if n in ("stdout", "stderr")]
            if exited_at is not None and (not open_pipes or now - exited_at > _DRAIN_SECONDS):
                return "exit"
            limit = deadline if exited_at is None else exited_at + _DRAIN_SECONDS
            for fd, event in self.poll.poll(max(0.0, limit - now) * 1000 + 1):
                name = self.files.get(fd)
                if name == "exit":
                    exited_at = time.monotonic()
                    self._forget(fd)
                elif name == "stdin":
                    self._feed(fd, event)
                elif name is not None and self._read(fd, name) == "output":
                    return "output"

    def _read(self, fd: int, name: str) -> str | None:
        try:
            chunk = os.read(fd, _CHUNK)
        except BlockingIOError:
            return None
        if not chunk:
            self._forget(fd)
            return None
        if name == "stdout":
            self.stdout += chunk
            if len(self.stdout) > self.max_stdout:
                return "output"
        else:
            self.stderr += chunk
            if self.ready is None:
                self._look_for_marker()
            if len(self.stderr) > 2 * self.stderr_tail:
                del self.stderr[:-self.stderr_tail]
        return None

    def _look_for_marker(self) -> None:
        marker = self.ready_marker
        if self.stderr.startswith(marker):
            self.ready = True
            del self.stderr[:len(marker)]
        elif not marker.startswith(bytes(self.stderr[:len(marker)])):
            self.ready = False

    def _feed(self, fd: int, event: int) -> None:
        if event & (select.POLLERR | select.POLLHUP):
            self.stdin_unread = True  # the child closed its input before reading it all
            self._close_stdin()
            return
        try:
            written = os.write(fd, self.pending[:_CHUNK])
        except BlockingIOError:
            return
        except BrokenPipeError:
            self.stdin_unread = True
            self._close_stdin()
            return
        self.pending = self.pending[written:]
        if not self.pending:
            self._close_stdin()

    def _close_stdin(self) -> None:
        fd = self.proc.stdin.fileno()
        if fd in self.files:
            self._forget(fd)
        self.proc.stdin.close()

    def _forget(self, fd: int) -> None:
        self.poll.unregister(fd)
        del self.files[fd]

    def close(self) -> None:
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                stream.close()
            except OSError as err:  # pragma: no cover - already closed
                if err.errno != errno.EBADF:
                    raise
        os.close(self.pidfd)

