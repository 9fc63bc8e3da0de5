"""Fit a LazyPPL program: compile (cached), run the harness in the sandbox, read draws.

The harness protocol (docs/ARCHITECTURE.md) is JSON on stdin and stdout. The binary
runs with an empty environment, in a fresh temporary directory, in its own network
namespace where the kernel allows, under the CPU and wall-clock limits, with GHC's
heap capped by ``+RTS -M`` at ``limits.memory_mb``.

RLIMIT_AS is set only as a loose backstop, to ``2 * memory_mb + 512`` MB: GHC's RTS
reserves its heap's address range up front, starting at 1 TB and halving the request
until ``mmap`` succeeds, so under a tight RLIMIT_AS the heap stops at the largest power
of two that fits (measured: RLIMIT_AS 1.5 GB with ``-M1400m`` died with "out of memory"
at 1 GB), not at the cap asked for. Twice the cap always leaves room for a
power-of-two reservation at least as large as the cap, plus the binary, thread stacks
and C allocations.
"""
from __future__ import annotations

import json
import math
import os
import signal
import time
from typing import Any

import numpy as np

import sandbox
from haskell_bridge.compile import build_program, haskell_process_limits
from haskell_bridge.paths import lazyppl_build
from workers.errors import InvalidRequest, ProgramRuntimeError, ResourceLimit
from workers.fit import MAX_SCALARS, Fit, ReportedNameError, check_reported_names

#: Exit status the harness uses for errors in the user's program or data.
USER_ERROR_EXIT = 3
#: Exit status the harness uses for malformed input (settings it does not accept).
HARNESS_INPUT_EXIT = 2
#: Exit status of a GHC program whose heap passed its +RTS -M cap.
HEAP_EXHAUSTED_EXIT = 251


def fit_lazyppl(source: str, data: dict, *, chains: int, warmup: int, draws: int,
                thin: int, kernel: str, seed: int, limits: sandbox.Limits,
                options: dict[str, Any] | None = None, budget_draws: int | None = None,
                resume: Fit | None = None) -> Fit:
    """Compile ``source`` (cached) and sample its posterior on ``data``.

    ``warmup`` and ``draws`` count iterations per chain (``draws`` kept after thinning
    by ``thin``); ``options`` adds kernel-specific harness fields (e.g. ``mh_p``);
    ``budget_draws`` (default ``draws``) the draws the multi-start searches' budget is
    reckoned from. Returns a :class:`workers.fit.Fit` whose draws map SPEC §2.3 scalar
    names to float64 arrays shaped (chains, draws), with the chains' checkpoints.
    Timings are seconds: ``compile`` (0 when the binary was cached), ``sample`` (the
    harness's own clock), ``run`` (process wall time), ``total``, and ``run_chain`` (the
    runs of these chains so far: what a refit would take).

    ``resume``: an earlier fit of the same program, data, seed and settings with fewer
    draws, whose chains this one continues from their checkpoints (docs/ARCHITECTURE.md,
    "Continued chains"): the harness samples only the draws after them, and the fit
    holds the earlier draws followed by those, exactly the draws of a fresh fit with the
    same ``budget_draws`` (tested), with ``sampler.continued_from`` = the earlier draws.

    Raises ProgramRefused, CompileError, ProgramRuntimeError (exit 3: the harness's
    ``ppl-audit:`` message, e.g. naming a missing data field; or a crash) and
    ResourceLimit (``memory`` when the heap cap was hit; ``timeout``/``cpu``).
    """
    started = time.monotonic()
    _check_settings(chains=chains, warmup=warmup, draws=draws, thin=thin, kernel=kernel,
                    seed=seed)
    budget = draws if budget_draws is None else budget_draws
    request = {"data": data, "seed": seed, "chains": chains, "warmup": warmup,
               "draws": draws, "thin": thin, "kernel": kernel, **(options or {}),
               "budget_draws": budget, "checkpoint": True}
    before = 0
    if resume is not None:
        before = _check_resumable(resume, chains=chains, warmup=warmup, draws=draws,
                                  thin=thin, kernel=kernel, seed=seed, options=options,
                                  budget_draws=budget)
        request["resume"] = resume.checkpoints
    payload = _encode(request)
    program = build_program(source, limits=limits)
    if resume is not None and resume.versions.get("program") != program.key:
        raise ValueError("a fit continues only the chains of its own program")
    rts = rts_options(chains, limits.memory_mb)
    argv = [str(program.path), *rts]
    view = sandbox.View(ro=(str(program.path),), tmp_mb=64)
    try:
        done = sandbox.run(argv, limits=haskell_process_limits(limits), view=view,
                           stdin=payload, env={},
                           max_stdout_bytes=max_output_bytes(chains, draws - before))
    except ResourceLimit as err:
        err.details.setdefault("language", "lazyppl")
        raise
    _raise_for_failure(done, limits)
    output = _decode(done.stdout)
    fit_draws, reportable = _draws_from_output(output, chains)
    checkpoints = [c.get("checkpoint") for c in output["chains"]]
    if not all(isinstance(c, str) for c in checkpoints):
        checkpoints = None  # this fit cannot be continued; a later look refits
    if resume is not None:
        fit_draws = _continued_draws(resume, fit_draws, reportable, draws - before)
    build = lazyppl_build()
    total = time.monotonic() - started
    chain_stats = [{k: v for k, v in c.items() if k not in ("draws", "checkpoint")}
                   for c in output["chains"]]
    # our own figure (set below), not the child's
    run_chain = done.wall_seconds + (resume.timings.get("run_chain", 0.0) if resume else 0.0)
    return Fit(
        language="lazyppl",
        draws=fit_draws,
        divergences=0,
        sampler={"kernel": output.get("kernel", kernel), "chains": chains,
                 "warmup": output.get("warmup", warmup), "draws": output.get("draws", draws),
                 "thin": output.get("thin", thin), "seed": seed, "rts": " ".join(rts),
                 **(options or {}), "budget_draws": budget,
                 **({"continued_from": before} if resume is not None else {})},
        # max_rss_mb is the sandbox's wait4 figure: an upper bound, since Linux keeps the
        # forking (Python) process's RSS high-water mark across execve.
        stats={"chains": chain_stats, "compile_cached": program.cached,
               "sandbox": done.sandbox,
               "max_rss_mb": round(done.max_rss_mb, 1),
               "cpu_seconds": round(done.cpu_seconds, 3),
               "checkpoint_bytes": sum(len(c) for c in checkpoints or [])},
        timings={"compile": round(program.seconds, 3),
                 "sample": output.get("seconds", done.wall_seconds),
                 "run": round(done.wall_seconds, 3), "total": round(total, 3),
                 "run_chain": round(run_chain, 3)},
        versions={"ghc": build.ghc_version, "lazyppl": build.version,
                  "lazyppl_build": build.hash, "program": program.key},
        reportable=reportable,
        checkpoints=checkpoints,
    )


def resumable(fit: Fit | None, *, draws: int) -> bool:
    """Whether ``fit`` is a LazyPPL fit with checkpoints and fewer than ``draws`` draws
    (the settings are checked when it is resumed)."""
    return (fit is not None and fit.language == "lazyppl" and bool(fit.checkpoints)
            and 0 < fit.n_draws < draws)


def _check_resumable(fit: Fit, **settings: Any) -> int:
    """The draws ``fit`` holds, after checking that a fit with ``settings`` may continue
    its chains: same chains, warm-up, thinning, kernel and its options, seed and budget
    draws, checkpoints for every chain, fewer draws than asked. The harness checks the
    checkpoints against these again (and against the program)."""
    s = fit.sampler
    options = settings.pop("options") or {}
    draws = settings.pop("draws")
    same = all(s.get(k) == v for k, v in settings.items()) and all(
        s.get(k) == v for k, v in options.items())
    if not (same and resumable(fit, draws=draws)
            and len(fit.checkpoints or []) == settings["chains"]):
        raise ValueError("this fit's chains cannot be continued with these settings")
    return fit.n_draws


def _continued_draws(earlier: Fit, later: dict[str, np.ndarray], reportable: list[str],
                     count: int) -> dict[str, np.ndarray]:
    """The earlier fit's draws followed by the continuation's, per scalar name."""
    if list(later) != list(earlier.draws) or reportable != list(earlier.reportable):
        raise ProgramRuntimeError("the continued LazyPPL chains report other parameters "
                                  "than before", language="lazyppl")
    returned = next(iter(later.values())).shape[1]
    if returned != count:
        raise ProgramRuntimeError(f"the continued LazyPPL chains returned {returned} draws, "
                                  f"expected {count}", language="lazyppl")
    return {name: np.ascontiguousarray(np.concatenate([earlier.draws[name], later[name]], axis=1))
            for name in later}


#: Bytes of JSON per reported number (``-1.2345678901234567e-100,``) and per draw row.
_BYTES_PER_NUMBER = 26
_FIXED_OUTPUT_BYTES = 4 << 20
#: Most bytes of one chain's checkpoint (its state and frozen tuning as text): the
#: harness's default ``checkpoint_limit``, beyond which it leaves the checkpoint out (that
#: fit is refitted at a later look, not continued).
MAX_CHECKPOINT_BYTES = 8 << 20


def max_output_bytes(chains: int, draws: int) -> int:
    """The most harness output an honest run can produce, bytes: every chain's draws of
    up to :data:`MAX_SCALARS` numbers and its checkpoint, plus names, statistics and
    messages (4 MB). Beyond it the run is stopped (``resource_limit: output``)."""
    per_draw = MAX_SCALARS * _BYTES_PER_NUMBER
    return (chains * (draws * per_draw + MAX_CHECKPOINT_BYTES) + MAX_SCALARS * 64
            + _FIXED_OUTPUT_BYTES)


def rts_options(chains: int, memory_mb: int) -> list[str]:
    """GHC runtime options for a harness run:
    ``+RTS -N<t> -qg -A16m -n1m -M<memory_mb>m -RTS``.

    One capability per chain up to the number of cores. ``-qg`` (sequential GC): the
    chains share no data, and on a loaded 2-core machine the parallel GC's spinning
    cost 2.5-4x CPU and wall time (measured: eight schools, mh kernel, 4 chains,
    1.5-2.5 s CPU with parallel GC vs 0.55-0.6 s with -qg; default kernel 0.26-1.0 s vs
    0.18-0.2 s). ``-A16m -n1m`` (a 16 MB allocation area per capability, handed out in
    1 MB chunks): with the default 1 MB area a sequential collection stops both chains'
    threads about 10,000 times a second on large models; measured with ``+RTS -s`` at
    audit settings (4 chains, 2 cores, alternating runs): hier100 GC 9.8-12.3 s of
    36-43 s wall with -A1m, 1.7-1.9 s of 24.5-26 s with ``-A16m -n1m``; diamonds
    2.4-2.6 s -> 1.9-2.2 s; eight schools, kidiq, hier6, gp_pois_regr within noise
    (kidiq +0.07 s). ``-A16m`` alone was slower than with ``-n1m`` on diamonds, and
    ``-A64m`` raised mutator time (the area no longer fits the cache).
    """
    threads = max(1, min(chains, os.cpu_count() or 1))
    return ["+RTS", f"-N{threads}", "-qg", "-A16m", "-n1m", f"-M{memory_mb}m", "-RTS"]


def _check_settings(**s: Any) -> None:
    for name in ("chains", "draws", "thin"):
        if not isinstance(s[name], int) or s[name] < 1:
            raise InvalidRequest(f"{name} must be a positive integer, got {s[name]!r}")
    if not isinstance(s["warmup"], int) or s["warmup"] < 0:
        raise InvalidRequest(f"warmup must be a non-negative integer, got {s['warmup']!r}")
    if not isinstance(s["seed"], int) or not 0 <= s["seed"] < 2**63:
        raise InvalidRequest(f"seed must be an integer in [0, 2^63), got {s['seed']!r}")
    if not isinstance(s["kernel"], str) or not s["kernel"]:
        raise InvalidRequest("kernel must be a non-empty string")


def _encode(request: dict) -> bytes:
    def plain(value: Any) -> Any:
        if isinstance(value, np.ndarray):
            return value.tolist()
        if isinstance(value, np.generic):
            return value.item()
        raise TypeError(f"{type(value).__name__} is not JSON data")

    try:
        return json.dumps(request, default=plain, allow_nan=False).encode()
    except (TypeError, ValueError) as err:
        raise InvalidRequest(f"the data cannot be sent to the LazyPPL program: {err}") from err


def _raise_for_failure(done: sandbox.Completed, limits: sandbox.Limits) -> None:
    if done.returncode == 0:
        return
    stderr = done.stderr.decode("utf-8", "replace")
    if done.returncode == USER_ERROR_EXIT:
        lines = [ln for ln in stderr.splitlines() if ln.startswith("ppl-audit: ")]
        message = lines[-1][len("ppl-audit: "):] if lines else stderr.strip()[-2000:]
        raise ProgramRuntimeError(message or "the LazyPPL program failed",
                                  language="lazyppl")
    if done.returncode == HARNESS_INPUT_EXIT and "ppl-audit: " in stderr:
        # e.g. an unknown kernel name: the request's settings, not the program, are wrong
        raise InvalidRequest(stderr.split("ppl-audit: ")[-1].strip())
    if (done.returncode == HEAP_EXHAUSTED_EXIT or "Heap exhausted" in stderr
            or "Stack space overflow" in stderr or "out of memory" in stderr):
        raise ResourceLimit(
            f"the LazyPPL program exceeded the memory cap of {limits.memory_mb} MB",
            limit="memory", language="lazyppl", max_rss_mb=round(done.max_rss_mb, 1))
    if done.returncode == -signal.SIGKILL:
        raise ResourceLimit("the LazyPPL program was killed (out of memory)",
                            limit="memory", language="lazyppl")
    tail = "\n".join(stderr.strip().splitlines()[-20:])
    raise ProgramRuntimeError(
        f"the LazyPPL program crashed (exit status {done.returncode}): {tail}",
        language="lazyppl")


def _decode(stdout: bytes) -> dict:
    try:
        output = json.loads(stdout)
    except ValueError as err:
        raise ProgramRuntimeError(f"unreadable output from the LazyPPL harness: {err}",
                                  language="lazyppl") from err
    if not isinstance(output, dict) or not isinstance(output.get("chains"), list):
        raise ProgramRuntimeError("the LazyPPL harness output has no chains",
                                  language="lazyppl")
    return output


def _draws_from_output(output: dict, chains: int) -> tuple[dict[str, np.ndarray], list[str]]:
    """(chains, draws) arrays per scalar name, and the reported base names in order.

    The names are checked against SPEC §2.3 (workers.fit.check_reported_names: strict
    grammar, dense 1-based indices, at most MAX_SCALARS) before anything else reads
    them, so a ``scalar "x]"`` is an error naming it, not a failure further on.
    """
    try:
        layout = check_reported_names(output.get("names"), output.get("shapes"))
    except ReportedNameError as err:
        raise ProgramRuntimeError(f"the LazyPPL program reports an invalid parameter "
                                  f"name: {err}", language="lazyppl", name=err.name) from None
    names = output["names"]
    if len(output["chains"]) != chains:
        raise ProgramRuntimeError(
            f"the harness returned {len(output['chains'])} chains, expected {chains}",
            language="lazyppl")
    per_chain = []
    for chain in output["chains"]:
        try:
            rows = [[math.nan if v is None else v for v in row] for row in chain["draws"]]
            arr = np.asarray(rows, dtype=np.float64).reshape(len(rows), len(names))
        except (TypeError, ValueError, KeyError) as err:
            raise ProgramRuntimeError(f"malformed draws from the LazyPPL harness: {err}",
                                      language="lazyppl") from None
        per_chain.append(arr)
    lengths = {a.shape[0] for a in per_chain}
    if len(lengths) != 1:
        raise ProgramRuntimeError(f"chains of unequal length {sorted(lengths)}",
                                  language="lazyppl")
    stacked = np.stack(per_chain)  # (chains, draws, names)
    draws = {name: np.ascontiguousarray(stacked[:, :, i]) for i, name in enumerate(names)}
    return draws, list(layout)
