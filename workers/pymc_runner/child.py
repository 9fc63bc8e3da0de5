"""The sandboxed PyMC child: ``python -m workers.pymc_runner.child INBOX``.

One child serves the PyMC fits of exactly one audit (a *session*, see
``session.py``). It imports PyMC once, then waits for requests the parent writes into
``INBOX`` (mounted read-only for the child): ``request-0.json``, ``request-1.json``,
... until ``end`` appears. Each request is one fit::

    {"source": "...", "data": {...}, "profile": "strict", "chains": 4, "tune": 1000,
     "draws": 1000, "backend": "nutpie", "seed": 1, "cores": 2, "mass_matrix": "diag",
     "target_accepts": [0.8, 0.95, 0.99], "wall_seconds": 900, "min_retry_share": 0.2,
     "draw_cap": 50000}

The program is built and compiled once per (source, profile, backend, data) and kept:
later requests with the same program and data (more draws for a later look, another
seed) only sample. With ``draw_cap`` (nutpie only), an attempt with the same seed and
settings as one of an earlier request extends that attempt's chains instead of sampling
them again (``backends._Extendable``): same draws, without the warm-up and the earlier
draws. Within a request the model is sampled with each of
``target_accepts`` in turn until an attempt has no divergent transition; a retry is
skipped when less than ``min_retry_share`` of ``wall_seconds`` is left. While no request
is waiting when the imports are done, the child compiles a tiny model of its own first
(numba's one-off start-up, ~2.5 s, is then paid before the audit arrives).

Output of request N, in the working directory, each name prefixed ``fit-N-``:

- per attempt K (0, 1, ...), written as soon as it is done: ``attempt-K.npz`` (float64
  arrays ``v0, v1, ...`` shaped (chains, draws, *shape)) and ``attempt-K.json``
  (``{"names": {"v0": "mu", ...}, "reportable": [...], "shapes": {...},
  "stats": {divergences, per-chain sampler statistics, session}, "timings": {seconds},
  "versions": {...}, "backend": ..., "target_accept": ...}``);
- last, ``summary.json``: ``{"skipped": null}``, or ``{"skipped": {"target_accept",
  "skipped"}}`` when a retry was skipped for lack of time; or, when the program failed,
  ``error.json`` with ``{"stage", "message", "line"}`` where stage is ``load``
  (top-level code), ``build`` (``model(data)`` and the checks on the model it
  returned), ``refused`` (a construct outside the profile) or ``sample``. The child
  then serves the next request.

Exit 0 after ``end``; on memory exhaustion exit 4 (``error.json`` of the request and one
``ppl-audit: <message>`` line on stderr). Any other non-zero exit is a crash of ours.
"""
from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path

from workers.pymc_runner import choice as choices
from workers.pymc_runner.protocol import (END_FILE, ERROR_FILE, EXIT_OUT_OF_MEMORY,
                                          EXIT_PROGRAM_ERROR, PROGRAM_FILENAME,
                                          SUMMARY_FILE, attempt_file, output_file,
                                          request_file)


class ProgramFailure(Exception):
    def __init__(self, stage: str, message: str, line: int | None = None,
                 memory: bool = False) -> None:
        super().__init__(message)
        self.stage, self.message, self.line, self.memory = stage, message, line, memory


def _program_line(exc: BaseException) -> int | None:
    """Line of the innermost traceback frame inside the program, if any."""
    line = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename == PROGRAM_FILENAME:
            line = frame.lineno
    if isinstance(exc, SyntaxError) and exc.filename == PROGRAM_FILENAME:
        line = exc.lineno
    return line


def _failure(stage: str, what: str, exc: BaseException) -> ProgramFailure:
    text = str(exc).strip().splitlines()
    detail = f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
    return ProgramFailure(stage, f"{what}: {detail}"[:500], _program_line(exc),
                          memory=isinstance(exc, MemoryError))


_LIBRARY_ROOTS = ("numpy", "pymc", "pytensor", "scipy")


def _module_view(path: str, profile):
    """What ``import <path>`` gives the program: a namespace holding only the profile's
    members of ``path`` and views of its allowed sub-modules, never the module itself.

    It has no ``__name__``, so ``from pymc import summary`` cannot fall back to
    ``sys.modules["pymc.summary"]`` either."""
    import importlib
    import types

    real = importlib.import_module(path)
    members = {name: getattr(real, name) for name in profile.modules.get(path, ())
               if hasattr(real, name)}
    for sub in profile.submodules(path):
        members[sub] = _module_view(f"{path}.{sub}", profile)
    return types.SimpleNamespace(**members)


def _parent_view(package: str, profile):
    """``pytensor`` / ``scipy`` as a program sees them: only their allowed sub-modules."""
    import types

    return types.SimpleNamespace(**{sub: _module_view(f"{package}.{sub}", profile)
                                    for sub in profile.submodules(package)})


def _restricted_builtins(profile=None) -> dict:
    """The program's builtins: the profile's allow-list and a guarded ``__import__``."""
    import builtins
    import importlib

    from workers.pymc_runner.profile import STRICT

    profile = profile or STRICT

    def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
        # Defence in depth behind the verifier. A program's import statement gets views
        # holding only allow-listed members (the member allow-list, at run time).
        # C code called straight from the program (``ndarray.mean`` importing
        # ``numpy._core._methods``) imports through the *caller's* builtins, i.e. this
        # function; CPython's PyImport_Import discards what __import__ returns and reads
        # sys.modules, so such imports run but hand the program nothing (None).
        fromlist = tuple(fromlist or ())
        if level != 0:
            raise ImportError("relative imports are not allowed")
        root = name.split(".")[0]
        if name in profile.modules:
            if fromlist or "." not in name:
                return _module_view(name, profile)
            # `import pytensor.tensor as pt` binds getattr(<pytensor>, "tensor")
            return _parent_view(root, profile)
        if name in ("pytensor", "scipy") and fromlist and all(
                f"{name}.{item}" in profile.modules for item in fromlist):
            return _parent_view(name, profile)
        if root in _LIBRARY_ROOTS:
            importlib.import_module(name)
            return None
        raise ImportError(f"import of {name!r} is not allowed")

    table = {name: getattr(builtins, name) for name in profile.builtins}
    table["__import__"] = guarded_import
    return table


def build_model(source: str, data: dict, profile_name: str = "strict"):
    """Verify and execute the program under the named profile, call ``model(data)``
    (or ``make_model(data)``); return the checked model."""
    import pymc as pm

    from workers.errors import AuditError
    from workers.pymc_runner.profile import get
    from workers.pymc_runner.verifier import verify

    profile = get(profile_name)
    try:
        verify(source, profile)
    except AuditError as exc:
        raise ProgramFailure("refused", exc.message, exc.details.get("line")) from None
    namespace = {"__builtins__": _restricted_builtins(profile),
                 "__name__": "ppl_audit_program"}
    try:
        exec(compile(source, PROGRAM_FILENAME, "exec"), namespace)  # noqa: S102 - verified
    except Exception as exc:
        raise _failure("load", "the program failed while loading", exc) from None
    # SPEC §2.1: `model(data)`, or `make_model(data, prior_only=False)` (the verifier
    # checked that one of them is a top-level function)
    entry = namespace.get("model") or namespace.get("make_model")
    try:
        model = entry(data)
    except Exception as exc:
        raise _failure("build", "model(data) failed", exc) from None
    if not isinstance(model, pm.Model):
        raise ProgramFailure("build", f"model(data) returned {type(model).__name__}, "
                                      "not a pm.Model")
    check_model(model, profile)
    return model


def check_model(model, profile=None) -> None:
    """Run-time mirror of the verifier on the built model: only genuine random variables
    add density, no likelihood is rescaled, no name can pass for another's scalar."""
    from workers.pymc_runner.profile import SCALAR_NAME_CHARACTERS, STRICT

    profile = profile or STRICT
    if model.potentials and not profile.allow_potentials:
        raise ProgramFailure("refused", f"the model contains a Potential, which the "
                                        f"{profile.name} profile does not allow")
    for rv in model.basic_RVs:
        op_module = type(rv.owner.op).__module__
        if op_module.startswith(("pymc.distributions.custom", "pymc.distributions.simulator")) \
                and not profile.allow_custom_densities:
            raise ProgramFailure("refused", f"{rv.name} is a custom or simulator "
                                            f"distribution, which the {profile.name} "
                                            "profile does not allow")
        if op_module.startswith("pymc.distributions.simulator"):
            raise ProgramFailure("refused", f"{rv.name} is a simulator distribution: a "
                                            "likelihood-free model NUTS cannot audit")
        if op_module.startswith("pymc.variational.minibatch_rv") and profile.refuse_total_size:
            raise ProgramFailure("refused", f"{rv.name} has a total_size: it rescales the "
                                            "likelihood")
    if profile.refuse_scalar_like_names:
        for name in model.named_vars:
            if SCALAR_NAME_CHARACTERS.search(name):
                raise ProgramFailure("refused", f"variable name {name!r} is not allowed: a "
                                     "name with [ or ] is, or collides with, a SPEC §2.3 "
                                     "scalar name of another variable")
    if not model.free_RVs:
        raise ProgramFailure("build", "the model has no free random variables to sample")
    for rv in model.free_RVs:
        if rv.type.dtype.startswith(("int", "uint", "bool")):
            raise ProgramFailure("build", f"{rv.name} is discrete: NUTS samples only "
                                          "continuous parameters")


def _versions(backend: str) -> dict:
    import arviz
    import numpy
    import pymc
    import pytensor

    versions = {"python": sys.version.split()[0], "pymc": pymc.__version__,
                "pytensor": pytensor.__version__, "arviz": arviz.__version__,
                "numpy": numpy.__version__}
    modules = {"nutpie": ["nutpie", "numba"], "numpyro": ["numpyro", "jax"],
               "blackjax": ["blackjax", "jax"]}.get(backend, [])
    for name in modules:
        versions[name] = getattr(sys.modules.get(name), "__version__", None)
    if backend == "nutpie":
        from workers.pymc_runner import nutpie_wrappers

        versions["nutpie_wrappers"] = nutpie_wrappers.installed()
    return versions


def _memory_peaks() -> dict:
    """Peak virtual size and resident set of this process (MB), for choosing limits."""
    peaks = {}
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmPeak", "VmHWM"):
                peaks[{"VmPeak": "virtual", "VmHWM": "resident"}[key]] = round(
                    int(value.split()[0]) / 1024, 1)
    except OSError:
        pass
    return peaks


#: How often an idle child looks for the next request, seconds.
_POLL_SECONDS = 0.01


class Session:
    """This child's state: when it started and what it has compiled."""

    def __init__(self) -> None:
        self.import_seconds = 0.0
        self.prewarm_seconds = 0.0
        self.fits = 0
        self.compiles = 0
        # (source, profile, backend, data) -> (model, sampler, reportable names, the
    # backend choice when the job asked for "auto")
        self.models: dict[str, tuple] = {}


def _model_key(job: dict) -> str:
    return json.dumps([job["source"], job.get("profile", "strict"), job["backend"],
                       job["data"]], sort_keys=True, separators=(",", ":"))


def _prewarm_numba() -> None:
    """numba's start-up (LLVM, type inference machinery), for nutpie."""
    import nutpie
    import numpy as np
    import pymc as pm

    from workers.pymc_runner import nutpie_wrappers

    # with our callbacks, compiled even if the cache holds them: the point is numba
    options = {"callbacks_cache": False} if nutpie_wrappers.install() == "ppl-audit" else {}
    with pm.Model() as tiny:
        x = pm.Normal("x", 0.0, 1.0)
        pm.Normal("y", x, 1.0, observed=np.zeros(2))
    nutpie.compile_pymc_model(tiny, backend="numba", **options)


def _prewarm_jax() -> None:
    """JAX's and NumPyro's imports and XLA's first compile, for the JAX backends, with
    one XLA host device per chain of the default settings (``PPL_AUDIT_XLA_DEVICES``;
    a request for more chains than devices draws them in turn)."""
    import numpy as np
    import pymc as pm

    chains = int(os.environ.get("PPL_AUDIT_XLA_DEVICES", "4"))
    _configure_backend({"backend": "numpyro", "chains": chains})
    from pymc.sampling.jax import sample_jax_nuts

    with pm.Model() as tiny:
        x = pm.Normal("x", 0.0, 1.0)
        pm.Normal("y", x, 1.0, observed=np.zeros(2))
    sample_jax_nuts(draws=10, tune=10, chains=chains, model=tiny, nuts_sampler="numpyro",
                    chain_method="parallel", progressbar=False,
                    compute_convergence_checks=False, idata_kwargs={"log_likelihood": False})


#: What ``PPL_AUDIT_PREWARM`` may name (runner.child_environment sets it from the
#: default backend), and the package each needs.
_PREWARMS = {"jax": (_prewarm_jax, "numpyro"), "numba": (_prewarm_numba, "nutpie")}


def _prewarm(waiting) -> float:
    """Warm what the default backend compiles with (tiny models of ours), in the order
    of ``PPL_AUDIT_PREWARM``, while ``waiting()`` says no request has arrived: those
    one-off start-up costs are then paid before the audit's program arrives."""
    import importlib.util

    begun = time.perf_counter()
    for name in os.environ.get("PPL_AUDIT_PREWARM", "numba").split(","):
        warm, package = _PREWARMS.get(name.strip(), (None, None))
        if warm is None or importlib.util.find_spec(package) is None or waiting():
            continue
        warm()
    return time.perf_counter() - begun


def _model_for(job: dict, key: str, session: Session, timings: dict):
    """The built model, its sampler and names for this request (``key``:
    ``_model_key(job)``): from the session when the same program already ran on the same
    data, else built (and compiled) now."""
    from workers.pymc_runner import backends

    if key in session.models:
        timings["build"] = 0.0
        return session.models[key], False
    t = time.perf_counter()
    model = build_model(job["source"], job["data"], job.get("profile", "strict"))
    timings["build"] = time.perf_counter() - t
    choice = None
    backend = job["backend"]
    if backend == "auto":
        size = choices.model_size(model)
        choice = {**choices.choose(size, "auto", "auto"), "size": size}
        backend = choice["backend"]
    _keep(session, key, model, backend, backends.reportable_names(model), choice)
    return session.models[key], True


def _keep(session: Session, key: str, model, backend: str, names: list[str],
          choice: dict | None) -> None:
    """Compile ``model``'s sampler for ``backend`` and keep it in the session under
    ``key`` (counted in ``session.compiles``)."""
    from workers.pymc_runner import backends

    try:
        run_one = backends.sampler(model, backend)
    except MemoryError as exc:
        raise _failure("sample", "out of memory while compiling", exc) from None
    except Exception as exc:
        raise _failure("sample", "compiling the model failed", exc) from None
    session.compiles += 1
    session.models[key] = (model, run_one, names, choice)


def _fall_back(key: str, session: Session, choice: dict, fallback: dict):
    """Replace an automatically chosen JAX sampler that failed (``choice.after_attempt``)
    by what ``fallback`` names, for this request and every later one on the same program
    and data (``key``): the same compiled sampler with another mass matrix, or nutpie
    (compiled now). Returns the new (sampler, choice); ``choice["fallbacks"]`` lists
    every fallback so far, in order."""
    model, run_one, names, _ = session.models[key]
    choice = {**choice, "backend": fallback["to"], "mass_matrix": fallback["mass_matrix"],
              "fallbacks": [*choice.get("fallbacks", []), fallback]}
    if fallback["to"] == fallback["from"]:
        session.models[key] = (model, run_one, names, choice)
    else:
        _keep(session, key, model, fallback["to"], names, choice)
    return session.models[key][1], choice


def run(job: dict, out, session: Session) -> None:
    """Serve one request: build or reuse the model, sample it, write the attempts
    (``out(name)`` is the path of the request's output ``name``)."""
    import numpy as np

    from workers.pymc_runner import backends

    started = time.perf_counter()
    cpu_started = _cpu_seconds()
    number = session.fits
    session.fits += 1
    first = number == 0
    timings = {"import": session.import_seconds if first else 0.0,
               "prewarm": session.prewarm_seconds if first else 0.0}
    key = _model_key(job)
    (model, run_one, names, choice), compiled_now = _model_for(job, key, session, timings)
    if choice is not None:  # backend "auto": sample with what was chosen
        job = {**job, "backend": choice["backend"], "mass_matrix": choice["mass_matrix"]}
    _configure_backend(job)
    info = {"fit": number, "compiled": compiled_now, "compiles": session.compiles}
    accepts = [float(a) for a in job.get("target_accepts") or [job["target_accept"]]]
    wall = job.get("wall_seconds")
    min_share = float(job.get("min_retry_share", 0.0))
    skipped = None
    keys = {f"v{i}": name for i, name in enumerate(names)}
    # fallbacks of a requested backend (its mass matrix only: choice.diagonal_retry);
    # an automatic choice keeps its own in choice["fallbacks"]
    requested_fallbacks: list[dict] = []
    attempt = position = 0  # attempts written; index into accepts
    while position < len(accepts):
        accept = accepts[position]
        if attempt and wall and wall - (time.perf_counter() - started) < min_share * wall:
            skipped = {"target_accept": accept, "skipped": "wall-clock budget spent"}
            break
        try:
            sampled = run_one(accept, job)
        except MemoryError as exc:
            raise _failure("sample", "out of memory while sampling", exc) from None
        except Exception as exc:
            raise _failure("sample", "sampling failed", exc) from None
        timings["compile"] = sampled.compile_seconds
        timings["sample"] = sampled.sample_seconds
        arrays = backends.posterior_arrays(sampled.idata, names)
        stats = backends.sampler_stats(sampled.idata)
        stats["session"] = dict(info, attempt_compiled=sampled.compile_seconds > 0)
        if sampled.start_retries is not None:
            stats["start_retries"] = sampled.start_retries
        if sampled.callbacks_cached is not None:
            stats["session"]["callbacks_cached"] = sampled.callbacks_cached
        if sampled.sample_chain_seconds is not None:  # extendable chains (draw_cap)
            stats["session"].update(continued_from=sampled.continued_from,
                                    sampled_ahead=sampled.sampled_ahead,
                                    threads=sampled.threads)
            timings["sample_chain"] = sampled.sample_chain_seconds
        timings["total"] = time.perf_counter() - started + timings["import"] + timings["prewarm"]
        timings["cpu"] = _cpu_seconds() - cpu_started
        summary = {
            "names": keys,
            "reportable": names,
            "shapes": {name: list(arrays[name].shape[2:]) for name in names},
            "stats": stats,
            "timings": {k: round(v, 4) for k, v in timings.items()},
            "versions": _versions(job["backend"]),
            "backend": sampled.backend or job["backend"],
            "mass_matrix": job["mass_matrix"],
            "fallbacks": list(requested_fallbacks),
            "memory_mb": _memory_peaks(),
            "target_accept": accept,
            "position": position,
            "initialisation": sampled.initialisation,
            "backend_choice": choice,
        }
        # each attempt is on disk as soon as it is done: if a later retry is stopped by
        # the wall clock, the parent still has this one
        _publish(out(attempt_file(attempt, "npz")),
                 lambda f: np.savez(f, **{key: arrays[name] for key, name in keys.items()}))
        _publish(out(attempt_file(attempt, "json")),
                 lambda f: f.write(json.dumps(summary).encode()))
        attempt += 1
        timings = {"import": 0.0, "prewarm": 0.0, "build": 0.0}
        following, fallback = choices.after_attempt(
            stats, job["draws"], position, len(accepts), choice,
            {"backend": job["backend"], "mass_matrix": job["mass_matrix"]})
        if fallback is not None and choice is None:
            # a requested backend: the same compiled sampler, another mass matrix, for
            # this fit only (a later fit starts again from the requested one)
            requested_fallbacks.append(fallback)
            job = {**job, "mass_matrix": fallback["mass_matrix"]}
        elif fallback is not None:  # an automatic choice that failed: the next one takes over
            compiles = session.compiles
            run_one, choice = _fall_back(key, session, choice, fallback)
            info = dict(info, compiled=info["compiled"] or session.compiles > compiles,
                        compiles=session.compiles)
            job = {**job, "backend": choice["backend"], "mass_matrix": choice["mass_matrix"]}
        if following is None:
            later = choices.for_later_fits(stats, choice)
            if later is not None:  # this fit stands; the next ones use another sampler
                _fall_back(key, session, choice, later)
            break
        position = following
    _publish(out(SUMMARY_FILE), lambda f: f.write(json.dumps({"skipped": skipped}).encode()))


def serve(inbox: Path, workdir: Path) -> int:
    """Import PyMC, maybe pre-warm, then serve requests until ``end``."""
    session = Session()
    begun = time.perf_counter()
    import numpy  # noqa: F401
    import pymc  # noqa: F401  (timed: the bulk of start-up)

    from workers.pymc_runner import backends  # noqa: F401

    session.import_seconds = time.perf_counter() - begun
    session.prewarm_seconds = _prewarm(lambda: (inbox / request_file(0)).exists())
    number = 0
    while True:
        request = inbox / request_file(number)
        if request.exists():
            job = json.loads(request.read_text())
            def out(name: str, number=number) -> Path:
                return workdir / output_file(number, name)

            try:
                run(job, out, session)
            except ProgramFailure as failure:
                code = _report(out, failure)
                if failure.memory:
                    return code
            except MemoryError as exc:
                return _report(out, _failure("sample", "out of memory", exc))
            number += 1
            continue
        if (inbox / END_FILE).exists():
            return 0
        time.sleep(_POLL_SECONDS)


def _configure_backend(job: dict) -> None:
    if job["backend"] in ("numpyro", "blackjax") and "jax" not in sys.modules:
        # One XLA host device per chain so chain_method="parallel" runs them as threads
        # (read when JAX is first imported), and no Eigen thread pool inside the ops:
        # with it a NumPyro child once blocked for 870 s with its CPU time flat (the
        # corpus run of session 12, gp_pois_regr), the wedge other JAX users report
        # (PyAutoFit #1528) and that this flag removes; our JAX models are the small ones
        # (choice.is_large), whose ops gain nothing from intra-op threads.
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " "
                                   f"--xla_force_host_platform_device_count={job['chains']}"
                                   " --xla_cpu_multi_thread_eigen=false")


#: Stack reserved for each thread this child starts without asking for a size. glibc's
#: default is RLIMIT_STACK (8 MB), and JAX starts 216 threads on this 2-core machine
#: (100 of them XLA's Eigen pool): 1.7 GB of address space under RLIMIT_AS for stacks
#: that use a few kilobytes. 2 MB is what Rust gives its threads (nutpie's).
THREAD_STACK_BYTES = 2 * 1024 * 1024


def _small_thread_stacks() -> bool:
    """Make THREAD_STACK_BYTES glibc's default thread stack for this process (the main
    thread keeps its own). Measured on auto's worst case (NumPyro's warm-up, then numba
    and a nutpie fit in one child): 3.04 -> 2.39 GB of address space, same resident set.
    Not a protection (RLIMIT_AS still caps memory): False if glibc refuses."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    attr = ctypes.create_string_buffer(128)  # pthread_attr_t: 56 bytes on x86-64 glibc
    if libc.pthread_attr_init(attr) != 0:
        return False
    try:
        return (libc.pthread_attr_setstacksize(attr, ctypes.c_size_t(THREAD_STACK_BYTES)) == 0
                and libc.pthread_setattr_default_np(attr) == 0)
    finally:
        libc.pthread_attr_destroy(attr)


def _publish(path: Path, write) -> None:
    """Write a file under a temporary name, then rename it into place."""
    staged = path.with_name(path.name + ".part")
    with open(staged, "wb") as f:
        write(f)
    os.replace(staged, path)


def _cpu_seconds() -> float:
    """CPU time of this process and its reaped children (pm.sample's chain processes)."""
    import resource

    own, kids = (resource.getrusage(resource.RUSAGE_SELF),
                 resource.getrusage(resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _report(out, failure: ProgramFailure) -> int:
    payload = {"stage": failure.stage, "message": failure.message, "line": failure.line,
               "memory": failure.memory}
    _publish(out(ERROR_FILE), lambda f: f.write(json.dumps(payload).encode()))
    where = f" (line {failure.line})" if failure.line else ""
    one_line = " ".join(failure.message.split())
    sys.stderr.write(f"ppl-audit: {one_line}{where}\n")
    sys.stderr.flush()
    return EXIT_OUT_OF_MEMORY if failure.memory else EXIT_PROGRAM_ERROR


def main() -> int:
    import logging
    import warnings

    _small_thread_stacks()  # before any library starts a thread
    # Library chatter is not the program's output; real problems surface as exceptions.
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    logging.basicConfig(level=logging.WARNING)
    return serve(Path(sys.argv[1]), Path.cwd())


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter finalisation: sampler thread pools (nutpie, XLA) torn down during
    # shutdown have segfaulted after a clean report; the outputs are already on disk.
    os._exit(code)
