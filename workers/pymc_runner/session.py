"""A PyMC session: one sandboxed child that serves the PyMC fits of exactly one audit.

The child imports PyMC once and keeps every model it has compiled, so the scopes, looks
and divergence retries of one audit pay for the imports once and for each (program,
data) compile once; a later look with more draws, or another seed, only samples.

Isolation between audits is the process boundary: a session serves one audit (or one
scope of it, in the service) and is then closed; two audits' programs never share a
process, a writable file or memory. What the child may touch:

- its working directory (writable, the child's own: a fresh private copy of the
  shared PyTensor compile cache, and its outputs ``fit-N-*``), discarded on close.
  Nothing it compiles reaches the shared cache unless the session is ``trusted_cache``
  (our own programs only, ``ppl-audit warm-cache``);
- its inbox, read-only: the parent writes ``request-N.json`` there (and ``end``).

The parent reads the child's outputs without following symlinks, checks their shapes,
and enforces each fit's wall clock itself (killing the whole child, which is then
restarted for the next fit). CPU time and address space are rlimits of the child.

    with PymcSession(limits) as session:
        fit = session.fit(source, data, draws=1000, seed=1)
        more = session.fit(source, data, draws=4000, seed=1)   # no compile
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

import sandbox
from workers.errors import ProgramRuntimeError, ResourceLimit
from workers.fit import Fit
from workers.pymc_runner import choice as choices
from workers.pymc_runner import profile as profiles
from workers.pymc_runner import runner
from workers.pymc_runner.protocol import (END_FILE, ERROR_FILE, SUMMARY_FILE,
                                          attempt_file, output_file, request_file)
from workers.pymc_runner.verifier import verify

LANGUAGE = runner.LANGUAGE
#: How long a closing child may take to see ``end`` and exit before it is killed (a
#: trusted session's child may first be finishing its pre-warm compile, which it keeps).
_CLOSE_SECONDS = 2.0
_CLOSE_TRUSTED_SECONDS = 120.0
_POLL_SECONDS = 0.01


def limits_for(settings) -> sandbox.Limits:
    """Limits of each child of an audit's PyMC session over its life, from the audit's
    settings (``budget.wall_seconds``, ``budget.memory_mb``). A child serves one scope's
    fits (or, when an audit has more scopes than children, several scopes' in turn), so
    the CPU limit a fit had before sessions, 2 x wall_seconds + 30, now bounds all the
    fits of the scope together (on two cores they cannot use more within the scope's
    wall budget anyway). Each fit's wall clock is enforced by the session itself; the
    child's own is a backstop."""
    wall = settings.budget.wall_seconds
    return sandbox.Limits(cpu_seconds=2 * wall + 30, memory_mb=settings.budget.memory_mb,
                          wall_seconds=2 * wall + 60)


class _Child:
    """One sandboxed child process and its directories (a session restarts it after a
    kill)."""

    def __init__(self, limits: sandbox.Limits, trusted: bool = False) -> None:
        runner.sweep_stale_workdirs()
        self.root = Path(tempfile.mkdtemp(prefix=runner.WORKDIR_PREFIX))
        self.inbox, self.work = self.root / "inbox", self.root / "work"
        self.inbox.mkdir(mode=0o755)
        self.work.mkdir()
        runner.copy_shared_cache(self.work)
        self.limits = limits
        self.trusted = trusted
        self.control = sandbox.Control()
        self.completed: sandbox.Completed | None = None
        self.error: BaseException | None = None
        self.finished = threading.Event()
        self.requests = 0
        self.started = time.monotonic()
        self.thread = threading.Thread(target=self._run, name="pymc-session", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.completed = sandbox.run(
                [runner.venv_python(), "-m", "workers.pymc_runner.child", str(self.inbox)],
                limits=self.limits, view=runner.child_view(self.work, inbox=self.inbox),
                env=runner.child_environment(self.work, trusted=self.trusted),
                address_space_limit=True,
                max_stdout_bytes=runner.MAX_STDOUT, stderr_tail_bytes=runner.STDERR_TAIL,
                control=self.control)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting fit
            self.error = exc
        finally:
            self.finished.set()

    @property
    def running(self) -> bool:
        return not self.finished.is_set()

    def request(self, job: dict) -> int:
        number = self.requests
        self.requests += 1
        staged = self.inbox / f".{request_file(number)}.part"
        staged.write_text(json.dumps(job))
        staged.chmod(0o644)
        os.replace(staged, self.inbox / request_file(number))
        return number

    def out(self, number: int, name: str) -> Path:
        return self.work / output_file(number, name)

    def answered(self, number: int) -> bool:
        return any(os.path.lexists(self.out(number, name)) for name in (SUMMARY_FILE, ERROR_FILE))

    def kill(self) -> None:
        self.control.kill()
        self.finished.wait()

    def close(self, keep_cache: bool = False) -> None:
        """Ask the child to exit (kill it when it does not), then discard its files;
        with ``keep_cache`` what it compiled joins the shared cache first."""
        try:
            if self.running:
                (self.inbox / END_FILE).write_text("")
                if not self.finished.wait(_CLOSE_TRUSTED_SECONDS if keep_cache
                                          else _CLOSE_SECONDS):
                    self.kill()
            self.thread.join()
            if keep_cache and self.completed is not None and self.completed.returncode == 0:
                shutil.copytree(self.work / "pytensor", runner.shared_compile_cache(),
                                symlinks=True, dirs_exist_ok=True,
                                ignore=shutil.ignore_patterns("*.lock", "lock_dir"))
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


class _Slot:
    """A child of the session, the (program, data) keys it has served, and the lock
    that makes its fits take turns."""

    def __init__(self, limits: sandbox.Limits, trusted: bool = False) -> None:
        self.child = _Child(limits, trusted)
        self.lock = threading.Lock()
        self.keys: set[str] = set()
        self.busy = 0


class PymcSession:
    """The PyMC side of one audit: fits served by pre-imported sandboxed children.

    ``limits`` bound each child over its whole life (CPU seconds, memory; its wall clock
    is a backstop); each :meth:`fit` has its own wall-clock limit. A fit goes to the
    child that already compiled its (program, data), else to a new child while fewer
    than ``max_children`` exist (the scopes of one audit fit side by side, one child
    each, as their compiles are single-threaded), else to the least busy child. Fits on
    one child take turns (each fit's chains use the cores). A fit stopped by its wall
    clock kills its child; the next fit there starts a new one. ``trusted_cache``: our
    own shipped programs only, whose compiled code may join the shared compile cache on
    close.
    """

    def __init__(self, limits: sandbox.Limits = sandbox.Limits(), *,
                 trusted_cache: bool = False, max_children: int = 1) -> None:
        self.limits = limits
        self.trusted_cache = trusted_cache
        self.max_children = max(1, int(max_children))
        self._lock = threading.Lock()
        self._closed = False
        self.children = 0
        self.fits = 0
        self._slots: list[_Slot] = []
        self.prestart(self.max_children)

    def prestart(self, children: int) -> None:
        """Start children up to ``children`` (at most ``max_children``) now, so their
        imports run before the fits that will need them arrive."""
        with self._lock:
            while len(self._slots) < min(children, self.max_children) and not self._closed:
                self._add_slot()

    def _add_slot(self) -> _Slot:
        slot = _Slot(self.limits, self.trusted_cache)
        self._slots.append(slot)
        self.children += 1
        return slot

    @property
    def _child(self) -> _Child | None:
        """The first child (a standby has exactly one)."""
        return self._slots[0].child if self._slots else None

    @property
    def alive(self) -> bool:
        """Open, and every child running (a standby worth handing out)."""
        return not self._closed and bool(self._slots) and all(
            slot.child.running for slot in self._slots)

    def __enter__(self) -> "PymcSession":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            slots, self._slots = self._slots, []
        for slot in slots:
            slot.child.close(keep_cache=self.trusted_cache)

    def kill(self) -> None:
        """Stop every child now; the session stays usable (fits restart them)."""
        for slot in list(self._slots):
            slot.child.kill()

    def _slot_for(self, key: str) -> _Slot:
        with self._lock:
            if self._closed:
                raise RuntimeError("this PyMC session is closed")
            for slot in self._slots:
                if key in slot.keys:
                    break
            else:
                idle = [sl for sl in self._slots if not sl.keys and not sl.busy]
                if idle:
                    slot = idle[0]
                elif len(self._slots) < self.max_children:
                    slot = self._add_slot()
                else:
                    slot = min(self._slots, key=lambda sl: sl.busy)
            slot.keys.add(key)
            slot.busy += 1
            self.fits += 1
            return slot

    def fit(self, source: str, data: dict, *, chains: int = 4, tune: int = 1000,
            draws: int = 1000, target_accept: float = 0.8,
            backend: str = runner.DEFAULT_BACKEND, seed: int = 1, cores: int | None = None,
            mass_matrix: str = runner.DEFAULT_MASS_MATRIX,
            retry_target_accepts: tuple[float, ...] = runner.DEFAULT_RETRY_TARGET_ACCEPTS,
            profile: str = "strict", wall_seconds: float | None = None,
            draw_cap: int | None = None) -> Fit:
        """Fit a verified PyMC program with NUTS in one of this session's children.

        If the fit has divergent transitions, it is repeated with each of
        ``retry_target_accepts`` (higher than ``target_accept``) in turn until one has
        none, within ``wall_seconds`` (default: the session's wall limit), and a dense or
        low-rank mass matrix still diverging at the last one tries it once more with a
        diagonal matrix (``choice.diagonal_retry``); the attempt
        with the fewest divergences (the later one on ties) is returned and every attempt
        is listed in ``Fit.stats["attempts"]``. Same arguments, same draws.

        ``draw_cap`` (nutpie; at least ``draws``): sample each attempt's chains in the
        background up to that many draws and keep them paused, so that a later fit of the
        same program, data, seed and settings with more draws (a later look) extends them
        instead of sampling warm-up and earlier draws again. The draws are the same as
        without it (``backends._Extendable``); ``Fit.sampler["continued_from"]`` says when
        a fit extended an earlier one's chains.
        """
        runner.check_settings(chains, tune, draws, target_accept, backend, mass_matrix, cores)
        verify(source, profiles.get(profile))
        wall = float(wall_seconds if wall_seconds is not None else self.limits.wall_seconds)
        schedule = choices.accept_schedule(target_accept, retry_target_accepts)
        job = {"source": source, "data": data, "profile": profile,
               "chains": int(chains), "tune": int(tune), "draws": int(draws),
               "backend": backend, "seed": int(seed),
               "cores": int(cores or min(chains, runner.available_cores())),
               "mass_matrix": mass_matrix, "target_accepts": schedule,
               "wall_seconds": wall, "min_retry_share": runner.MIN_RETRY_BUDGET}
        if draw_cap is not None and int(draw_cap) >= int(draws):
            job["draw_cap"] = int(draw_cap)
        key = hashlib.sha256(json.dumps([source, profile, backend, data], sort_keys=True)
                             .encode()).hexdigest()
        slot = self._slot_for(key)
        try:
            with slot.lock:
                if not slot.child.running:  # killed by a timeout or a cancel: start afresh
                    slot.child.close()
                    with self._lock:
                        slot.child = _Child(self.limits, self.trusted_cache)
                        slot.keys = {key}
                        self.children += 1
                summary, arrays, attempts, process = self._serve(slot.child, job, wall)
        finally:
            with self._lock:
                slot.busy -= 1
        process["session"] = {"children": self.children, "fits": self.fits}
        return runner.make_fit(summary, arrays, job, attempts, process)

    def _serve(self, child: _Child, job: dict, wall: float):
        """Send one request and wait for its answer, the child's end, or the wall clock.
        Returns (chosen attempt's summary, its arrays, the attempts, process figures)."""
        begun = time.monotonic()
        number = child.request(job)
        deadline = begun + wall
        stopped: ResourceLimit | None = None
        while not child.answered(number):
            if not child.running:
                break
            if time.monotonic() >= deadline:
                child.kill()
                stopped = ResourceLimit(f"stopped after the wall-clock limit of {wall:g} s",
                                        limit="timeout", language=LANGUAGE,
                                        seconds=round(time.monotonic() - begun, 3))
                break
            child.finished.wait(_POLL_SECONDS)
        seconds = round(time.monotonic() - begun, 3)
        process = {"wall_seconds": seconds, "sandbox": sandbox.mode(), "request": number}
        if stopped is None and not child.answered(number):
            stopped = self._ended_without_answer(child, number)  # raises unless a limit
        if stopped is not None:
            process["stopped"] = stopped.details.get("limit")
        finished = {}
        # one attempt per target_accept, and more when the child fell back from an
        # automatically chosen sampler (choice.after_attempt); written in order
        for k in range(choices.most_attempts(len(job["target_accepts"]))):
            path = child.out(number, attempt_file(k, "json"))
            if not os.path.lexists(path):
                break
            finished[k] = json.loads(runner.read_output(path))
        attempts = [{"target_accept": finished[k]["target_accept"], "number": k,
                     "mass_matrix": _mass_matrix(finished[k], job),
                     "divergences": finished[k]["stats"]["divergences"],
                     "timings": finished[k]["timings"]} for k in sorted(finished)]
        if stopped is None:
            error = child.out(number, ERROR_FILE)
            if os.path.lexists(error):
                runner.raise_reported(json.loads(runner.read_output(error)), self.limits)
            skipped = json.loads(runner.read_output(child.out(number, SUMMARY_FILE)))["skipped"]
            attempts += [skipped] if skipped else []
        elif not finished:
            raise stopped
        else:
            attempts.append({"target_accept": _next_accept(job, finished),
                             "error": stopped.to_dict()})
        chosen = min(reversed(attempts[:len(finished)]), key=lambda a: a["divergences"])
        # a requested backend's diagonal retry is recorded whichever attempt is chosen:
        # the last attempt lists every fallback before it
        summary = {**finished[chosen["number"]],
                   "mass_matrix": _mass_matrix(finished[chosen["number"]], job),
                   "fallbacks": _fallbacks(finished[max(finished)].get("fallbacks"),
                                           len(job["target_accepts"]))}
        process["cpu_seconds"] = round(sum(float(a["timings"].get("cpu", 0.0))
                                           for a in attempts[:len(finished)]), 3)
        process["max_rss_mb"] = (summary.get("memory_mb") or {}).get("resident")
        npz = runner.read_output(child.out(number, attempt_file(chosen["number"], "npz")))
        with np.load(io.BytesIO(npz), allow_pickle=False) as arrays_file:
            arrays = {summary["names"][key]: np.asarray(arrays_file[key], dtype=np.float64)
                      for key in summary["names"]}
        for name, values in arrays.items():
            if values.shape[:2] != (job["chains"], job["draws"]):
                raise ProgramRuntimeError(f"{name}: draws shaped {values.shape}, expected "
                                          f"({job['chains']}, {job['draws']}, ...)",
                                          language=LANGUAGE)
        return summary, arrays, attempts, process

    def _ended_without_answer(self, child: _Child, number: int) -> ResourceLimit:
        """The child ended before answering: a resource limit is returned (attempts
        already on disk stand), anything else raised as the program's or our failure."""
        if isinstance(child.error, ResourceLimit):
            child.error.details.setdefault("language", LANGUAGE)
            return child.error
        if child.error is not None:
            raise child.error
        done = child.completed
        try:
            runner.raise_for_failure(done, lambda name: child.out(number, name), self.limits)
        except ResourceLimit as exc:
            return exc
        raise ProgramRuntimeError("the PyMC child exited before answering "
                                  f"(exit {done.returncode})", language=LANGUAGE)


class Standby:
    """One pre-started session per worker process, importing PyMC and pre-warming numba
    while the worker waits, handed to the next scope that needs PyMC fits.

    A standby has served nobody: :meth:`take` hands it out once (it then belongs to that
    scope alone and is closed with it) and a new one is started by :meth:`refill` after
    the scope, so no session ever serves two audits. A standby that died (a cancel
    kills every run of the process) or whose limits differ from the scope's is replaced
    by a fresh session. Costs one idle child (~550 MB resident) per worker process.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._session: PymcSession | None = None

    def take(self, limits: sandbox.Limits, max_children: int = 1) -> PymcSession:
        with self._lock:
            session, self._session = self._session, None
        if session is not None and session.alive and session.limits == limits:
            session.max_children = max(1, int(max_children))
            session.prestart(session.max_children)
            return session
        if session is not None:
            session.close()
        return PymcSession(limits, max_children=max_children)

    def refill(self, limits: sandbox.Limits, children: int = 1) -> None:
        """Start the next standby (with ``children`` children) unless a live one with
        these limits is waiting."""
        with self._lock:
            current = self._session
            if current is not None and current.alive and current.limits == limits:
                return
            self._session = None
        if current is not None:
            current.close()
        try:
            fresh = PymcSession(limits, max_children=children)
        except Exception:  # noqa: BLE001 - no standby; the next scope starts its own
            return
        with self._lock:
            self._session = fresh

    def close(self) -> None:
        with self._lock:
            session, self._session = self._session, None
        if session is not None:
            session.close()


def _mass_matrix(summary: dict, job: dict) -> str:
    """The mass matrix an attempt's summary (the child's output, not trusted) names, if
    it is one; else the request's."""
    named = summary.get("mass_matrix")
    return named if named in runner.MASS_MATRICES else job["mass_matrix"]


#: The fields of a fallback record (``choice._fallback``) kept from the child's output.
_FALLBACK_FIELDS = ("from", "from_mass_matrix", "to", "mass_matrix", "collapsed_chains",
                    "stalled_chains", "later_fits_only", "reason")


def _fallbacks(records, accepts: int) -> list[dict]:
    """A requested backend's fallback records as the child reported them (not trusted):
    at most as many as a request can make, only the known fields, short texts."""
    if not isinstance(records, list):
        return []
    kept = []
    for record in records[:choices.most_attempts(accepts)]:
        if isinstance(record, dict):
            kept.append({k: (v[:500] if isinstance(v, str) else v) for k, v in record.items()
                         if k in _FALLBACK_FIELDS and isinstance(v, (str, int, bool, list))
                         and (not isinstance(v, list) or len(v) <= 64)})
    return kept


def _next_accept(job: dict, finished: dict) -> float | None:
    """The target_accept of the attempt a stopped child was running after the
    ``finished`` ones (the child's own order: ``choice.after_attempt``)."""
    accepts = [float(a) for a in job["target_accepts"]]
    if not finished:
        return accepts[0] if accepts else None
    last = finished[max(finished)]
    # the child's index into target_accepts (the list may repeat a value); it is the
    # child's output, so not trusted: one that is not a valid index gives no guess
    position = last.get("position")
    if type(position) is not int or not 0 <= position < len(accepts):
        return None
    position, _ = choices.after_attempt(
        last["stats"], job["draws"], position, len(accepts), last.get("backend_choice"),
        {"backend": job.get("backend"), "mass_matrix": last.get("mass_matrix", job.get("mass_matrix"))})
    return None if position is None else accepts[position]
