"""The sandbox on real processes, through ``sandbox.run``: the OS boundary (bubblewrap)
and the limits each stop what they claim to, and the parent survives every attempt."""
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

import sandbox
from sandbox import Limits, View, run
from workers.errors import ResourceLimit, SandboxUnavailable

pytestmark = pytest.mark.integration

PROJECT = Path(__file__).resolve().parents[2]
PREFIXES = tuple(sorted({os.path.realpath(p) for p in (sys.base_prefix, sys.prefix)}))
PYTHON = str(Path(os.path.realpath(sys.prefix)) / "bin" / Path(sys.executable).name)


def _view(tmp_path: Path | None = None, **kw) -> View:
    if tmp_path is None:
        return View(ro=PREFIXES, **kw)
    return View(ro=PREFIXES, rw=(str(tmp_path),), cwd=str(tmp_path), **kw)


def _py(code: str, tmp_path=None, *, stdin=b"", env=None, view=None, **limits):
    return run([PYTHON, "-c", code], limits=Limits(**limits), view=view or _view(tmp_path),
               stdin=stdin, env=env or {})


def _alive(pid: int) -> bool:  # a zombie is dead (this machine's init may not reap it)
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


# --- the limits -------------------------------------------------------------------------

def test_output_and_stdin_round_trip():
    done = _py("import sys; print(sys.stdin.read().upper())", stdin=b"draws")
    assert done.returncode == 0 and done.stdout == b"DRAWS\n"
    assert done.cpu_seconds > 0 and done.sandbox == sandbox.mode() == "bwrap"


def test_busy_loop_stops_at_cpu_limit():
    with pytest.raises(ResourceLimit) as err:
        _py("while True: pass", cpu_seconds=1, wall_seconds=30)
    assert err.value.details["limit"] == "cpu"


def test_sleeping_child_stops_at_wall_clock():
    started = time.monotonic()
    with pytest.raises(ResourceLimit) as err:
        _py("import time; time.sleep(60)", wall_seconds=2)
    assert err.value.details["limit"] == "timeout" and time.monotonic() - started < 10


def test_huge_allocation_fails_inside_the_child():
    done = _py("x = bytearray(30 * 1024**3)", memory_mb=1024)
    assert done.returncode != 0 and b"MemoryError" in done.stderr


def test_environment_is_only_what_the_caller_passes():
    os.environ["PPL_AUDIT_TEST_SECRET"] = "s3cret"
    try:
        done = _py("import os; print(sorted(os.environ.items()))", env={"ONLY": "1"})
    finally:
        del os.environ["PPL_AUDIT_TEST_SECRET"]
    assert b"'ONLY'" in done.stdout and b"s3cret" not in done.stdout
    assert b"HOME" not in done.stdout and b"DATABASE" not in done.stdout


def test_output_beyond_the_cap_stops_the_run_and_the_parent_stays_small():
    code = "import sys\nwhile True: sys.stdout.write('x' * 65536)"
    with pytest.raises(ResourceLimit) as err:
        run([PYTHON, "-c", code], limits=Limits(wall_seconds=30), view=_view(),
            max_stdout_bytes=1 << 20)
    assert err.value.details["limit"] == "output"


def test_stderr_keeps_only_a_tail():
    done = run([PYTHON, "-c", "import sys\nfor i in range(2000): sys.stderr.write(f'{i:08d}' * 128)"],
               limits=Limits(), view=_view(), stderr_tail_bytes=4096)
    assert len(done.stderr) == 4096 and done.stderr.endswith(b"00001999")


def test_a_child_that_ignores_its_input_is_a_plain_exit_not_a_broken_pipe():
    done = _py("import sys; sys.exit(7)", stdin=b"x" * (8 << 20))
    assert done.returncode == 7 and done.stdin_unread


# --- the OS boundary --------------------------------------------------------------------

def test_runs_as_an_unprivileged_user_inside_and_on_the_host(tmp_path):
    code = ("import os, time\nprint(os.getuid(), os.getgid(), os.getgroups())\n"
            "import sys; sys.stdout.flush(); time.sleep(3)")
    proc = subprocess.Popen([sys.executable, "-c", (
        "import sys, pathlib\nfrom sandbox import Limits, View, run\n"
        f"d = run([{PYTHON!r}, '-c', {code!r}], limits=Limits(), view=View(ro={PREFIXES!r}))\n"
        "print(d.stdout.decode())")], stdout=subprocess.PIPE, cwd=PROJECT)
    time.sleep(1.5)
    host_uids = subprocess.run(["ps", "-ww", "-o", "uid=,args=", "-u", "65534"], capture_output=True,
                               text=True).stdout
    out, _ = proc.communicate(timeout=30)
    assert out.split()[:2] == [b"65534", b"65534"]
    assert "time.sleep(3)" in host_uids  # on the host, the program is nobody, not root


def test_sees_no_project_checkout_no_root_no_host_name(tmp_path):
    code = ("import os, socket\n"
            f"print(os.path.exists({str(PROJECT / 'pyproject.toml')!r}), os.path.exists('/root/.bashrc'),"
            " os.path.exists('/etc/passwd'), os.path.exists('/home'), socket.gethostname())")
    done = _py(code)
    assert done.stdout.split() == [b"False", b"False", b"False", b"False", b"sandbox"]
    assert socket.gethostname().encode() not in done.stdout


def test_cannot_write_outside_its_tmp_and_its_output_directory(tmp_path):
    marker = f"ppl-audit-marker-{uuid.uuid4().hex}"
    code = (f"import os\nok = []\n"
            f"for d in ['/tmp', {str(tmp_path)!r}, '/usr', {os.path.realpath(sys.prefix)!r}, '/', '/var/tmp', '/dev/shm']:\n"
            f"    try:\n        open(os.path.join(d, {marker!r}), 'w').write('x'); ok.append(d)\n"
            f"    except OSError: pass\nprint(ok)")
    done = _py(code, tmp_path)
    assert done.stdout.strip() in (f"['/tmp', '{tmp_path}']".encode(),
                                   f"['/tmp', '{tmp_path}', '/dev/shm']".encode())
    for d in ("/tmp", "/usr", os.path.realpath(sys.prefix), "/", "/var/tmp"):
        assert not os.path.exists(os.path.join(d, marker))  # the private /tmp is not the host's
    assert (tmp_path / marker).exists()


def test_cannot_open_a_socket_to_the_host():
    done = _py("import socket; socket.create_connection(('127.0.0.1', 6379), timeout=2)")
    assert done.returncode != 0 and (b"unreachable" in done.stderr or b"refused" in done.stderr)
    with socket.create_connection(("127.0.0.1", 6379), timeout=2):  # the host can
        pass


def test_cannot_see_or_signal_host_processes():
    parent = os.getpid()
    code = (f"import os\nprint(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))\n"
            f"try:\n    os.kill({parent}, 9); print('killed')\nexcept OSError as e: print(type(e).__name__)")
    done = _py(code)
    pids, outcome = done.stdout.decode().splitlines()
    assert pids == "[1]" and outcome == "ProcessLookupError"


def test_a_daemonised_grandchild_dies_with_the_run(tmp_path):
    """Attack 4: `setsid ... &` from inside the program must not outlive it."""
    marker = tmp_path / "late-marker"
    pid_file = tmp_path / "grandchild.pid"
    code = ("import subprocess, sys\n"
            f"p = subprocess.Popen(['/bin/sh', '-c', 'echo $$ > {pid_file}; sleep 3; echo x > {marker}'],"
            " start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
            "import time; time.sleep(0.5)\n")
    done = _py(code, tmp_path, wall_seconds=20)
    assert done.returncode == 0 and done.wall_seconds < 5
    time.sleep(4)
    assert not marker.exists()
    assert pid_file.exists()
    leftovers = subprocess.run(["pgrep", "-u", "65534", "-f", str(marker)], capture_output=True)
    assert leftovers.stdout == b""


def test_a_grandchild_holding_stdout_does_not_hold_the_parent(tmp_path):
    code = ("import subprocess\n"
            "subprocess.Popen(['/bin/sh', '-c', 'sleep 60'], start_new_session=True)\n")
    started = time.monotonic()
    done = _py(code, wall_seconds=30)
    assert done.returncode == 0 and time.monotonic() - started < 10


def test_child_dies_with_the_process_that_started_it(tmp_path):
    """A parent killed with SIGKILL (as a lost Celery worker is) takes its fit with it."""
    pid_file = tmp_path / "child.pid"
    code = ("import os, time, pathlib\n"
            f"pathlib.Path({str(pid_file)!r}).write_text(open('/proc/self/stat').read())\n"
            "time.sleep(60)")
    parent = subprocess.Popen([sys.executable, "-c", (
        "import pathlib\nfrom sandbox import Limits, View, run\n"
        f"run([{PYTHON!r}, '-c', {code!r}], limits=Limits(),\n"
        f"    view=View(ro={PREFIXES!r}, rw=({str(tmp_path)!r},), cwd={str(tmp_path)!r}))\n")],
        cwd=PROJECT)
    for _ in range(100):
        if pid_file.exists() and pid_file.read_text():
            break
        time.sleep(0.1)
    host_pids = subprocess.run(["pgrep", "-u", "65534", "-f", str(pid_file)], capture_output=True,
                               text=True).stdout.split()
    assert host_pids
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    for _ in range(50):
        if not any(_alive(int(p)) for p in host_pids):
            return
        time.sleep(0.1)
    pytest.fail("the sandboxed child outlived its parent")


# --- failing closed ---------------------------------------------------------------------

def test_no_bubblewrap_means_nothing_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("PPL_AUDIT_BWRAP", str(tmp_path / "no-such-bwrap"))
    marker = tmp_path / "ran"
    with pytest.raises(SandboxUnavailable, match="bubblewrap"):
        _py(f"open({str(marker)!r}, 'w')", tmp_path)
    assert not marker.exists()


def test_a_sandbox_that_cannot_be_built_is_refused_not_reported_as_the_programs_exit(
        tmp_path, broken_bwrap):
    """bubblewrap's own failure (exit 1, its message on stderr) looked like the program's:
    the parent now knows the view was built only from a byte written inside it."""
    marker = tmp_path / "ran"
    with pytest.raises(SandboxUnavailable, match="could not be set up.*Can't find source"):
        _py(f"open({str(marker)!r}, 'w')", tmp_path)
    assert not marker.exists()


def test_a_program_failing_on_its_own_is_still_its_exit_status(tmp_path):
    done = _py("import sys; sys.stderr.write('boom'); sys.exit(1)", tmp_path)
    assert (done.returncode, done.stderr) == (1, b"boom")
    # the sandbox's ready marker is not part of what the program wrote
    assert _py("print(1)").stderr == b""


def test_an_unknown_sandbox_mode_is_refused(monkeypatch):
    monkeypatch.setenv("PPL_AUDIT_SANDBOX", "off")
    with pytest.raises(SandboxUnavailable, match="not a sandbox mode"):
        _py("print(1)")


def test_none_mode_runs_without_the_os_layer_and_says_so(monkeypatch, caplog):
    monkeypatch.setenv("PPL_AUDIT_SANDBOX", "none")
    done = run([sys.executable, "-c", "import os; print(os.getuid())"], limits=Limits(),
               view=View(cwd="/tmp"))
    assert done.sandbox == "none" and done.returncode == 0
    assert "WITHOUT the OS sandbox" in caplog.text


def test_worker_refuses_to_start_without_bubblewrap(tmp_path):
    env = dict(os.environ, PPL_AUDIT_BWRAP=str(tmp_path / "no-such-bwrap"))
    done = subprocess.run([sys.executable, "-m", "service.cli", "worker"], env=env, cwd=PROJECT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 3
    assert "refusing to start" in done.stderr and "bubblewrap" in done.stderr
