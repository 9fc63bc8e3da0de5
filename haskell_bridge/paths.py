"""Where the built lazyppl library, its private package database and compiled programs live.

``scripts/build-lazyppl.sh`` is the one place that knows how the library is built and
how its build directory is named (a hash of the library sources, the GHC version and
the script). This module asks the script for that directory (the script returns at
once when the build exists, and builds it otherwise) and reads ``build-info.json``
from it. ``PPL_AUDIT_LAZYPPL_BUILD`` may name a finished build directory directly
(e.g. in an image built ahead of time); ``PPL_AUDIT_CACHE`` moves the whole cache.
"""
from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
BUILD_SCRIPT = REPO_ROOT / "scripts" / "build-lazyppl.sh"
LAZYPPL_SOURCE = REPO_ROOT / "lazyppl"


class ToolchainMissing(RuntimeError):
    """GHC or the lazyppl build is not available on this machine (an operator problem)."""


def cache_dir() -> Path:
    """Root of ppl-audit's on-disk cache: ``$PPL_AUDIT_CACHE`` or ``~/.cache/ppl-audit``."""
    configured = os.environ.get("PPL_AUDIT_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "ppl-audit"


@dataclass(frozen=True)
class LazypplBuild:
    """One built lazyppl library and the private package database that holds it."""

    root: Path
    hash: str  # content hash of the library sources + GHC version + build script
    ghc_version: str
    version: str  # lazyppl's cabal version
    unit_id: str

    @property
    def package_db(self) -> Path:
        return self.root / "package.db"

    @property
    def programs_dir(self) -> Path:
        """Compiled user programs, one subdirectory per program cache key."""
        return self.root / "programs"


def ghc_executable() -> str:
    """Absolute path of ``ghc``; raises ToolchainMissing when it is not installed."""
    found = shutil.which("ghc")
    if not found:
        raise ToolchainMissing(
            "GHC is not installed (ghc not on PATH); run scripts/install-system.sh"
        )
    return os.path.realpath(found)


def read_build(root: Path) -> LazypplBuild:
    """The build in ``root``; raises ToolchainMissing if it is absent or unfinished."""
    if not (root / "ready").is_file():
        raise ToolchainMissing(f"no finished lazyppl build in {root}")
    try:
        os.utime(root / "ready")  # "last used", so the build script does not prune it
    except OSError:
        pass  # a read-only prebuilt directory is fine
    info = json.loads((root / "build-info.json").read_text())
    return LazypplBuild(
        root=root,
        hash=info["hash"],
        ghc_version=info["ghc"],
        version=info["lazyppl_version"],
        unit_id=info["lazyppl_unit_id"],
    )


@functools.lru_cache(maxsize=None)
def _build_for(source: str, cache: str) -> LazypplBuild:
    ghc_executable()
    env = dict(os.environ, PPL_AUDIT_CACHE=cache, LAZYPPL_SRC=source)
    done = subprocess.run(
        ["bash", str(BUILD_SCRIPT)], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise ToolchainMissing(
            f"building the lazyppl library failed (exit {done.returncode}):\n"
            f"{done.stderr[-4000:]}"
        )
    lines = done.stdout.strip().splitlines()
    if not lines:
        raise ToolchainMissing("scripts/build-lazyppl.sh printed no build directory")
    return read_build(Path(lines[-1]))


def lazyppl_build() -> LazypplBuild:
    """The lazyppl build to compile against, building it on first use.

    The answer is memoised per process (a library edit is picked up by a new process);
    the first call in a process costs about a tenth of a second when the build exists,
    and a full library build (a minute or more) when it does not.
    """
    preset = os.environ.get("PPL_AUDIT_LAZYPPL_BUILD")
    if preset:
        return read_build(Path(preset))
    source = os.environ.get("LAZYPPL_SRC", str(LAZYPPL_SOURCE))
    return _build_for(source, str(cache_dir()))
