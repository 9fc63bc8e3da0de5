"""Batch fan-out benchmark: one one-core worker vs two one-core workers, same batch.

    .venv/bin/python benchmarks/fanout.py [--posteriors a,b,...] [--rounds 1]
        [--wait-load 1.5] [--wait-max 1200] [--json out.json]
    .venv/bin/python benchmarks/fanout.py --posteriors all --only B --timeout 3600
        (the whole corpus on two workers, timed alone; --pymc-backend auto for that backend;
        --again: then the same batch again in that database, ordered by the first's seconds)

A posteriordb batch is split into one Celery task per (audit, scope) (``run_batch``
creates the audits and enqueues their scopes; ``run_audit_scope`` fits one scope), so k
workers share a batch's scopes. This measures it on one machine:

* config A: one ``ppl-audit worker --concurrency 1`` pinned with ``taskset -c 0``;
* config B: two such workers, pinned to cores 0 and 1.

Each run gets its own PostgreSQL database (``ppl_audit_fanout_<pid>_<n>``, migrated with
Alembic, dropped afterwards), its own Redis queue on Redis db 11 and its own API
(``ppl-audit serve`` on a free loopback port, unpinned): nothing stored by an earlier run
can be reused. Wall time runs from the ``POST /api/v1/batches`` to the batch reading
``done`` (polled every 0.25 s); the workers are started and idle (their pool processes
have imported the pipeline) before the submission.

Warm caches: the shared PyTensor cache is filled by ``ppl-audit warm-cache`` if it is
missing (with ``--warm-corpus``: ``warm-cache --corpus`` for the batch's translations
first, timed apart from the batch; sandboxed fits then load their compiled code from
their private copy of that cache), and an untimed warm-up run (config A, its own database) first compiles the six
LazyPPL programs into the GHC cache both timed configs then read. numba code is compiled
in every PyMC fit's private directory either way (never shared), the same cost in A and B.

Identity: per posterior and scope, the verdicts (audit, scope) and a SHA-256 of every
stored fit's draws (decoded arrays, per language and look) of B must equal A's (and the
warm-up's); seeds derive from the audit settings and the scope name, not from the worker.
It prints both wall times, B/A, per-posterior verdicts, which worker ran which scope, and
``identical: yes/no``; exit status 1 if not identical or a batch did not finish.

Measured 2026-12-01 on this 2-core machine shared with other sessions (runs 1–2: 1-min
load 2.5–4.7, no quiet moment in 20 min of waiting; run 3 started at load 1.15), default
settings, the six posteriors below (12 scope tasks), one ``heavy`` slot:

    run  warm-up (A)  A: 1 worker  B: 2 workers  B/A    load before A / B  identical
    1    126.7 s      125.0 s      97.4 s        0.779  3.86 / 3.62        yes (W, A, B)
    2    (skipped)    137.0 s      99.7 s        0.728  2.91 / 3.87        yes (A, B)
    3    (skipped)    119.9 s      57.3 s        0.478  1.14 / 2.99*       yes (A, B)

(* mostly run A's own processes still in the 1-min average.) The draw hashes of all
seven batches (three runs) are equal.

Every run: all 6 posteriors ``agree`` in both scopes; B split the scopes 6/6; the
fan-out itself costs < 0.5 s (all audits created and the first scope claimed 0.3–0.4 s
after the POST) and the A worker was fitting 99 % of the wall time. B's loss is the
foreign load: in A the other sessions' processes ran on the free core 1, in B they
shared both cores with the two workers, so B's scopes took 1.49× A's CPU-bound time
in run 1 (fit seconds summed over the workers: 184 vs 124; run 2: 193 vs 135, 1.42×),
and B/A = 0.5 × 1.49 × 1.06 (the last scope's tail; run 2: 0.5 × 1.42 × 1.03). With
the machine quieter (run 3) B's scopes took no longer than A's (109 vs 119 fit s) and
B/A = 0.48, within the 0.6 goal.

Everything it starts (workers, API, databases, queues) is stopped or dropped on exit,
also after an error or Ctrl-C.
"""
from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
PG = os.environ.get("PPL_AUDIT_BENCH_PG", "postgresql+psycopg://postgres@127.0.0.1:5432")
REDIS = os.environ.get("PPL_AUDIT_BENCH_REDIS", "redis://127.0.0.1:6379/11")
#: the six quickest translated posteriors of reports/corpus.json (7–8.4 s each, 2 cores)
POSTERIORS = ["mesquite-logmesquite_logvolume", "earnings-log10earn_height",
              "kidiq-kidscore_momhs", "earnings-earn_height",
              "eight_schools-eight_schools_noncentered", "arK-arK"]
CONFIGS = {"A": (0,), "B": (0, 1)}


def draws_sha256(blob: bytes) -> str:
    """Hash of stored draws by content (names, dtypes, shapes, values), not zip bytes."""
    h = hashlib.sha256()
    with np.load(io.BytesIO(blob), allow_pickle=False) as archive:
        for name in sorted(archive.files):
            a = np.ascontiguousarray(archive[name])
            h.update(f"{name}|{a.dtype.str}|{a.shape}|".encode())
            h.update(a.tobytes())
    return h.hexdigest()


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) used so far by ``pid`` and its live descendants."""
    tick = os.sysconf("SC_CLK_TCK")
    total, stack = 0.0, [pid]
    while stack:
        p = stack.pop()
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
            for task in Path(f"/proc/{p}/task").iterdir():
                stack += [int(c) for c in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
    return total


def pool_children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except FileNotFoundError:
        return []


class Run:
    """One configuration's database, queue, API and pinned workers; :meth:`close` undoes all."""

    def __init__(self, label: str, cores: tuple[int, ...], logdir: Path) -> None:
        self.label, self.cores, self.logdir = label, cores, logdir
        self.procs: list[subprocess.Popen] = []
        self.workers: list[subprocess.Popen] = []
        self.db = f"ppl_audit_fanout_{os.getpid()}_{label.lower()}"
        self.queue = f"ppl-audit-fanout-{os.getpid()}-{label.lower()}"
        self.admin = sa.create_engine(f"{PG}/postgres", isolation_level="AUTOCOMMIT")
        self.created = False

    # ---- set-up -----------------------------------------------------------------------
    def start(self) -> None:
        from service.db import make_engine, make_session_factory, tokens
        from service.db.migrate import upgrade

        with self.admin.connect() as c:
            c.execute(sa.text(f'CREATE DATABASE "{self.db}"'))
        self.created = True
        self.url = f"{PG}/{self.db}"
        upgrade(self.url)
        self.env = {**os.environ, "PPL_AUDIT_ENVIRONMENT": "test",
                    "PPL_AUDIT_SECRET": "fanout-bench-" + "x" * 20,
                    "PPL_AUDIT_DATABASE_URL": self.url, "PPL_AUDIT_BROKER_URL": REDIS,
                    "PPL_AUDIT_CELERY__QUEUE": self.queue}
        self.engine = make_engine(self.url)
        self.sessions = make_session_factory(self.engine)
        with self.sessions.begin() as s:
            _, self.token = tokens.create_token(s, "fanout", self.env["PPL_AUDIT_SECRET"])
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.base = f"http://127.0.0.1:{port}"
        self._spawn([], "serve", "--port", str(port), "--log-level", "warning", name="api")
        deadline = time.monotonic() + 90
        while True:
            try:
                if httpx.get(f"{self.base}/api/v1/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"API did not start; see {self.logdir}/{self.label}-api.log")
            time.sleep(0.3)
        for i, core in enumerate(self.cores):
            self.workers.append(self._spawn(
                ["taskset", "-c", str(core)], "worker", "--concurrency", "1",
                "--hostname", f"fanout{self.label}{i}@%h", "--log-level", "INFO",
                name=f"worker{i}-core{core}"))
        for w in self.workers:
            self._wait_idle(w)

    def _spawn(self, prefix: list[str], *args: str, name: str) -> subprocess.Popen:
        log = open(self.logdir / f"{self.label}-{name}.log", "wb")
        p = subprocess.Popen([*prefix, sys.executable, "-m", "service.cli", *args], cwd=ROOT,
                             env=self.env, stdout=log, stderr=subprocess.STDOUT,
                             start_new_session=True)
        p.log_path = Path(log.name)
        self.procs.append(p)
        return p

    def _wait_idle(self, worker: subprocess.Popen, timeout: float = 180) -> None:
        """Until the worker logged ``ready`` and its process tree used < 0.05 CPU s in 1 s
        (the pool process has imported the pipeline, the reconciler's first pass is over)."""
        deadline = time.monotonic() + timeout
        while b" ready." not in worker.log_path.read_bytes():
            if worker.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"worker did not start; see {worker.log_path}")
            time.sleep(0.3)
        before = tree_cpu_seconds(worker.pid)
        while time.monotonic() < deadline:
            time.sleep(1.0)
            now = tree_cpu_seconds(worker.pid)
            if now - before < 0.05 and pool_children(worker.pid):
                return
            before = now
        raise RuntimeError(f"worker never went idle; see {worker.log_path}")

    # ---- the measurement --------------------------------------------------------------
    def run_batch(self, posteriors: list[str], timeout: float,
                  settings: dict | None = None) -> dict:
        headers = {"Authorization": f"Bearer {self.token}"}
        # pool process -> worker, kept up to date while the batch runs: Celery replaces a
        # pool process (max tasks or memory per child), and the scopes its successor ran
        # were "worker?" in session 24's report (13 of 92)
        pool_pids: dict[int, int] = {}

        def note_pool() -> None:
            for i, w in enumerate(self.workers):
                for pid in pool_children(w.pid):
                    pool_pids.setdefault(pid, i)
        note_pool()
        load = os.getloadavg()
        with httpx.Client(base_url=self.base, headers=headers, timeout=30) as c:
            t0 = time.monotonic()
            body = {"source": "posteriordb", "posteriors": posteriors}
            r = c.post("/api/v1/batches", json={**body, "settings": settings} if settings else body)
            r.raise_for_status()
            batch_id = r.json()["id"]
            while True:
                body = c.get(f"/api/v1/batches/{batch_id}").json()
                if body["status"] in ("done", "failed", "cancelled"):
                    break
                if time.monotonic() - t0 > timeout:
                    raise RuntimeError(f"batch {batch_id} not done after {timeout:.0f} s")
                note_pool()
                time.sleep(0.25)
            wall = time.monotonic() - t0
        return {"config": self.label, "cores": list(self.cores), "workers": len(self.workers),
                "wall_seconds": round(wall, 1), "status": body["status"],
                "load_before": [round(x, 2) for x in load],
                "load_after": [round(x, 2) for x in os.getloadavg()],
                **self._stored(batch_id, pool_pids)}

    def _stored(self, batch_id: str, pool_pids: dict[int, int]) -> dict:
        """Verdicts, draw hashes and who ran what, per posterior and scope."""
        q = {"audits": "SELECT id, posterior, status, verdict FROM audits WHERE batch_id = :b",
             "scopes": "SELECT a.posterior, r.scope, r.verdict, r.seconds, r.evidence FROM scope_results r "
                       "JOIN audits a ON a.id = r.audit_id WHERE a.batch_id = :b",
             "fits": "SELECT a.posterior, f.scope, f.language, f.look, f.draws FROM fits f "
                     "JOIN audits a ON a.id = f.audit_id WHERE a.batch_id = :b",
             "picked": "SELECT a.posterior, e.message FROM events e JOIN audits a ON "
                       "a.id = e.audit_id WHERE a.batch_id = :b AND e.kind = 'picked' ORDER BY e.id",
             # seconds after the batch was stored: audits created, first and last claim, last
             # scope stored, batch closed
             "timeline": "SELECT extract(epoch FROM max(a.created_at) - b.created_at), "
                         "extract(epoch FROM min(e.created_at) - b.created_at), "
                         "extract(epoch FROM max(e.created_at) - b.created_at), "
                         "extract(epoch FROM (SELECT max(r.created_at) FROM scope_results r JOIN "
                         "audits a2 ON a2.id = r.audit_id WHERE a2.batch_id = b.id) - b.created_at), "
                         "extract(epoch FROM b.updated_at - b.created_at) FROM batches b "
                         "JOIN audits a ON a.batch_id = b.id JOIN events e ON e.audit_id = a.id "
                         "AND e.kind = 'picked' WHERE b.id = :b GROUP BY b.id"}
        with self.sessions() as s:
            rows = {k: s.execute(sa.text(v), {"b": batch_id}).all() for k, v in q.items()}
        timeline = dict(zip(("audits_created", "first_claim", "last_claim", "last_scope_stored",
                             "batch_closed"), (round(float(x), 1) for x in rows["timeline"][0])))
        results: dict[str, dict] = {p: {"status": st, "verdict": v, "scopes": {}}
                                    for _, p, st, v in rows["audits"]}
        for p, scope, verdict, seconds, evidence in rows["scopes"]:
            results[p]["scopes"][scope] = {"verdict": verdict, "seconds": seconds, "fits": {}}
            evidence = evidence if isinstance(evidence, dict) else json.loads(evidence or "{}")
            results[p]["scopes"][scope]["timings"] = scope_timings(evidence)
            if verdict != "agree":  # why, for the report (not part of the identity check)
                results[p]["scopes"][scope]["reason"] = evidence.get("reason")
                results[p]["scopes"][scope]["error"] = evidence.get("error")
        for p, scope, lang, look, blob in rows["fits"]:
            results[p]["scopes"][scope]["fits"][f"{lang}/{look}"] = draws_sha256(blob)
        ran_by: dict[str, list[str]] = {}
        for p, message in rows["picked"]:  # "scope S picked up by host:pid:task (attempt n)"
            scope = message.split()[1]
            pid = int(message.split(" by ")[1].split(":")[1])
            ran_by.setdefault(f"{p}/{scope}", []).append(f"worker{pool_pids.get(pid, '?')}")
        busy: dict[str, float] = {}
        for key, who in ran_by.items():
            p, scope = key.split("/")
            busy[who[-1]] = busy.get(who[-1], 0.0) + (results[p]["scopes"].get(scope, {})
                                                      .get("seconds") or 0.0)
        from corpus_batch import sampling_cpu  # noqa: E402 - a sibling benchmark
        return {"results": results, "ran_by": ran_by, "timeline_seconds": timeline,
                "cpu": sampling_cpu([str(audit_id) for audit_id, *_ in rows["audits"]],
                                    self.sessions, cores=len(self.cores)),
                "scopes_per_worker": {w: sum(1 for v in ran_by.values() if v[-1] == w)
                                      for w in sorted(busy)},
                "fit_seconds_per_worker": {w: round(x, 1) for w, x in sorted(busy.items())}}

    # ---- tear-down --------------------------------------------------------------------
    def close(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
                except ProcessLookupError:
                    pass
        if hasattr(self, "engine"):
            self.engine.dispose()
        try:
            import redis

            client = redis.Redis.from_url(REDIS)
            client.delete(self.queue, f"_kombu.binding.{self.queue}",
                          f"_kombu.binding_permanent.{self.queue}",
                          f"{self.queue}\x06\x163", f"{self.queue}\x06\x166",
                          f"{self.queue}\x06\x169")
            client.close()
        finally:
            if self.created:
                with self.admin.connect() as c:
                    c.execute(sa.text(f'DROP DATABASE IF EXISTS "{self.db}" WITH (FORCE)'))
            self.admin.dispose()


def drop_broadcast_bindings() -> None:
    """kombu's bindings of Celery's broadcast exchanges, left in Redis db 11 by the workers;
    removed when nothing else lives in that database."""
    import redis

    client = redis.Redis.from_url(REDIS)
    ours = {b"_kombu.binding_deadlines", b"_kombu.binding_celery.pidbox",
            b"_kombu.binding_celeryev", b"_kombu.binding_reply.celery.pidbox"}
    if set(client.keys("*")) <= ours:
        client.delete(*ours)
    client.close()


def scope_timings(evidence: dict) -> dict:
    """Where a scope's seconds went, from its stored evidence (not part of the identity
    check): the looks, the PyMC child's seconds summed over the looks that refitted it
    (import, compile, sample, whole process), and the last LazyPPL fit's compile and run."""
    pymc = {k: 0.0 for k in ("import", "compile", "sample", "process")}
    for look in evidence.get("looks") or []:
        for k in pymc:
            pymc[k] += float((look.get("pymc_fit") or {}).get(k) or 0.0)
    lazy = ((evidence.get("fits") or {}).get("lazyppl") or {}).get("timings") or {}
    return {"looks": len(evidence.get("looks") or []),
            "pymc": {k: round(v, 2) for k, v in pymc.items()},
            "lazyppl_last": {k: round(float(lazy.get(k) or 0.0), 2) for k in ("compile", "run")}}


def timing_totals(results: dict) -> dict:
    """Scope timings summed over a batch's scopes."""
    out = {"scopes": 0, "scope_seconds": 0.0, "pymc": {}, "lazyppl_last": {}}
    for posterior in results.values():
        for scope in posterior["scopes"].values():
            t = scope.get("timings") or {}
            out["scopes"] += 1
            out["scope_seconds"] += float(scope.get("seconds") or 0.0)
            for side in ("pymc", "lazyppl_last"):
                for k, v in (t.get(side) or {}).items():
                    out[side][k] = round(out[side].get(k, 0.0) + v, 1)
    out["scope_seconds"] = round(out["scope_seconds"], 1)
    return out


def fingerprint(run: dict) -> dict:
    """What must not depend on the worker: verdicts and draw hashes (no timings)."""
    return {p: {"verdict": r["verdict"], "status": r["status"],
                "scopes": {s: {"verdict": v["verdict"], "fits": v["fits"]}
                           for s, v in sorted(r["scopes"].items())}}
            for p, r in sorted(run["results"].items())}


def wait_for_quiet(threshold: float, max_wait: float) -> tuple[float, bool]:
    """Wait until the 1-minute load average is below ``threshold`` (at most ``max_wait``)."""
    deadline = time.monotonic() + max_wait
    while True:
        load = os.getloadavg()[0]
        if load < threshold:
            return load, True
        if time.monotonic() > deadline:
            return load, False
        print(f"load {load:.2f} >= {threshold}: waiting for a quieter moment", flush=True)
        time.sleep(30)


def ensure_shared_cache(logdir: Path, corpus: list[str] | None = None) -> str:
    """Fill the shared PyTensor cache if it is empty; with ``corpus``, first warm those
    shipped translations on both scopes' data (``ppl-audit warm-cache --corpus``; only
    what the cache's stamp does not already hold), timed."""
    from workers.pymc_runner.runner import shared_compile_cache, warm_stamp

    cache = shared_compile_cache()
    if corpus:
        started = time.monotonic()
        subprocess.run([sys.executable, "-m", "service.cli", "warm-cache", "--if-needed",
                        "--corpus", ",".join(corpus)], cwd=ROOT, check=True,
                       stdout=open(logdir / "warm-cache.log", "wb"), stderr=subprocess.STDOUT)
        held = len((warm_stamp() or {}).get("corpus") or [])
        return (f"warmed with --corpus in {time.monotonic() - started:.0f} s (the stamp names "
                f"{held} translations warmed on both scopes; {cache})")
    if cache.is_dir() and any(cache.iterdir()):
        held = len((warm_stamp() or {}).get("corpus") or [])
        return f"present ({cache}; {held} translations warmed on both scopes)"
    subprocess.run([sys.executable, "-m", "service.cli", "warm-cache"], cwd=ROOT, check=True,
                   stdout=open(logdir / "warm-cache.log", "wb"), stderr=subprocess.STDOUT)
    return f"filled by ppl-audit warm-cache ({cache})"


def one_run(label: str, cores: tuple[int, ...], posteriors: list[str], logdir: Path,
            timeout: float, settings: dict | None = None, again: bool = False) -> dict:
    """One batch on a fresh service; ``again``: then the same batch once more in that
    database (its fan-out orders the scopes by the seconds the first one stored, longest
    first), returned as ``again`` in the first batch's result."""
    run = Run(label, cores, logdir)
    try:
        run.start()
        result = run.run_batch(posteriors, timeout, settings)
        if again:
            result["again"] = run.run_batch(posteriors, timeout, settings)
    finally:
        run.close()
    print(f"{label}: {len(cores)} worker(s) on core(s) {','.join(map(str, cores))}: "
          f"{result['wall_seconds']:.1f} s, status {result['status']}, scopes per worker "
          f"{result['scopes_per_worker']}, fit s per worker {result['fit_seconds_per_worker']}, "
          f"load {result['load_before'][0]:.2f} -> {result['load_after'][0]:.2f}; "
          f"timeline {result['timeline_seconds']}", flush=True)
    return result


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--posteriors", default=",".join(POSTERIORS),
                    help="comma-separated, or 'all' (every translated posterior)")
    ap.add_argument("--only", choices=sorted(CONFIGS),
                    help="time this configuration alone (no warm-up, no A/B ratio), e.g. "
                    "the whole corpus on two workers: --posteriors all --only B")
    ap.add_argument("--pymc-backend", help="the batch's pymc.backend (default: the product's)")
    ap.add_argument("--again", action="store_true",
                    help="with --only: then the same batch again in the same database, "
                    "which the fan-out orders longest stored scopes first")
    ap.add_argument("--rounds", type=int, default=1, help="timed A, B pairs (alternating)")
    ap.add_argument("--no-warm-up", action="store_true", help="skip the untimed config-A run")
    ap.add_argument("--wait-load", type=float, default=1.5,
                    help="wait until the 1-min load is below this before starting")
    ap.add_argument("--wait-max", type=float, default=1200, help="seconds; then run anyway")
    ap.add_argument("--timeout", type=float, default=1800, help="per batch, seconds")
    ap.add_argument("--logs", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp"))
                    / f"ppl-audit-fanout-{os.getpid()}")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--warm-corpus", action="store_true",
                    help="first warm the batch's translations into the shared cache "
                    "(ppl-audit warm-cache --corpus; timed, outside the batch's wall time)")
    args = ap.parse_args()
    if os.cpu_count() < 2 or len(os.sched_getaffinity(0)) < 2:
        print("needs two cores (0 and 1)", file=sys.stderr)
        return 2
    # SIGTERM (e.g. from a job runner) unwinds through the finally blocks like Ctrl-C
    signal.signal(signal.SIGTERM, _interrupt)
    if args.posteriors == "all":
        from corpus.loader import list_posteriors
        posteriors = list_posteriors()
    else:
        posteriors = [p for p in args.posteriors.split(",") if p]
    settings = {"pymc": {"backend": args.pymc_backend}} if args.pymc_backend else None
    args.logs.mkdir(parents=True, exist_ok=True)
    report: dict = {"posteriors": posteriors, "cpus": os.cpu_count(), "logs": str(args.logs),
                    "settings": settings}
    report["shared_pytensor_cache"] = ensure_shared_cache(
        args.logs, posteriors if args.warm_corpus else None)
    load, quiet = wait_for_quiet(args.wait_load, args.wait_max)
    report["load_at_start"] = [round(x, 2) for x in os.getloadavg()]
    report["quiet"] = quiet
    print(f"load at start {load:.2f} ({'below' if quiet else 'NOT below'} {args.wait_load}); "
          f"logs in {args.logs}", flush=True)
    runs: list[dict] = []
    timed: dict[str, list[dict]] = {"A": [], "B": []}
    if args.only:
        try:
            r = one_run(args.only, CONFIGS[args.only], posteriors, args.logs, args.timeout,
                        settings, again=args.again)
        finally:
            drop_broadcast_bindings()
        verdicts = [v["verdict"] for v in fingerprint(r).values()]
        tally = {v: verdicts.count(v) for v in sorted(set(verdicts))}
        print(f"\n{args.only} ({len(CONFIGS[args.only])} worker(s)), {len(posteriors)} "
              f"posteriors: {r['wall_seconds']:.1f} s wall, status {r['status']}, {tally}")
        report.update(only=args.only, wall_seconds=r["wall_seconds"], verdicts=tally, runs=[r],
                      timing_totals=timing_totals(r["results"]))
        print(f"where the scope seconds went: {json.dumps(report['timing_totals'])}")
        print(f"CPU-seconds of the fits (sampling floor over the cores): {json.dumps(r['cpu'])}")
        if args.again:
            second = r["again"]
            same = fingerprint(second) == fingerprint(r)
            print(f"again, longest stored scopes first: {second['wall_seconds']:.1f} s wall "
                  f"(first {r['wall_seconds']:.1f} s), status {second['status']}, scopes per "
                  f"worker {second['scopes_per_worker']}, fit s per worker "
                  f"{second['fit_seconds_per_worker']}; CPU {json.dumps(second['cpu'])}; "
                  f"identical draws and verdicts: {'yes' if same else 'no'}")
            report["again"] = {"wall_seconds": second["wall_seconds"], "identical": same}
        if args.json:
            args.json.write_text(json.dumps(report, indent=2))
        return 0 if r["status"] == "done" else 1
    try:
        if not args.no_warm_up:
            warm = one_run("W", CONFIGS["A"], posteriors, args.logs, args.timeout, settings)
            report["warm_up"] = {k: warm[k] for k in ("wall_seconds", "load_before",
                                                       "load_after", "status")}
            runs.append(warm)
        for i in range(args.rounds):
            order = ("A", "B") if i % 2 == 0 else ("B", "A")
            for label in order:
                r = one_run(f"{label}{i + 1}" if args.rounds > 1 else label, CONFIGS[label],
                            posteriors, args.logs, args.timeout, settings)
                timed[label].append(r)
                runs.append(r)
    finally:
        drop_broadcast_bindings()
    a = statistics.median(r["wall_seconds"] for r in timed["A"])
    b = statistics.median(r["wall_seconds"] for r in timed["B"])
    reference = fingerprint(timed["A"][0])
    identical = all(fingerprint(r) == reference for r in runs)
    finished = all(r["status"] == "done" for r in runs)
    report.update(wall_seconds_A=a, wall_seconds_B=b, ratio_B_over_A=round(b / a, 3),
                  identical=identical, runs=runs)
    print("\nper-posterior verdicts (A; B identical: see below)")
    for p, r in reference.items():
        scopes = ", ".join(f"{s} {v['verdict']}" for s, v in r["scopes"].items())
        print(f"  {p:42s} {r['verdict']:13s} ({scopes})")
    for r in runs:
        print(f"  {r['config']}: scopes per worker {r['scopes_per_worker']}")
    print(f"\nwall A (1 worker, core 0): {a:.1f} s; wall B (2 workers, cores 0,1): {b:.1f} s; "
          f"B/A = {b / a:.3f} (goal <= 0.6)")
    print(f"identical: {'yes' if identical else 'no'}")
    if not identical:
        for r in runs:
            fp = fingerprint(r)
            diff = [p for p in reference if fp.get(p) != reference[p]]
            if diff:
                print(f"  {r['config']} differs from A on {diff}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0 if identical and finished else 1


if __name__ == "__main__":
    raise SystemExit(main())
