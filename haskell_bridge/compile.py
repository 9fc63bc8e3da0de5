"""Compile an untrusted LazyPPL program as Safe Haskell and link it with our harness.

Two GHC runs, both inside :func:`sandbox.run` (GHC itself reads untrusted input):

1. The user's ``Model.hs`` alone, in one-shot mode, with :data:`SAFE_FLAGS`:
   ``-XSafe -fpackage-trust`` against the private package database of
   ``scripts/build-lazyppl.sh`` (only base, lazyppl, containers and log-domain trusted
   there), ``-hide-all-packages`` with module thinning so that exactly the modules of
   :data:`EXPOSED_MODULES` can be imported, ``-fforce-recomp`` (a stale interface
   would skip every check), and ``-w -Werror``. GHC 9.0 reports Template Haskell,
   RULES and GeneralizedNewtypeDeriving under Safe Haskell only as warnings that
   belong to no warning flag; ``-Werror`` turns them into errors, while ``-w``
   switches off every *flagged* warning so that ordinary user warnings (tabs,
   overlapping patterns, unused names) do not fail the build. ``-Werror=unsafe`` does
   not catch them (measured). Defence in depth behind the lint (:func:`untrusted_flags`):
   the language is pinned to Haskell 2010 without the FFI, every other extension GHC
   knows is switched off (a LANGUAGE pragma the lint allowed switches its own back on),
   and every helper program GHC could run for one module (CPP, ``-F`` preprocessor,
   unlit, the C compiler that builds ``foreign export`` stubs, LLVM) is a path that
   does not exist. So a ``foreign`` declaration the lint missed is a parse error, and
   CPP or a ``foreign export`` fails even if a pragma for them slipped past the lint;
   a ``foreign import`` behind a slipped FFI pragma would compile but stay inert (it
   must be in IO under Safe Haskell, and no IO action of the user's is ever run).
   File-header ``OPTIONS_GHC`` pragmas override command-line flags: only the lint
   (and the OS sandbox) stand against those.
2. Our ``Main.hs`` (trusted, not Safe) type-checked against the resulting interface
   (so a ``model`` of the wrong type is a compile error, not undefined behaviour) and
   linked with ``-threaded -rtsopts``.

Binaries are cached under the lazyppl build directory by a content hash of the
normalised source, the library build hash, the GHC version and the flags.
"""
from __future__ import annotations

import functools
import hashlib
import logging
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import sandbox
from haskell_bridge.lint import lint, normalise_source
from haskell_bridge.paths import LazypplBuild, ghc_executable, lazyppl_build
from workers.errors import CompileError, ResourceLimit

log = logging.getLogger(__name__)

#: Importable modules per package (module thinning), as the user's program names them;
#: the union is lint.ALLOWED_IMPORTS.
EXPOSED_MODULES: dict[str, tuple[str, ...]] = {
    "base": (
        "Prelude", "Data.List", "Data.Maybe", "Data.Ord", "Data.Function",
        "Data.Foldable", "Data.Traversable", "Data.Tuple", "Data.Either", "Data.Functor",
        "Data.Bits", "Data.Char", "Data.Monoid", "Control.Monad", "Control.Applicative",
    ),
    "lazyppl": ("LazyPPL", "LazyPPL.Distributions", "LazyPPL.Bridge", "LazyPPL.Linear",
                "LazyPPL.ODE"),
    "log-domain": ("Numeric.Log",),
    "containers": ("Data.Map", "Data.Map.Strict"),
}

#: Exposed names backed by another module (thinning with renaming): a user's
#: ``import LazyPPL`` gets the SPEC §2.2 surface, without samplers or constructors.
RENAMED_MODULES: dict[str, str] = {"LazyPPL": "LazyPPL.Surface"}

#: Flags for the untrusted module, before the package database and -package flags.
SAFE_FLAGS: tuple[str, ...] = (
    "-XSafe", "-fpackage-trust",
    "-hide-all-packages", "-no-user-package-db", "-no-global-package-db",
    "-fforce-recomp", "-w", "-Werror", "-O2",
    "-i",  # no source search path: Model.hs can import nothing local
)

#: Extensions on in every user module: Haskell 2010's own set (GHC 9.0's
#: ``languageExtensions (Just Haskell2010)``) without ForeignFunctionInterface.
DEFAULT_EXTENSIONS = frozenset({
    "ImplicitPrelude", "StarIsType", "CUSKs", "MonomorphismRestriction", "DatatypeContexts",
    "TraditionalRecordSyntax", "EmptyDataDecls", "PatternGuards", "DoAndIfThenElse",
    "RelaxedPolyRec",
})
#: Language names and Safe Haskell modes: not extensions that -XNo can switch off.
_NOT_SWITCHABLE = frozenset({"Haskell98", "Haskell2010", "Safe", "Trustworthy", "Unsafe"})

#: What GHC runs instead of CPP, the -F preprocessor, unlit, the C compiler (foreign
#: export stubs), the interpreter and LLVM when compiling the user's module: nothing.
#: (GHC then prints a harmless "Couldn't figure out C compiler information" warning,
#: removed from messages by :func:`clean_message`.)
NO_PROGRAM = "/nonexistent/ppl-audit-refused"
TOOL_FLAGS: tuple[str, ...] = tuple(
    arg for tool in ("P", "F", "L", "c", "i", "lo", "lc")
    for arg in (f"-pgm{tool}", f"{NO_PROGRAM}-{tool}"))

_TOOL_USES = {"P": "the C preprocessor (CPP)", "F": "a source preprocessor (-F)",
              "L": "unlit (literate Haskell)",
              "c": "the C compiler (foreign export or C stubs)",
              "i": "the interpreter", "lo": "LLVM", "lc": "LLVM"}


@functools.lru_cache(maxsize=None)
def language_flags() -> tuple[str, ...]:
    """``-XHaskell2010`` and ``-XNo<E>`` for every extension E this GHC supports that is
    not in :data:`DEFAULT_EXTENSIONS` (asked of GHC once per process, so a newer GHC's
    new extensions are off too)."""
    done = subprocess.run([ghc_executable(), "--supported-extensions"], capture_output=True,
                          text=True, check=True, env={"PATH": "/usr/bin:/bin"})
    supported = done.stdout.split()
    if "ForeignFunctionInterface" not in supported:
        raise RuntimeError("ghc --supported-extensions gave no usable list")
    known = set(supported)
    # "NoX" entries are the negations of X; NondecreasingIndentation merely starts so
    off = [e for e in supported if not (e.startswith("No") and e[2:] in known)
           and e not in DEFAULT_EXTENSIONS and e not in _NOT_SWITCHABLE]
    return ("-XHaskell2010", *(f"-XNo{e}" for e in off))


def untrusted_flags() -> tuple[str, ...]:
    """Every flag for the user's module, before the package database and -package flags."""
    return (*SAFE_FLAGS, *language_flags(), *TOOL_FLAGS)


#: Flags for linking the trusted Main with the compiled model.
LINK_FLAGS: tuple[str, ...] = ("-threaded", "-rtsopts", "-optl-s")  # -s: strip, 30% smaller

MAIN_HS = """\
module Main (main) where
import Model (model)
import LazyPPL.Harness (runHarness)
main :: IO ()
main = runHarness model
"""

#: Address space allowed beyond twice the heap cap (binary, stacks, C allocations), MB.
ADDRESS_SPACE_HEADROOM_MB = 512

#: Compiled programs kept per library build (about 14 MB each), least recently used
#: evicted first.
MAX_CACHED_PROGRAMS = 100

#: Longest compiler message passed on to the user, in characters.
MAX_MESSAGE_CHARS = 8000


@dataclass(frozen=True)
class CompiledProgram:
    """A linked program binary; ``cached`` is True when no GHC ran for this call."""

    path: Path
    key: str
    cached: bool
    seconds: float  # wall time spent compiling and linking now (0 when cached)


def package_flags(build: LazypplBuild, *, thinned: bool) -> list[str]:
    """-package-db and -package flags; ``thinned`` exposes only EXPOSED_MODULES (with
    RENAMED_MODULES' renaming)."""
    flags = ["-package-db", str(build.package_db)]
    for package, modules in EXPOSED_MODULES.items():
        shown = [f"{RENAMED_MODULES[m]} as {m}" if m in RENAMED_MODULES else m
                 for m in modules]
        flags += ["-package", f"{package} ({', '.join(shown)})" if thinned else package]
    return flags


def program_key(text: str, build: LazypplBuild) -> str:
    """Cache key of a normalised source under a given library build and flag set."""
    h = hashlib.sha256()
    for part in (text, build.hash, build.ghc_version, " ".join(untrusted_flags()),
                 " ".join(LINK_FLAGS), MAIN_HS, repr(sorted(EXPOSED_MODULES.items())),
                 repr(sorted(RENAMED_MODULES.items()))):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def compile_program(source: str, *, limits: sandbox.Limits) -> Path:
    """Lint, compile and link ``source``; return the binary (cached by content hash).

    Raises ProgramRefused (lint), CompileError (GHC's message, lines of the user's
    source, file name ``Model.hs``) or ResourceLimit (GHC exceeded ``limits``).
    """
    return build_program(source, limits=limits).path


def build_program(source: str, *, limits: sandbox.Limits) -> CompiledProgram:
    """Like :func:`compile_program`, also saying whether the cache answered."""
    lint(source)
    text = normalise_source(source)
    build = lazyppl_build()
    key = program_key(text, build)
    target = build.programs_dir / key / "model"
    if target.is_file():
        os.utime(target)  # recency for eviction
        log.info("lazyppl program %s: cached binary, not recompiled", key)
        return CompiledProgram(target, key, cached=True, seconds=0.0)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ppl-audit-ghc-") as tmp:
        work = Path(tmp)
        compile_untrusted_module(text, work, build, limits=limits)
        binary = link_with_harness(work, build, limits=limits)
        target.parent.mkdir(parents=True, exist_ok=True)
        if binary.is_symlink() or not binary.is_file():
            raise CompileError("the linker left no program binary", language="lazyppl")
        # a name of its own per compile: two scopes of one audit (threads of one process)
        # may compile the same program at once, and both publish the same binary
        fd, name = tempfile.mkstemp(dir=target.parent, prefix="model.", suffix=".tmp")
        os.close(fd)
        staged = Path(name)
        try:
            shutil.copyfile(binary, staged)  # a file of ours, not the sandbox user's
            os.chmod(staged, 0o755)
            publish(staged, target)
        finally:
            staged.unlink(missing_ok=True)
    evict_old_programs(build.programs_dir, keep=MAX_CACHED_PROGRAMS)
    seconds = time.monotonic() - started
    log.info("lazyppl program %s: compiled in %.2f s", key, seconds)
    return CompiledProgram(target, key, cached=False, seconds=seconds)


def publish(staged: Path, target: Path) -> None:
    """Publish a compiled binary atomically, never over one already published.

    A published binary may be starting in a sandbox: the sandbox stages it with a bind
    mount, and a bind mount of a file that was replaced (unlinked) since cannot be bound
    again (bwrap: "Unable to mount source on destination: No such file or directory",
    seen when the second scope of an audit published the same program while the first
    scope's run was starting). A hard link fails instead of replacing; the first
    binary stands (the same source gives the same program)."""
    try:
        os.link(staged, target)
    except FileExistsError:
        log.info("lazyppl program %s: published by a concurrent compile", target.parent.name)


def evict_old_programs(programs_dir: Path, *, keep: int) -> None:
    """Delete all but the ``keep`` most recently used program binaries."""
    binaries = []
    for path in programs_dir.glob("*/model"):
        try:
            binaries.append((path.stat().st_mtime, path))
        except FileNotFoundError:
            continue  # evicted concurrently
    binaries.sort(reverse=True)
    for _, path in binaries[keep:]:
        shutil.rmtree(path.parent, ignore_errors=True)


def compile_untrusted_module(text: str, work: Path, build: LazypplBuild, *,
                             limits: sandbox.Limits, thinned: bool = True) -> None:
    """The Safe Haskell step alone: ``work/Model.hs`` -> ``work/out/Model.{o,hi}``.

    Does NOT lint: :func:`build_program` lints first. Exposed so tests can show that
    the later layers refuse what the lint refuses (defence in depth); ``thinned=False``
    (tests only) exposes every module of the packages, leaving Safe Haskell's own
    checks as the only layer.
    """
    (work / "Model.hs").write_text(text)
    (work / "out").mkdir(exist_ok=True)
    argv = ["-c", "Model.hs", *untrusted_flags(), *package_flags(build, thinned=thinned),
            "-outputdir", "out"]
    _ghc(argv, work, build, limits)


def link_with_harness(work: Path, build: LazypplBuild, *, limits: sandbox.Limits) -> Path:
    """Compile our Main against ``out/Model.hi`` and link the binary ``work/model``."""
    main_dir = work / "main"
    main_dir.mkdir(exist_ok=True)
    (main_dir / "Main.hs").write_text(MAIN_HS)
    common = ["-hide-all-packages", "-no-user-package-db", "-no-global-package-db",
              *package_flags(build, thinned=False), "-package", "lazyppl"]
    # One-shot mode finds the home module through the import path (out/Model.hi).
    _ghc(["-c", "main/Main.hs", "-O0", "-i", "-iout", "-hidir", "out", "-odir", "out",
          *common],
         work, build, limits)
    _ghc(["-o", "model", "out/Main.o", "out/Model.o", *LINK_FLAGS, *common],
         work, build, limits)
    return work / "model"


def haskell_process_limits(limits: sandbox.Limits) -> sandbox.Limits:
    """Sandbox limits for a GHC-compiled process whose heap is capped by ``+RTS -M``.

    The heap cap is ``limits.memory_mb``; RLIMIT_AS becomes a loose backstop of
    ``2 * memory_mb + 512`` MB, because the RTS reserves its heap address range by
    halving a 1 TB request until mmap succeeds: a tighter RLIMIT_AS would stop the
    heap at a power of two below the cap (see run.py).
    """
    return sandbox.Limits(cpu_seconds=limits.cpu_seconds, wall_seconds=limits.wall_seconds,
                          memory_mb=2 * limits.memory_mb + ADDRESS_SPACE_HEADROOM_MB,
                          file_size_mb=limits.file_size_mb)


#: Most compiler output the parent reads (stdout; stderr keeps its last 256 KB), bytes.
MAX_COMPILER_OUTPUT = 1 << 20


def ghc_view(work: Path, build: LazypplBuild) -> sandbox.View:
    """What GHC sees: the system (GHC, gcc and Debian's Haskell libraries are in /usr),
    our library's package database and installed library, and its own working
    directory; not the compiled programs of other audits."""
    return sandbox.View(ro=(str(build.package_db), str(build.root / "install")),
                        rw=(str(work),), cwd=str(work))


def _ghc(args: list[str], work: Path, build: LazypplBuild, limits: sandbox.Limits) -> None:
    # -package-env -: never read a .ghc.environment file from the temp dir's ancestors
    # (GHC already skips them under -hide-all-packages; this does not rely on that).
    argv = [ghc_executable(), "+RTS", f"-M{limits.memory_mb}m", "-RTS",
            "-package-env", "-", *args]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(work), "TMPDIR": "/tmp",
           "LANG": "C.UTF-8"}
    done = sandbox.run(argv, limits=haskell_process_limits(limits), view=ghc_view(work, build),
                       env=env, max_stdout_bytes=MAX_COMPILER_OUTPUT)
    if done.returncode == 0:
        return
    stderr = done.stderr.decode("utf-8", "replace")
    if "Heap exhausted" in stderr or "out of memory" in stderr or done.returncode == 251:
        raise ResourceLimit(
            f"the Haskell compiler exceeded the memory cap of {limits.memory_mb} MB",
            limit="memory", language="lazyppl")
    raise CompileError(clean_message(stderr or done.stdout.decode("utf-8", "replace"),
                                     work, build), language="lazyppl")


def clean_message(text: str, work: Path, build: LazypplBuild) -> str:
    """GHC's message with temporary and cache paths removed, capped in length."""
    for path, shown in ((str(work) + "/", ""), (str(work), "."),
                        (str(build.root), "<lazyppl>")):
        text = text.replace(path, shown)
    text = re.sub(r"/tmp/ppl-audit-ghc-[A-Za-z0-9_]+/?", "", text)
    text = re.sub(r"<no location info>: error:\s*Warning: Couldn't figure out C compiler "
                  r"information!\s*Make sure you're using GNU gcc, or clang\s*", "", text)
    text = text.strip()
    refused_tool = re.search(re.escape(NO_PROGRAM) + r"-(\w+)", text)
    if refused_tool:
        what = _TOOL_USES.get(refused_tool.group(1), "an external program")
        text = f"Model.hs: the program needs {what}, which is not allowed"
    if len(text) > MAX_MESSAGE_CHARS:
        text = text[:MAX_MESSAGE_CHARS] + "\n... (message truncated)"
    return text
