"""Parent side of the PyMC fit: what the sandboxed child sees, and reading its outputs.

The program never runs in this process. A :class:`workers.pymc_runner.session.
PymcSession` runs ``python -m workers.pymc_runner.child`` through ``sandbox.run`` with
the view and environment defined here, hands it requests, and turns the chosen
attempt's ``attempt-K.npz`` + ``attempt-K.json`` into a :class:`workers.fit.Fit` with
SPEC §2.3 scalar names (:func:`make_fit`). ``fit_pymc`` is a session of one fit.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import stat
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import sandbox
from workers.errors import (CompileError, InvalidRequest, ProgramRefused,
                            ProgramRuntimeError, ResourceLimit)
from workers.fit import Fit, flatten_array
from workers.pymc_runner.backends import BACKENDS, MASS_MATRICES
from workers.pymc_runner.protocol import ERROR_FILE, EXIT_OUT_OF_MEMORY, EXIT_PROGRAM_ERROR
from workers.settings import PyMCSettings

LANGUAGE = "pymc"
# Chosen by benchmarks/nuts_backends.py (figures in docs/ and the commit message):
# nutpie with its low-rank mass matrix had the best ESS per CPU-second on kidiq and
# diamonds, and diagonal adaptation on diamonds takes minutes on every backend.
DEFAULT_BACKEND = "nutpie"
DEFAULT_MASS_MATRIX = "low_rank"
DEFAULT_RETRY_TARGET_ACCEPTS = (0.95, 0.99)
_PROJECT_ROOT = Path(__file__).resolve().parents[2]
WORKDIR_PREFIX = "ppl-audit-pymc-"
# The child reports through files in its working directory; its stdout is only the
# program's own printing, of which the parent keeps this much.
MAX_STDOUT = 1 << 20
STDERR_TAIL = 256 * 1024
# A retry is skipped when less than this share of the wall budget is left.
MIN_RETRY_BUDGET = 0.2
# numba's LLVM optimisation level in the child (child_environment)
NUMBA_OPT = "1"
# nutpie's C callbacks in the child: ours, without numba's formatted error paths
# (nutpie_wrappers: same draws, ~1.2 s less on a process's first compile), or "nutpie"
NUTPIE_WRAPPERS = "ppl-audit"


def cache_root() -> Path:
    """Persistent compile caches: ``$PPL_AUDIT_CACHE`` or ``~/.cache/ppl-audit``."""
    configured = os.environ.get("PPL_AUDIT_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "ppl-audit"


def shared_compile_cache() -> Path:
    """PyTensor's compile cache shared by all fits, written only by trusted runs.

    Its numba entries are pickles: a program that could write here could make every
    later audit run its code. So a sandboxed fit gets a private copy of it (in its
    working directory, discarded after the run) and nothing it compiles comes back;
    only :func:`warm_shared_cache`, which fits our own shipped programs, adds to it.
    """
    return cache_root() / "pymc" / "pytensor-shared"


def child_environment(workdir: Path, trusted: bool = False) -> dict[str, str]:
    """The whole environment of the child: nothing of the parent's leaks in but BLAS
    tuning variables the machine's administrator set on purpose.

    Every cache the child writes (PyTensor, numba, JAX, matplotlib) is under
    ``workdir``; PyTensor's starts as a copy of the shared cache (``copy_shared_cache``).
    ``trusted``: a session of our own programs whose cache is copied back
    (``warm_shared_cache``); only such a child saves nutpie's callbacks to the cache.
    """
    compiledir = workdir / "pytensor"
    env = {
        # gcc/g++ for PyTensor's C backend live in /usr/bin
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(workdir / "home"),
        "TMPDIR": "/tmp" if sandbox.mode() == "bwrap" else str(workdir),
        "LANG": "C.UTF-8",
        "PYTHONPATH": str(_PROJECT_ROOT),
        # Fixed hashing: set iteration order inside graph rewrites cannot vary by run.
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        # numba fastmath lets LLVM reassociate differently in code compiled fresh and
        # code loaded from a cache: nutpie's draws for one seed then differed between
        # a cold and a warm cache (kidiq, measured); without it they are identical.
        "PYTENSOR_FLAGS": f"base_compiledir={compiledir},numba__fastmath=False",
        "NUMBA_CACHE_DIR": str(workdir / "numba"),
        # LLVM's optimisation level for numba's code (default 3). Without fastmath LLVM
        # may not reorder floating-point arithmetic, so the level changes compile time,
        # not draws (benchmarks/numba_opt.py: identical draw hashes at 1, 2 and 3).
        # Measured (session 22, fresh process, shared cache copy, level 1 vs 3): compile
        # eight schools 3.6 vs 4.1 s, gp_pois_regr 17.7 vs 19.9 s, Lotka-Volterra 22.9 vs
        # 26.3 s, hmm_example 43.7 vs 63.2 s; sampling within noise (hmm_example 2.8 vs
        # 2.4 s, diamonds 3.8 vs 5.0 s). Level 0 samples 10x slower (hmm_example 28 s).
        "NUMBA_OPT": NUMBA_OPT,
        "PPL_AUDIT_NUTPIE_WRAPPERS": NUTPIE_WRAPPERS,
        # load nutpie's callbacks from the cache; save them only where the cache is
        # copied back (writing one is an object-code emission, ~1 s, that an untrusted
        # child's private copy would throw away)
        "PPL_AUDIT_CALLBACK_CACHE": "save" if trusted else "load",
        "MPLCONFIGDIR": str(workdir / "matplotlib"),
        "JAX_PLATFORMS": "cpu",
        # JAX's persistent compile cache, private to this child (per audit, deleted with
        # it): NumPyro re-traces the model on every sampling (another look, seed or
        # retry), and the cache keys on the compiled program, so a repeat skips XLA's
        # compile. Measured on eight schools, 4 x 1,000: 3.5 s -> 0.7-1.1 s per repeat,
        # identical draws.
        "JAX_COMPILATION_CACHE_DIR": str(workdir / "jax"),
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
        "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
        # glibc gives every thread its own 64 MB malloc arena reservation; two arenas
        # keep the address space close to real use, so RLIMIT_AS (the memory limit)
        # stays usable for nutpie (2.3 -> 1.9 GB peak on eight schools) and JAX
        # (2.3 -> 1.2 GB). Measured: all backends fit eight schools under 1.5 GB.
        "MALLOC_ARENA_MAX": "2",
        # pyarrow (imported with ArviZ; nutpie hands its draws over in Arrow arrays) uses
        # mimalloc by default, which reserves a 1 GB arena at its first allocation: with
        # JAX loaded too (auto's NumPyro fit falling back to nutpie) the child passed its
        # 4 GB RLIMIT_AS (measured: 4.18 GB of address space, 0.93 GB resident). With
        # glibc's allocator: 3.04 GB (child._small_thread_stacks takes it to 2.39 GB).
        "ARROW_DEFAULT_MEMORY_POOL": "system",
        # Chains are the parallelism; BLAS threads on top would oversubscribe the cores.
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    # what the standby child warms up before a request arrives: the default backend's
    # compilers (child._prewarm)
    defaults = PyMCSettings()
    env["PPL_AUDIT_PREWARM"] = ",".join(PREWARM[defaults.backend])
    env["PPL_AUDIT_XLA_DEVICES"] = str(defaults.chains)
    for name in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        if name in os.environ:
            env[name] = os.environ[name]
    return env


#: Compilers to warm per default backend: "auto" picks NumPyro (JAX) for small models,
#: the common case, and nutpie (numba) for large ones.
PREWARM = {"auto": ("jax", "numba"), "nutpie": ("numba",), "numpyro": ("jax",),
           "blackjax": ("jax",), "pymc": ()}


def copy_shared_cache(workdir: Path) -> None:
    """Give a run its private copy of the shared compile cache (a few MB after set-up;
    ~165 MB after ``warm-cache --corpus all``, of which nutpie's callbacks, each holding
    its program's linked code, are about half: 0.3 s to copy)."""
    shared = shared_compile_cache()
    if shared.is_dir():
        shutil.copytree(shared, workdir / "pytensor", symlinks=False,
                        ignore=shutil.ignore_patterns("*.lock", ".lock", "lock_dir"))


def warm_shared_cache(sources: dict[str, tuple[str, list[dict], str]],
                      backends: tuple[str, ...] = (DEFAULT_BACKEND,), *,
                      prewarm_model: bool = True) -> dict[str, float]:
    """Fit our own shipped programs (name -> (source, data sets, profile)) on each data set
    with each of ``backends`` and keep what they compiled in the shared cache. Trusted
    programs only: never call this with a user's program. Returns the wall seconds per
    program (all data sets and backends). ``prewarm_model``: also the tiny model every
    session compiles while it waits (a caller warming program after program asks once).

    One program after another: each session copies its whole private cache back, so two
    at once could each drop the other's new entries of a shared numba index."""
    from workers.pymc_runner.session import PymcSession

    shared = shared_compile_cache()
    shared.mkdir(parents=True, exist_ok=True)
    seconds = {}
    for name, (source, datasets, profile) in sources.items():
        started = time.monotonic()
        for backend in backends:
            with PymcSession(trusted_cache=True) as session:
                for data in datasets:
                    session.fit(source, data, chains=2, tune=200, draws=100, backend=backend,
                                retry_target_accepts=(), profile=profile)
        seconds[name] = round(time.monotonic() - started, 2)
    if prewarm_model:  # what every session compiles while it waits for its first request
        with PymcSession(trusted_cache=True):
            time.sleep(0)
    return seconds


#: What ``ppl-audit warm-cache`` last put in the shared cache (``cli.warm_cache_stamp``:
#: programs, backends, compiler versions), so set-up can tell whether the cache holds what
#: this checkout warms.
WARM_STAMP = "warmed.json"


def warm_stamp() -> dict | None:
    try:
        return json.loads((shared_compile_cache() / WARM_STAMP).read_text())
    except (OSError, ValueError):
        return None


def write_warm_stamp(stamp: dict) -> None:
    (shared_compile_cache() / WARM_STAMP).write_text(json.dumps(stamp, sort_keys=True))


def venv_python() -> str:
    """This interpreter by a path inside the child's view (the virtual environment's own
    ``bin/python``, found through the real prefix, so a symlinked venv works too)."""
    return str(Path(os.path.realpath(sys.prefix)) / "bin" / Path(sys.executable).name)


def child_view(workdir: Path, inbox: Path | None = None) -> sandbox.View:
    """What the PyMC child sees: the interpreter, the virtual environment, the modules of
    ours it runs (not the checkout), its inbox read-only, and its own working directory,
    writable."""
    prefixes = {os.path.realpath(p) for p in (sys.base_prefix, sys.prefix)}
    ours = [_PROJECT_ROOT / "workers" / "__init__.py", _PROJECT_ROOT / "workers" / "errors.py",
            _PROJECT_ROOT / "workers" / "pymc_runner"]
    ro = (*sorted(prefixes), *(str(p) for p in ours), *((str(inbox),) if inbox else ()))
    return sandbox.View(ro=ro, rw=(str(workdir),), tmp_mb=_TMP_MB, cwd=str(workdir))


#: Size of the child's private /tmp, MB (its caches are in its working directory).
_TMP_MB = 256


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def check_settings(chains, tune, draws, target_accept, backend, mass_matrix, cores):
    if backend not in BACKENDS and backend != "auto":
        raise InvalidRequest(f"unknown NUTS backend {backend!r} (choose from "
                             f"{', '.join(BACKENDS)}, or auto)")
    if backend != "auto" and importlib.util.find_spec(backend) is None:
        raise InvalidRequest(f"NUTS backend {backend!r} is not installed on this worker")
    if mass_matrix not in MASS_MATRICES:
        raise InvalidRequest(f"unknown mass matrix {mass_matrix!r} (choose from "
                             f"{', '.join(MASS_MATRICES)})")
    if chains < 1 or draws < 1 or tune < 0 or (cores is not None and cores < 1):
        raise InvalidRequest("chains, draws and cores must be at least 1, tune at least 0")
    if not 0.0 < target_accept < 1.0:
        raise InvalidRequest(f"target_accept must lie in (0, 1), got {target_accept}")


def fit_pymc(source: str, data: dict, *, chains: int = 4, tune: int = 1000,
             draws: int = 1000, target_accept: float = 0.8,
             backend: str = DEFAULT_BACKEND, seed: int = 1,
             limits: sandbox.Limits = sandbox.Limits(), cores: int | None = None,
             mass_matrix: str = DEFAULT_MASS_MATRIX,
             retry_target_accepts: tuple[float, ...] = DEFAULT_RETRY_TARGET_ACCEPTS,
             profile: str = "strict") -> Fit:
    """Fit a verified PyMC program with NUTS in the sandbox: a session of one fit whose
    wall clock (``limits.wall_seconds``) counts from the child's start, imports included.
    See :meth:`workers.pymc_runner.session.PymcSession.fit`."""
    from workers.pymc_runner.session import PymcSession

    with PymcSession(limits) as session:
        return session.fit(source, data, chains=chains, tune=tune, draws=draws,
                           target_accept=target_accept, backend=backend, seed=seed,
                           cores=cores, mass_matrix=mass_matrix,
                           retry_target_accepts=retry_target_accepts, profile=profile,
                           wall_seconds=limits.wall_seconds)


def sweep_stale_workdirs(max_age_seconds: float = 86_400) -> None:
    """Remove working directories a killed parent (SIGKILLed worker) left behind."""
    now = time.time()
    for path in Path(tempfile.gettempdir()).glob(f"{WORKDIR_PREFIX}*"):
        try:
            if now - path.stat().st_mtime > max_age_seconds:
                shutil.rmtree(path, ignore_errors=True)
        except OSError:
            pass


def read_output(path: Path) -> bytes:
    """Read a file the child wrote, refusing anything but a regular file of its own:
    the parent reads as root, and a symlink planted by the program must not make it
    read a host file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as err:
        raise ProgramRuntimeError(f"the PyMC child left an unreadable output file "
                                  f"{path.name}: {err.strerror}", language=LANGUAGE) from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise ProgramRuntimeError(f"{path.name} is not a regular file",
                                      language=LANGUAGE)
        return f.read()


def raise_for_failure(done: sandbox.Completed, out, limits: sandbox.Limits) -> None:
    """Raise the error a failed child's exit means (``out(name)``: path of the output
    ``name`` of the request it was serving)."""
    if done.returncode == 0:
        return
    if done.returncode == -signal.SIGXCPU:
        # Only RLIMIT_CPU sends SIGXCPU. (sandbox.run compares rusage with the limit, but
        # rusage under-counts the kernel's own CPU clock by a few per cent.)
        raise ResourceLimit(f"stopped after the CPU-time limit of {limits.cpu_seconds:g} s",
                            limit="cpu", language=LANGUAGE,
                            seconds=round(done.cpu_seconds, 3))
    stderr = done.stderr.decode("utf-8", "replace")
    reported = _reported_error(out, stderr)
    if done.returncode == EXIT_OUT_OF_MEMORY or (
            done.returncode != EXIT_PROGRAM_ERROR and _looks_like_memory(done, stderr, limits)):
        raise ResourceLimit(f"the PyMC program ran out of memory (limit "
                            f"{limits.memory_mb} MB)", limit="memory", language=LANGUAGE)
    if reported:
        raise_reported(reported)
    tail = " | ".join(stderr.strip().splitlines()[-3:])[-400:]
    raise ProgramRuntimeError(f"the PyMC process failed (exit {done.returncode}): {tail}",
                              language=LANGUAGE)


def raise_reported(reported: dict, limits: sandbox.Limits | None = None) -> None:
    """Raise the program's failure the child reported in ``error.json``."""
    if reported.get("memory"):
        limit = f" (limit {limits.memory_mb} MB)" if limits else ""
        raise ResourceLimit(f"the PyMC program ran out of memory{limit}", limit="memory",
                            language=LANGUAGE)
    kind = {"refused": ProgramRefused, "load": CompileError,
            "build": CompileError}.get(reported.get("stage"), ProgramRuntimeError)
    raise kind(str(reported.get("message"))[:500], language=LANGUAGE, line=reported.get("line"))


def _reported_error(out, stderr: str) -> dict | None:
    try:
        return json.loads(read_output(out(ERROR_FILE)))
    except (OSError, ValueError, ProgramRuntimeError):
        lines = [ln for ln in stderr.splitlines() if ln.startswith("ppl-audit: ")]
        return {"stage": "sample", "message": lines[-1][len("ppl-audit: "):]} if lines else None


def _looks_like_memory(done: sandbox.Completed, stderr: str, limits: sandbox.Limits) -> bool:
    """Native code (LLVM, XLA, BLAS) hitting RLIMIT_AS aborts or segfaults instead of
    raising MemoryError; so does the kernel's OOM killer (SIGKILL)."""
    markers = ("MemoryError", "bad_alloc", "Cannot allocate memory", "out of memory",
               "Resource temporarily unavailable", "failed to map segment",
               "memory allocation of",  # Rust's alloc failure (nutpie)
               "pthread_create", "can't start new thread",  # thread stacks under RLIMIT_AS (XLA)
               "RESOURCE_EXHAUSTED")
    if any(m in stderr for m in markers):
        return True
    killed = done.returncode in (-signal.SIGKILL, -signal.SIGSEGV, -signal.SIGABRT,
                                 -signal.SIGBUS)
    return killed and done.max_rss_mb > 0.8 * limits.memory_mb


def make_fit(summary, arrays, job, attempts, process) -> Fit:
    draws: dict[str, np.ndarray] = {}
    for name in summary["reportable"]:
        scalars = flatten_array(name, arrays[name])
        clash = draws.keys() & scalars.keys()
        if clash:
            # Forgery F3: a variable named like another's scalar would overwrite its
            # draws. The verifier and the child refuse such names; this is the last line.
            raise ProgramRefused(f"variable {name!r} reports {sorted(clash)[0]!r}, which "
                                 "another variable already reports", language=LANGUAGE)
        draws.update(scalars)
    stats = dict(summary["stats"])
    stats.update(attempts=attempts, shapes=summary["shapes"],
                 memory_mb=summary.get("memory_mb", {}), process=process)
    timings = dict(summary["timings"])  # of the chosen attempt; "total" counts from start-up
    timings["process"] = process["wall_seconds"]
    sampler = {"kind": "nuts", "backend": summary.get("backend", job["backend"]), "chains": job["chains"],
               "tune": job["tune"], "draws": job["draws"], "seed": job["seed"],
               "cores": job["cores"], "mass_matrix": job["mass_matrix"],
               "target_accept": summary["target_accept"], "profile": job["profile"],
               "initialisation": summary.get("initialisation", "default")}
    if summary.get("mass_matrix") in MASS_MATRICES:  # the chosen attempt's (diagonal_retry)
        sampler["mass_matrix"] = summary["mass_matrix"]
    if summary.get("fallbacks"):  # a requested backend's diagonal retry (whichever attempt won)
        sampler["fallbacks"] = summary["fallbacks"]
    extended = (summary["stats"].get("session") or {}).get("continued_from")
    if type(extended) is int and extended > 0:  # extended an earlier fit's chains
        sampler["continued_from"] = extended
    if "draw_cap" in job:
        sampler["draw_cap"] = job["draw_cap"]
    if summary.get("backend_choice"):  # backend "auto": what was chosen, for which size, why
        sampler["backend_choice"] = summary["backend_choice"]
        sampler["mass_matrix"] = summary["backend_choice"]["mass_matrix"]
    return Fit(language=LANGUAGE, draws=draws, divergences=int(stats["divergences"]),
               sampler=sampler, stats=stats, timings=timings,
               versions=summary["versions"], reportable=list(summary["reportable"]))
