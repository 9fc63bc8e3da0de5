"""The sandbox layer on real processes: each limit stops the child, the parent survives."""
import sys

import pytest

from sandbox import Limits, network_isolation_available, run
from workers.errors import ResourceLimit

pytestmark = pytest.mark.integration


def _py(code: str, tmp_path, **limits):
    return run([sys.executable, "-c", code], limits=Limits(**limits), cwd=tmp_path)


def test_output_and_stdin_round_trip(tmp_path):
    done = run([sys.executable, "-c", "import sys; print(sys.stdin.read().upper())"],
               limits=Limits(), cwd=tmp_path, stdin=b"draws")
    assert done.returncode == 0 and done.stdout == b"DRAWS\n"
    assert done.cpu_seconds > 0 and done.max_rss_mb > 1


def test_busy_loop_stops_at_cpu_limit(tmp_path):
    with pytest.raises(ResourceLimit) as err:
        _py("while True: pass", tmp_path, cpu_seconds=1, wall_seconds=20)
    assert err.value.details["limit"] == "cpu"


def test_sleeping_child_stops_at_wall_clock_and_its_group_dies(tmp_path):
    code = ("import subprocess, sys, time\n"
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
            "time.sleep(60)")
    with pytest.raises(ResourceLimit) as err:
        _py(code, tmp_path, wall_seconds=2)
    assert err.value.details["limit"] == "timeout"


def test_huge_allocation_fails_inside_the_child(tmp_path):
    done = _py("x = bytearray(30 * 1024**3)", tmp_path, memory_mb=1024)
    assert done.returncode != 0 and b"MemoryError" in done.stderr


def test_environment_is_only_what_the_caller_passes(tmp_path):
    done = run([sys.executable, "-c", "import os; print(sorted(os.environ))"],
               limits=Limits(), cwd=tmp_path, env={"ONLY": "1"})
    assert b"'ONLY'" in done.stdout and b"HOME" not in done.stdout


@pytest.mark.skipif(not network_isolation_available(), reason="kernel refuses network namespaces")
def test_no_network_in_the_child(tmp_path):
    done = _py("import socket; socket.create_connection(('127.0.0.1', 6379), timeout=2)", tmp_path)
    assert done.returncode != 0 and b"unreachable" in done.stderr


def test_child_dies_with_the_process_that_started_it(tmp_path):
    """A parent killed with SIGKILL (as a lost Celery worker is) takes its fit with it."""
    import os
    import signal
    import subprocess
    import time

    pid_file = tmp_path / "child.pid"
    parent = subprocess.Popen([sys.executable, "-c", (
        "import sys, pathlib\n"
        "from sandbox import Limits, run\n"
        "code = 'import os, time; open(\"child.pid\", \"w\").write(str(os.getpid())); time.sleep(60)'\n"
        "run([sys.executable, '-c', code],\n"
        f"    limits=Limits(), cwd=pathlib.Path({str(tmp_path)!r}), isolate_network=False)\n")])
    for _ in range(100):
        if pid_file.exists() and pid_file.read_text():
            break
        time.sleep(0.1)
    child = int(pid_file.read_text())
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    def alive(pid: int) -> bool:  # a zombie is dead (this machine's init may not reap it)
        try:
            return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
        except FileNotFoundError:
            return False

    for _ in range(50):
        if not alive(child):
            return
        time.sleep(0.1)
    os.kill(child, signal.SIGKILL)
    pytest.fail("the sandboxed child outlived its parent")
