"""workers.stop.kill_own_runs kills the process groups this process started in a
session of their own (sandboxed runs) and leaves its other children alone."""
import subprocess
import time

from workers.stop import kill_own_runs


def _alive(pid: int) -> bool:
    """Running (a killed process awaiting its reaper is a zombie, not alive)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def test_only_children_leading_their_own_group_are_killed_with_their_group():
    # a "run": a shell leading its own session, with a grandchild in the same group
    run = subprocess.Popen(["sh", "-c", "sleep 60 & wait"], start_new_session=True)
    plain = subprocess.Popen(["sleep", "60"])  # same group as this test: not a run
    try:
        time.sleep(0.2)
        grandchild = subprocess.run(["pgrep", "-g", str(run.pid), "sleep"], capture_output=True,
                                    text=True).stdout.split()
        assert grandchild, "the run's grandchild did not start"
        assert kill_own_runs() == [run.pid]
        assert run.wait(timeout=5) == -9
        time.sleep(0.2)
        assert not [p for p in grandchild if _alive(int(p))]  # its whole group is gone
        assert plain.poll() is None
        assert kill_own_runs() == []
    finally:
        plain.kill()
        plain.wait()
        run.kill()
        run.wait()
