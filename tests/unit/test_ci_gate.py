"""The CI gate of tests/ci_gate.py, run on a throwaway test file in a child pytest with
a PATH that has no GHC: in CI the GHC skip is a failure, elsewhere it stays a skip."""
from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import ROOT

TEST = '''
import shutil
import pytest

@pytest.mark.skipif(shutil.which("ghc") is None, reason="GHC is not installed")
def test_needs_ghc():
    pass

@pytest.mark.skipif(True, reason="some other reason")
def test_other_skip():
    pass
'''


def _run(tmp_path, ci: str | None):
    (tmp_path / "test_gate_probe.py").write_text(TEST)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PATH"] = str(tmp_path)  # no ghc on it
    if ci is not None:
        env["CI"] = ci
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                           "-p", "tests.ci_gate", "--rootdir", str(tmp_path),
                           str(tmp_path / "test_gate_probe.py")],
                          cwd=ROOT, env={**env, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120)


def test_in_ci_a_missing_ghc_fails_the_suite(tmp_path):
    """catches: the gate removed (CI would pass with every GHC test skipped)."""
    out = _run(tmp_path, "true")
    assert out.returncode == 1, out.stdout
    # a skipif skips at setup, so the turned report counts as an error: the run fails
    assert "1 skipped" in out.stdout and "1 error" in out.stdout
    assert "CI requires GHC" in out.stdout


def test_outside_ci_a_missing_ghc_is_a_visible_skip(tmp_path):
    """catches: the gate firing outside CI (developers without GHC run the rest)."""
    out = _run(tmp_path, None)
    assert out.returncode == 0, out.stdout
    assert "2 skipped" in out.stdout and "GHC is not installed" in out.stdout
