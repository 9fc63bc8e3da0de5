"""Parent side of the PyMC fit: verify, run the child in the sandbox, read its outputs.

The program never runs in this process. ``fit_pymc`` writes ``job.json`` into a fresh
temporary directory, runs ``python -m workers.pymc_runner.child`` there through
``sandbox.run`` with a minimal environment, and turns the chosen attempt's
``attempt-N.npz`` + ``attempt-N.json`` into a :class:`workers.fit.Fit` with SPEC §2.3
scalar names.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
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
from workers.pymc_runner.protocol import (ERROR_FILE, EXIT_OUT_OF_MEMORY,
                                          EXIT_PROGRAM_ERROR, JOB_FILE, SUMMARY_FILE,
                                          attempt_file)
from workers.pymc_runner.verifier import verify

LANGUAGE = "pymc"
# Chosen by benchmarks/nuts_backends.py (figures in docs/ and the commit message):
# nutpie with its low-rank mass matrix had the best ESS per CPU-second on kidiq and
# diamonds, and diagonal adaptation on diamonds takes minutes on every backend.
DEFAULT_BACKEND = "nutpie"
DEFAULT_MASS_MATRIX = "low_rank"
DEFAULT_RETRY_TARGET_ACCEPTS = (0.95, 0.99)
_PROJECT_ROOT = Path(__file__).resolve().parents[2]
_WORKDIR_PREFIX = "ppl-audit-pymc-"
# A retry is skipped when less than this share of the wall budget is left.
_MIN_RETRY_BUDGET = 0.2


def cache_root() -> Path:
    """Persistent compile caches: ``$PPL_AUDIT_CACHE`` or ``~/.cache/ppl-audit``."""
    configured = os.environ.get("PPL_AUDIT_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "ppl-audit"


def child_environment(workdir: Path) -> dict[str, str]:
    """The whole environment of the child: nothing of the parent's leaks in but BLAS
    tuning variables the machine's administrator set on purpose."""
    cache = cache_root() / "pymc"
    for sub in ("pytensor", "numba", "jax", "matplotlib", "home"):
        (cache / sub).mkdir(parents=True, exist_ok=True)
    env = {
        # gcc/g++ for PyTensor's C backend live in /usr/bin
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(cache / "home"),
        "TMPDIR": str(workdir),
        "LANG": "C.UTF-8",
        "PYTHONPATH": str(_PROJECT_ROOT),
        # Fixed hashing: set iteration order inside graph rewrites cannot vary by run.
        "PYTHONHASHSEED": "0",
        # numba fastmath lets LLVM reassociate differently in code compiled fresh and
        # code loaded from the cache: nutpie's draws for one seed then differed between
        # a cold and a warm cache (kidiq, measured); without it they are identical.
        "PYTENSOR_FLAGS": f"base_compiledir={cache / 'pytensor'},numba__fastmath=False",
        "NUMBA_CACHE_DIR": str(cache / "numba"),
        "MPLCONFIGDIR": str(cache / "matplotlib"),
        "JAX_PLATFORMS": "cpu",
        "JAX_COMPILATION_CACHE_DIR": str(cache / "jax"),
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
        # glibc gives every thread its own 64 MB malloc arena reservation; two arenas
        # keep the address space close to real use, so RLIMIT_AS (the memory limit)
        # stays usable for nutpie (2.3 -> 1.9 GB peak on eight schools) and JAX
        # (2.3 -> 1.2 GB). Measured: all backends fit eight schools under 1.5 GB.
        "MALLOC_ARENA_MAX": "2",
        # Chains are the parallelism; BLAS threads on top would oversubscribe the cores.
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    for name in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        if name in os.environ:
            env[name] = os.environ[name]
    return env


def _available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _check_settings(chains, tune, draws, target_accept, backend, mass_matrix, cores):
    if backend not in BACKENDS:
        raise InvalidRequest(f"unknown NUTS backend {backend!r} (choose from "
                             f"{', '.join(BACKENDS)})")
    if importlib.util.find_spec(backend) is None:
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
             retry_target_accepts: tuple[float, ...] = DEFAULT_RETRY_TARGET_ACCEPTS) -> Fit:
    """Fit a verified PyMC program with NUTS in the sandbox.

    If the fit has divergent transitions, it is repeated with each of
    ``retry_target_accepts`` (higher than ``target_accept``) in turn until one has none,
    within the same wall-clock budget; the attempt with the fewest divergences (the
    later one on ties) is returned and every attempt is listed in
    ``Fit.stats["attempts"]``. Same arguments, same draws.
    """
    _check_settings(chains, tune, draws, target_accept, backend, mass_matrix, cores)
    verify(source)
    job = {"source": source, "data": data, "chains": int(chains), "tune": int(tune),
           "draws": int(draws), "backend": backend, "seed": int(seed),
           "cores": int(cores or min(chains, _available_cores())),
           "mass_matrix": mass_matrix}
    schedule = [float(target_accept)] + [float(t) for t in retry_target_accepts
                                         if t > target_accept]
    job.update(target_accepts=schedule, wall_seconds=float(limits.wall_seconds),
               min_retry_share=_MIN_RETRY_BUDGET)
    summary, arrays, attempts, process = _run_child(job, limits)
    return _make_fit(summary, arrays, job, attempts, process)


def _sweep_stale_workdirs(max_age_seconds: float = 86_400) -> None:
    """Remove working directories a killed parent (SIGKILLed worker) left behind."""
    now = time.time()
    for path in Path(tempfile.gettempdir()).glob(f"{_WORKDIR_PREFIX}*"):
        try:
            if now - path.stat().st_mtime > max_age_seconds:
                shutil.rmtree(path, ignore_errors=True)
        except OSError:
            pass


def _run_child(job: dict, limits: sandbox.Limits) -> tuple[dict, dict, list[dict], dict]:
    """Run the child once (it makes every attempt); return the chosen attempt's summary
    and arrays, the list of attempts and the process figures.

    The chosen attempt has the fewest divergences (the later one on ties). If the child
    is stopped (wall clock, CPU, memory) after at least one attempt finished, the
    finished attempts stand and the stop is recorded as the last attempt.
    """
    _sweep_stale_workdirs()
    workdir = Path(tempfile.mkdtemp(prefix=_WORKDIR_PREFIX))
    try:
        (workdir / JOB_FILE).write_text(json.dumps(job))
        done = sandbox.run([sys.executable, "-m", "workers.pymc_runner.child"],
                           limits=limits, cwd=workdir, env=child_environment(workdir),
                           address_space_limit=True)
        process = {"wall_seconds": round(done.wall_seconds, 3),
                   "cpu_seconds": round(done.cpu_seconds, 3),
                   "max_rss_mb": round(done.max_rss_mb, 1)}
        finished = {int(p.stem.split("-")[1]): json.loads(p.read_text())
                    for p in workdir.glob("attempt-*.json")}
        attempts = [{"target_accept": finished[n]["target_accept"], "number": n,
                     "divergences": finished[n]["stats"]["divergences"],
                     "timings": finished[n]["timings"]} for n in sorted(finished)]
        try:
            _raise_for_failure(done, workdir, limits)
            skipped = json.loads((workdir / SUMMARY_FILE).read_text())["skipped"]
            attempts += [skipped] if skipped else []
        except ResourceLimit as exc:
            if not finished:
                raise
            attempts.append({"target_accept": job["target_accepts"][len(finished)]
                             if len(finished) < len(job["target_accepts"]) else None,
                             "error": exc.to_dict()})
        chosen = min(reversed(attempts[:len(finished)]), key=lambda a: a["divergences"])
        summary = finished[chosen["number"]]
        with np.load(workdir / attempt_file(chosen["number"], "npz"), allow_pickle=False) as npz:
            arrays = {summary["names"][key]: np.asarray(npz[key], dtype=np.float64)
                      for key in summary["names"]}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    for name, values in arrays.items():
        if values.shape[:2] != (job["chains"], job["draws"]):
            raise ProgramRuntimeError(f"{name}: draws shaped {values.shape}, expected "
                                      f"({job['chains']}, {job['draws']}, ...)",
                                      language=LANGUAGE)
    return summary, arrays, attempts, process


def _raise_for_failure(done: sandbox.Completed, workdir: Path, limits: sandbox.Limits):
    if done.returncode == 0:
        return
    if done.returncode == -signal.SIGXCPU:
        # Only RLIMIT_CPU sends SIGXCPU. (sandbox.run compares rusage with the limit, but
        # rusage under-counts the kernel's own CPU clock by a few per cent.)
        raise ResourceLimit(f"stopped after the CPU-time limit of {limits.cpu_seconds:g} s",
                            limit="cpu", language=LANGUAGE,
                            seconds=round(done.cpu_seconds, 3))
    stderr = done.stderr.decode("utf-8", "replace")
    reported = _reported_error(workdir, stderr)
    if done.returncode == EXIT_OUT_OF_MEMORY or (
            done.returncode != EXIT_PROGRAM_ERROR and _looks_like_memory(done, stderr, limits)):
        raise ResourceLimit(f"the PyMC program ran out of memory (limit "
                            f"{limits.memory_mb} MB)", limit="memory", language=LANGUAGE)
    if reported:
        kind = {"refused": ProgramRefused, "load": CompileError,
                "build": CompileError}.get(reported.get("stage"), ProgramRuntimeError)
        raise kind(reported["message"], language=LANGUAGE, line=reported.get("line"))
    tail = " | ".join(stderr.strip().splitlines()[-3:])[-400:]
    raise ProgramRuntimeError(f"the PyMC process failed (exit {done.returncode}): {tail}",
                              language=LANGUAGE)


def _reported_error(workdir: Path, stderr: str) -> dict | None:
    try:
        return json.loads((workdir / ERROR_FILE).read_text())
    except (OSError, ValueError):
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


def _make_fit(summary, arrays, job, attempts, process) -> Fit:
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
    sampler = {"kind": "nuts", "backend": job["backend"], "chains": job["chains"],
               "tune": job["tune"], "draws": job["draws"], "seed": job["seed"],
               "cores": job["cores"], "mass_matrix": job["mass_matrix"],
               "target_accept": summary["target_accept"]}
    return Fit(language=LANGUAGE, draws=draws, divergences=int(stats["divergences"]),
               sampler=sampler, stats=stats, timings=timings,
               versions=summary["versions"], reportable=list(summary["reportable"]))
