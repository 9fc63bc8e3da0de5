"""What a user sees (issue 10, item 5): the CLI prints no third-party notices. ArviZ
warns once a day on import (a stamp file in the user's cache); a fresh cache makes it
warn again, so the check is real."""
from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import ROOT


def _env(tmp_path) -> dict:
    return {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"),
            "PPL_AUDIT_DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite'}"}


def test_the_arviz_notice_is_silenced_where_the_cli_starts(tmp_path):
    """catches: removing the filter in ``service.cli.main`` (the notice comes back)."""
    bare = subprocess.run([sys.executable, "-c", "import arviz"], cwd=ROOT, env=_env(tmp_path),
                          capture_output=True, text=True, timeout=120)
    assert "ArviZ is undergoing a major refactor" in bare.stderr  # the notice exists
    stamps = list((tmp_path / "cache").rglob("daily_warning"))
    assert stamps
    for stamp in stamps:  # so that the next import warns again
        stamp.unlink()
    out = subprocess.run([sys.executable, "-m", "service.cli", "audit", "--pymc", "p.py",
                          "--lazyppl", "l.hs", "--scope", "nonsense"], cwd=ROOT,
                         env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert "Warning" not in out.stderr and "ArviZ" not in out.stderr, out.stderr
    assert "No such file or directory: 'p.py'" in out.stderr
