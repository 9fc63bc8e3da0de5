"""The OS layer alone against the issue-9 attacks: code that got past the verifier or the
lint (here: run directly, with those layers switched off) in exactly the view and
environment the PyMC child, GHC and a LazyPPL program get. The host never changes, the
host name never shows, and nothing of the run survives it."""
import os
import socket
import subprocess
import time
import uuid
from pathlib import Path

import pytest

import sandbox
from haskell_bridge.compile import ghc_view
from haskell_bridge.paths import lazyppl_build
from workers.pymc_runner.runner import child_environment, child_view, venv_python

pytestmark = pytest.mark.integration

HOSTNAME = socket.gethostname().encode()
PROJECT = Path(__file__).resolve().parents[2]


@pytest.fixture
def marker():
    path = Path("/tmp") / f"ppl-audit-attack-{uuid.uuid4().hex}"
    yield path
    assert not path.exists(), "the sandboxed program changed the host"


def _pymc_child(code: str, workdir: Path) -> sandbox.Completed:
    """Run ``code`` as the PyMC child would run, without the verifier."""
    return sandbox.run([venv_python(), "-c", code], limits=sandbox.Limits(wall_seconds=120),
                       view=child_view(workdir), env=child_environment(workdir))


def test_pytensor_compiler_flags_run_a_shell_but_only_inside(tmp_path, marker):
    """Attack 1 with the verifier off: change_flags(gcc__cxxflags="-wrapper /bin/sh,-c,...")."""
    script = f"touch {marker}; cat /etc/hostname; hostname; id -u > {tmp_path}/uid"
    code = ("import pytensor.tensor as pt\n"
            f"with pt.math.config.change_flags(gcc__cxxflags='-wrapper /bin/sh,-c,{script}',"
            " cxx='/usr/bin/g++', linker='cvm'):\n"
            "    try:\n        (pt.as_tensor(1.0) + pt.as_tensor(2.0)).eval()\n"
            "    except Exception as e: print('compile failed', type(e).__name__)\n")
    done = _pymc_child(code, tmp_path)
    assert HOSTNAME not in done.stdout + done.stderr
    if (tmp_path / "uid").exists():  # the shell ran: as nobody, inside
        assert (tmp_path / "uid").read_text().strip() == "65534"


def test_file_writers_reach_only_the_private_tmp(tmp_path, marker):
    """Attacks 2 and 3 with the verifier off: pandas writers and os.system."""
    code = ("import os, pandas\n"
            f"pandas.DataFrame({{'a': [1]}}).to_csv({str(marker)!r})\n"
            f"os.system('echo x > {PROJECT}/pwned; cat /etc/hostname /root/.bashrc; hostname')\n"
            f"print(os.path.exists({str(marker)!r}))")
    done = _pymc_child(code, tmp_path)
    assert done.stdout.strip().endswith(b"True")  # written, to the run's own /tmp
    assert HOSTNAME not in done.stdout + done.stderr
    assert not (PROJECT / "pwned").exists()


def test_a_delayed_writer_never_reaches_the_host(tmp_path, marker):
    """Attack 4: a grandchild that waits for the audit to end, then acts (checked 20 s on)."""
    code = ("import subprocess\n"
            f"subprocess.Popen(['/bin/sh', '-c', 'sleep 2; touch {marker}; touch {tmp_path}/late'],"
            " start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,"
            " stderr=subprocess.DEVNULL)\n")
    done = _pymc_child(code, tmp_path)
    assert done.returncode == 0
    time.sleep(20)
    assert not (tmp_path / "late").exists()
    survivors = subprocess.run(["pgrep", "-f", f"touch {marker}"], capture_output=True)
    assert survivors.stdout == b""


def test_the_shared_compile_cache_is_not_writable_from_a_run(tmp_path):
    """A program must never write the cache whose pickles later audits load."""
    from workers.pymc_runner.runner import shared_compile_cache
    shared = shared_compile_cache()
    code = (f"import os\nprint(os.path.exists({str(shared)!r}))\n"
            f"try:\n    open({str(shared / 'poison')!r}, 'w'); print('wrote')\n"
            "except OSError as e: print(type(e).__name__)")
    done = _pymc_child(code, tmp_path)
    assert done.stdout.split()[0] == b"False"
    assert not (shared / "poison").exists()


@pytest.mark.skipif(not os.path.exists("/usr/bin/ghc"), reason="GHC is not installed")
def test_ghc_view_hides_other_programs_and_the_host(tmp_path, marker):
    """A compile-time escape (attack 5's class) sees GHC, our library and its work dir."""
    build = lazyppl_build()
    code = (f"touch {marker}; ls {build.programs_dir} 2>&1; cat /etc/hostname 2>&1; "
            f"ls {PROJECT} 2>&1; touch {build.package_db}/x 2>&1; echo done")
    done = sandbox.run(["/bin/sh", "-c", code], limits=sandbox.Limits(wall_seconds=60),
                       view=ghc_view(tmp_path, build), env={"PATH": "/usr/bin:/bin"})
    out = done.stdout + done.stderr
    assert b"No such file" in out and b"Read-only file system" in out
    assert HOSTNAME not in out and out.rstrip().endswith(b"done")


def test_lazyppl_program_view_is_its_binary_only(tmp_path, marker):
    """Attack 6's class (an overridden write(2) in the program's own binary) can reach
    nothing: the run sees its binary read-only and a private /tmp."""
    fake_binary = tmp_path / "model"
    fake_binary.write_text("#!/bin/sh\n"
                           f"touch {marker}; cat /etc/hostname; ls /root {PROJECT}; "
                           f"echo x > {fake_binary}; echo done\n")
    fake_binary.chmod(0o755)
    done = sandbox.run([str(fake_binary)], limits=sandbox.Limits(wall_seconds=60),
                       view=sandbox.View(ro=(str(fake_binary),), tmp_mb=64), env={})
    out = done.stdout + done.stderr
    assert HOSTNAME not in out and done.stdout.rstrip().endswith(b"done")
    assert b"Read-only file system" in done.stderr
    assert fake_binary.read_text().startswith("#!/bin/sh")


def test_a_flood_of_output_is_cut_off_and_the_parent_stays_small(tmp_path):
    """300 MB printed by a program (verifier bypassed): the run ends at the runner's cap,
    and the parent never holds more than that cap."""
    import resource

    from workers.errors import ResourceLimit
    from workers.pymc_runner.runner import MAX_STDOUT

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    code = "import sys\nfor _ in range(300 * 16): sys.stdout.write('x' * 65536)"
    with pytest.raises(ResourceLimit) as err:
        sandbox.run([venv_python(), "-c", code], limits=sandbox.Limits(wall_seconds=120),
                    view=child_view(tmp_path), env=child_environment(tmp_path),
                    max_stdout_bytes=MAX_STDOUT)
    assert err.value.details["limit"] == "output"
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 50
