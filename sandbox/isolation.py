"""The OS boundary: every untrusted process runs under bubblewrap as an unprivileged user.

What a sandboxed process sees (:class:`View`): the system's ``/usr`` (and the ``/bin``,
``/lib`` links into it) and ``/etc/ld.so.cache``, read-only; exactly the host paths its
caller names, at the same paths, read-only (``ro``) or writable (``rw``: the run's own
fresh output directory); a private, size-capped ``/tmp`` (tmpfs); a minimal ``/dev`` and a
``/proc`` of its own PID namespace. Nothing else of the host exists for it: no ``/root``,
``/home``, project checkout, ``.env``, caches it could poison, database or broker.

It runs in new user, PID, IPC, UTS (host name ``sandbox``), cgroup and network
namespaces (no interface but a down loopback), in a new session, as host uid/gid 65534
(``nobody``), and dies with its parent (``--die-with-parent``); when its first process
exits the kernel kills everything else in the PID namespace, so a daemonised grandchild
cannot outlive the run.

Dropping to ``nobody`` before bubblewrap starts means bubblewrap can only bind paths that
``nobody`` may traverse, and the Python interpreter, the virtual environment and the
caches may well live under ``/root``. So, between fork and exec and still as root, the
child enters a private mount namespace and bind-mounts each named host path onto a
staging directory (:data:`STAGE_DIR`) that ``nobody`` can reach; bubblewrap binds from
there. The staging mounts exist only in that one process's namespace.

``PPL_AUDIT_SANDBOX=none`` (trusted local use only) runs programs with rlimits but
without this layer; it is logged as a warning on every run and recorded in the fit's
evidence. Any other value than ``bwrap`` (the default) or ``none`` is refused.
"""
from __future__ import annotations

import ctypes
import functools
import logging
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from workers.errors import SandboxUnavailable

log = logging.getLogger(__name__)

#: Host uid and gid of every sandboxed process (``nobody``/``nogroup`` on Debian).
SANDBOX_UID = 65534
SANDBOX_GID = 65534
#: Where the child (as root, in its own mount namespace) stages the paths it binds.
STAGE_DIR = Path("/run/ppl-audit-stage")
#: Always visible, read-only: the system's programs and libraries.
SYSTEM_RO = ("/usr", "/etc/ld.so.cache")
SYSTEM_LINKS = (("usr/bin", "/bin"), ("usr/sbin", "/sbin"), ("usr/lib", "/lib"),
                ("usr/lib64", "/lib64"))

_CLONE_NEWNS = 0x00020000
_MS_BIND, _MS_REC, _MS_PRIVATE = 4096, 16384, 1 << 18


@dataclass(frozen=True)
class View:
    """The host paths one sandboxed process may see, each at its own path.

    ``ro`` read-only; ``rw`` writable (the caller's fresh output directory, handed to
    the sandbox user); ``tmp_mb`` caps the private ``/tmp``; ``cwd`` is the working
    directory inside (``/tmp`` unless one of ``rw``).
    """

    ro: tuple[str, ...] = ()
    rw: tuple[str, ...] = ()
    tmp_mb: int = 256
    cwd: str = "/tmp"


def mode() -> str:
    """``bwrap`` (default) or ``none`` from ``PPL_AUDIT_SANDBOX``; anything else refused."""
    value = os.environ.get("PPL_AUDIT_SANDBOX", "bwrap").strip().lower() or "bwrap"
    if value not in ("bwrap", "none"):
        raise SandboxUnavailable(f"PPL_AUDIT_SANDBOX={value!r} is not a sandbox mode "
                                 "(use bwrap, or none for trusted local use)")
    return value


def bwrap_path() -> str | None:
    """The bubblewrap executable (``PPL_AUDIT_BWRAP`` overrides the PATH lookup)."""
    configured = os.environ.get("PPL_AUDIT_BWRAP")
    if configured:
        return configured if os.access(configured, os.X_OK) else None
    return shutil.which("bwrap")


def drops_privileges() -> bool:
    """True when the parent is root: the child then becomes uid 65534 before bwrap."""
    return os.geteuid() == 0


def check_available() -> None:
    """Raise SandboxUnavailable unless a real sandbox can be made here (or mode is none).

    The probe runs ``/bin/true`` under the full set of namespaces once per process and
    bwrap path; a failure is not cached, so a fixed machine is noticed.
    """
    if mode() == "none":
        return
    path = bwrap_path()
    if path is None:
        raise SandboxUnavailable(
            "bubblewrap (bwrap) is not installed: refusing to run untrusted programs "
            "without the OS sandbox (install the Debian package bubblewrap, or set "
            "PPL_AUDIT_SANDBOX=none for trusted local use only)")
    _probe(path)


@functools.lru_cache(maxsize=4)
def _probe(path: str) -> bool:
    argv = [path, *_namespace_flags(), *_system_flags(), "--size", str(1 << 20),
            "--tmpfs", "/tmp", "--", "/bin/true"]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=30, env={},
                              preexec_fn=functools.partial(enter, View()))
    except (OSError, subprocess.SubprocessError) as err:
        raise SandboxUnavailable(f"the OS sandbox cannot start: {err}") from None
    if done.returncode != 0:
        detail = done.stderr.decode("utf-8", "replace").strip()[-300:]
        raise SandboxUnavailable(f"the OS sandbox cannot start (bwrap exit "
                                 f"{done.returncode}): {detail}")
    return True


def _namespace_flags() -> list[str]:
    return ["--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
            "--unshare-net", "--unshare-cgroup-try", "--hostname", "sandbox",
            "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_GID),
            "--die-with-parent", "--new-session", "--clearenv",
            # the program is PID 1 of its namespace and bwrap's direct child: its CPU
            # time reaches the parent's wait4 (with bwrap's own init in between it was
            # lost), and when it exits the kernel kills every other process in the
            # namespace. As PID 1 it ignores SIGXCPU (the kernel does not force it on a
            # namespace init); RLIMIT_CPU's hard limit still kills it with SIGKILL.
            "--as-pid-1"]


def _system_flags() -> list[str]:
    flags: list[str] = []
    for path in SYSTEM_RO:
        if os.path.exists(path):
            flags += ["--ro-bind", path, path]
    for target, link in SYSTEM_LINKS:
        if os.path.islink(link) or os.path.isdir("/" + target):
            flags += ["--symlink", target, link]
    # /dev/shm (POSIX shared memory) gets a small tmpfs of its own
    return flags + ["--dev", "/dev", "--size", str(16 << 20), "--tmpfs", "/dev/shm",
                    "--proc", "/proc"]


def _staged(index: int) -> str:
    return str(STAGE_DIR / str(index)) if drops_privileges() else ""


#: Written to stderr from inside the sandbox, before the program starts, once bubblewrap
#: has built the whole view (see :func:`wrap`). bubblewrap's own exit status and message
#: when it cannot build the view look like a program's failure, and its
#: ``--json-status-fd`` reports the child's PID right after clone, before any mount, so
#: neither tells the parent that setup succeeded.
READY_MARKER = b"\0ppl-audit: sandbox ready\n"
_READY_SHELL = r"printf '\000ppl-audit: sandbox ready\n' >&2 || exit 125; exec " + '"$0" "$@"'


def wrap(argv: list[str], view: View, env: dict[str, str]) -> list[str]:
    """The bubblewrap command line that runs ``argv`` inside ``view`` with exactly ``env``.

    Bind sources are the staged copies made by :func:`enter` when the parent is root.
    Inside, ``/bin/sh`` first writes :data:`READY_MARKER` to stderr, then executes
    ``argv`` in its place (so the program is still PID 1 of its namespace); the caller
    strips the marker and, when it is missing, knows the program never ran.
    """
    path = bwrap_path()
    if path is None:
        check_available()  # raises with the explanation
    flags = [*_namespace_flags(), *_system_flags(),
             "--size", str(view.tmp_mb * 1024 * 1024), "--tmpfs", "/tmp"]
    for i, host in enumerate((*view.ro, *view.rw)):
        source = _staged(i) or host
        flags += ["--ro-bind" if i < len(view.ro) else "--bind", source, host]
    for name, value in env.items():
        flags += ["--setenv", name, value]
    # bwrap's root is a tmpfs the sandbox user could fill without limit: read-only
    flags += ["--remount-ro", "/", "--chdir", view.cwd]
    return [str(path), *flags, "--", "/bin/sh", "-c", _READY_SHELL, *argv]


def prepare_writable(view: View) -> None:
    """Hand the view's writable directories, with everything in them, to the sandbox
    user (parent side). Symbolic links are changed themselves, never followed."""
    if not drops_privileges():
        return
    for path in view.rw:
        for root, dirs, files in os.walk(path):
            os.chown(root, SANDBOX_UID, SANDBOX_GID, follow_symlinks=False)
            for name in (*dirs, *files):
                os.chown(os.path.join(root, name), SANDBOX_UID, SANDBOX_GID,
                         follow_symlinks=False)


def enter(view: View) -> None:
    """Between fork and exec (as the parent's user): stage the view, drop to nobody.

    Runs in the child only. Root: private mount namespace, a tmpfs on STAGE_DIR, each
    view path bind-mounted to ``STAGE_DIR/<i>``, then uid/gid 65534 with no
    supplementary groups. Not root: nothing to do (bwrap binds the user's own paths).
    """
    if not drops_privileges():
        return
    libc = ctypes.CDLL(None, use_errno=True)

    def check(result: int, what: str) -> None:
        if result != 0:
            raise OSError(ctypes.get_errno(), f"sandbox staging: {what}")

    check(libc.unshare(_CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    check(libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "make / private")
    os.makedirs(STAGE_DIR, mode=0o755, exist_ok=True)
    check(libc.mount(b"tmpfs", bytes(STAGE_DIR), b"tmpfs", 0, b"size=64k,mode=0755"),
          "tmpfs on the staging directory")
    for i, host in enumerate((*view.ro, *view.rw)):
        target = STAGE_DIR / str(i)
        if os.path.isdir(host):
            os.mkdir(target, 0o755)
        else:
            target.touch(0o644)
        check(libc.mount(host.encode(), bytes(target), None, _MS_BIND | _MS_REC, None),
              f"bind {host}")
    os.setgroups([])
    os.setgid(SANDBOX_GID)
    os.setuid(SANDBOX_UID)
