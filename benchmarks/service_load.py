"""Service benchmark: submission latency under load, throughput per worker count, memory.

    .venv/bin/python benchmarks/service_load.py [--rate 50] [--requests 500]
        [--audits 6] [--workers 1,2] [--json out.json]

What it measures (all on loopback, bounded in count and time; stops by itself):

1. Submission latency: ``POST /api/v1/audits`` (validation, both verifiers, storage,
   enqueue) sent open-loop at ``--rate`` requests/s to a real ``ppl-audit serve``
   (uvicorn, one process); p50/p99/max latency and error count. No worker consumes the
   queue during this phase; the benchmark's own queue is deleted afterwards.
2. Throughput: ``--audits`` small one-scope audits (eight schools, tiny settings)
   submitted at once, then N workers started; audits per minute from the workers' start
   to the last audit done, for each N in ``--workers``.
3. Worker memory: peak resident set size (RSS) of each worker's process tree (Celery
   parent, pool child, and the sandboxed fit subprocesses), sampled every 0.5 s.
4. ``--flood SECONDS``: p50/p99 of ``GET /api/v1/health`` (sent every 50 ms) while
   ``--flooders`` anonymous clients (no token) POST bodies of ``--flood-mb`` MB to
   ``/api/v1/audits`` in a loop; how many POSTs were answered and with what status.

It uses its own PostgreSQL database (dropped at the end) and Redis queue.
"""
from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
FIX = ROOT / "tests" / "fixtures" / "eight_schools"
PG = os.environ.get("PPL_AUDIT_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432")
REDIS = os.environ.get("PPL_AUDIT_TEST_REDIS", "redis://127.0.0.1:6379/14")
TINY = {"pymc": {"chains": 2, "tune": 200, "draws": 200, "backend": "pymc", "retry_target_accepts": []},
        "lazyppl": {"chains": 2, "warmup": 2000, "draws": 200, "thin": 2},
        "budget": {"max_looks": 1}}


def pair(name: str, settings=None) -> dict:
    body = {"name": name, "pymc": {"source": (FIX / "model.py").read_text()},
            "lazyppl": {"source": (FIX / "Model.hs").read_text()},
            "scopes": {"visible": json.loads((FIX / "visible.json").read_text())}}
    if settings:
        body["settings"] = settings
    return body


def percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q / 100 * (len(xs) - 1))))]


def tree_rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and all its descendants, MB."""
    total, stack = 0, [pid]
    while stack:
        p = stack.pop()
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
            for task in Path(f"/proc/{p}/task").iterdir():
                stack += [int(c) for c in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return total / 1024


class Service:
    """A throwaway database, a queue, a server, and workers on demand."""

    def __init__(self, server_processes: int = 1) -> None:
        from service.db.migrate import upgrade
        from service.db import tokens
        from service.db import make_engine, make_session_factory

        self.db = f"ppl_audit_bench_{secrets.token_hex(4)}"
        self.admin = sa.create_engine(f"{PG}/postgres", isolation_level="AUTOCOMMIT")
        with self.admin.connect() as c:
            c.execute(sa.text(f'CREATE DATABASE "{self.db}"'))
        self.url = f"{PG}/{self.db}"
        upgrade(self.url)
        self.queue = f"ppl-audit-bench-{secrets.token_hex(4)}"
        self.env = {**os.environ, "PPL_AUDIT_ENVIRONMENT": "test",
                    "PPL_AUDIT_SECRET": "bench-secret-" + "x" * 20,
                    "PPL_AUDIT_DATABASE_URL": self.url, "PPL_AUDIT_BROKER_URL": REDIS,
                    "PPL_AUDIT_CELERY__QUEUE": self.queue}
        engine = make_engine(self.url)
        with make_session_factory(engine).begin() as s:
            _, self.token = tokens.create_token(s, "bench", self.env["PPL_AUDIT_SECRET"])
        engine.dispose()
        self.procs: list[subprocess.Popen] = []
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = Path(os.environ.get("TMPDIR", "/tmp")) / f"{self.queue}-server.log"
        self.server = self._spawn("serve", "--port", str(self.port), "--log-level", "warning",
                                  "--workers", str(server_processes), log=self.log)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.base}/api/v1/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.3)

    def _spawn(self, *args, log: Path | None = None) -> subprocess.Popen:
        out = open(log, "wb") if log else subprocess.DEVNULL
        p = subprocess.Popen([sys.executable, "-m", "service.cli", *args], cwd=ROOT, env=self.env,
                             stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(p)
        return p

    def worker(self, name: str) -> subprocess.Popen:
        return self._spawn("worker", "--hostname", f"{name}@%h", "--log-level", "WARNING")

    def stop(self, p: subprocess.Popen) -> None:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()

    def close(self) -> None:
        import redis

        for p in self.procs:
            self.stop(p)
        redis.Redis.from_url(REDIS).delete(self.queue, f"_kombu.binding.{self.queue}",
                                          f"_kombu.binding_permanent.{self.queue}")
        with self.admin.connect() as c:
            c.execute(sa.text(f'DROP DATABASE IF EXISTS "{self.db}" WITH (FORCE)'))
        self.admin.dispose()


def submission_latency(svc: Service, rate: float, n: int) -> dict:
    """Open-loop: request i is sent at t0 + i/rate whatever the earlier ones are doing."""
    body = json.dumps(pair("latency")).encode()
    headers = {"Authorization": f"Bearer {svc.token}", "Content-Type": "application/json"}
    latencies: list[float] = []
    errors: list[int] = []
    lock = threading.Lock()
    client = httpx.Client(base_url=svc.base, headers=headers, timeout=30,
                          limits=httpx.Limits(max_connections=200))

    def one() -> None:
        t = time.perf_counter()
        try:
            status = client.post("/api/v1/audits", content=body).status_code
        except httpx.HTTPError:
            status = -1
        dt = time.perf_counter() - t
        with lock:
            latencies.append(dt)
            if status != 202:
                errors.append(status)

    threads = []
    t0 = time.perf_counter()
    for i in range(n):
        delay = t0 + i / rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        th = threading.Thread(target=one)
        th.start()
        threads.append(th)
    for th in threads:
        th.join(timeout=60)
    elapsed = time.perf_counter() - t0
    client.close()
    ms = [x * 1000 for x in latencies]
    return {"requests": n, "target_rate": rate, "achieved_rate": round(n / elapsed, 1),
            "p50_ms": round(statistics.median(ms), 1), "p99_ms": round(percentile(ms, 99), 1),
            "max_ms": round(max(ms), 1), "errors": len(errors),
            "error_statuses": sorted(set(errors))}


def health_under_flood(svc: Service, seconds: float, flooders: int, mb: float) -> dict:
    """Health latency while anonymous clients send large JSON bodies (issue 13)."""
    # valid JSON of the requested size made of numbers (the costliest to parse): what a
    # parser has to read to the end
    n = int((mb * 1024 * 1024 - 64) // 4)
    body = b'{"name": "flood", "scopes": {"s": {"y": [' + b"0.5," * n + b'0]}}}'
    stop = threading.Event()
    statuses: list[int] = []
    lock = threading.Lock()

    def flood() -> None:
        with httpx.Client(base_url=svc.base, timeout=30) as c:
            while not stop.is_set():
                try:
                    status = c.post("/api/v1/audits", content=body,
                                    headers={"Content-Type": "application/json"}).status_code
                except httpx.HTTPError:
                    status = -1
                with lock:
                    statuses.append(status)

    threads = [threading.Thread(target=flood) for _ in range(flooders)]
    for th in threads:
        th.start()
    time.sleep(1.0)  # let the flood start
    ms: list[float] = []
    with httpx.Client(base_url=svc.base, timeout=30) as c:
        t_end = time.monotonic() + seconds
        while time.monotonic() < t_end:
            t = time.perf_counter()
            c.get("/api/v1/health")
            ms.append((time.perf_counter() - t) * 1000)
            time.sleep(0.05)
    stop.set()
    for th in threads:
        th.join(timeout=60)
    return {"flooders": flooders, "body_mb": mb, "seconds": seconds, "health_requests": len(ms),
            "health_p50_ms": round(statistics.median(ms), 1),
            "health_p99_ms": round(percentile(ms, 99), 1), "health_max_ms": round(max(ms), 1),
            "posts_answered": len(statuses),
            "post_statuses": {str(k): statuses.count(k) for k in sorted(set(statuses))},
            "load_average": os.getloadavg()}


def throughput(svc: Service, workers: int, audits: int, timeout: float) -> dict:
    headers = {"Authorization": f"Bearer {svc.token}"}
    with httpx.Client(base_url=svc.base, headers=headers, timeout=30) as c:
        ids = [c.post("/api/v1/audits", json=pair(f"tp-{workers}-{i}", TINY)).json()["id"]
               for i in range(audits)]
        procs = [svc.worker(f"bench{workers}-{k}") for k in range(workers)]
        t0 = time.monotonic()
        peak = {p.pid: 0.0 for p in procs}
        done: set[str] = set()
        while len(done) < len(ids) and time.monotonic() - t0 < timeout:
            for p in procs:
                peak[p.pid] = max(peak[p.pid], tree_rss_mb(p.pid))
            for i in ids:
                if i not in done and c.get(f"/api/v1/audits/{i}").json()["status"] in ("done", "failed"):
                    done.add(i)
            time.sleep(0.5)
        elapsed = time.monotonic() - t0
        verdicts = [c.get(f"/api/v1/audits/{i}").json()["verdict"] for i in ids]
    idle = [tree_rss_mb(p.pid) for p in procs]
    for p in procs:
        svc.stop(p)
    return {"workers": workers, "audits": audits, "finished": len(done),
            "seconds": round(elapsed, 1), "audits_per_minute": round(60 * len(done) / elapsed, 2),
            "verdicts": {v: verdicts.count(v) for v in set(verdicts)},
            "peak_worker_tree_rss_mb": [round(x) for x in peak.values()],
            "idle_worker_tree_rss_mb": [round(x) for x in idle]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", default="50", help="requests/s; a list such as 10,25,50 "
                    "measures each in turn")
    ap.add_argument("--requests", type=int, default=500)
    ap.add_argument("--audits", type=int, default=6)
    ap.add_argument("--workers", default="1,2", help="worker counts to measure; 0 skips")
    ap.add_argument("--server-processes", type=int, default=1, help="uvicorn processes")
    ap.add_argument("--timeout", type=float, default=900, help="per throughput run, seconds")
    ap.add_argument("--flood", type=float, default=0, help="seconds of the health-under-"
                    "anonymous-flood measurement (0 skips it)")
    ap.add_argument("--flooders", type=int, default=4)
    ap.add_argument("--flood-mb", type=float, default=4.9)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    svc = Service(args.server_processes)
    report = {"cpus": os.cpu_count(), "load_average_at_start": os.getloadavg(),
              "server_processes": args.server_processes}
    try:
        if args.flood > 0:
            report["health_under_flood"] = health_under_flood(svc, args.flood, args.flooders,
                                                              args.flood_mb)
            print(json.dumps(report["health_under_flood"]), flush=True)
        report["submission"] = []
        for rate in (float(r) for r in args.rate.split(",") if float(r) > 0):
            r = submission_latency(svc, rate, args.requests)
            r["server_error_lines"] = [line for line in svc.log.read_text(errors="replace")
                                       .splitlines() if "rror" in line][:5]
            print(json.dumps(r), flush=True)
            report["submission"].append(r)
        import redis

        redis.Redis.from_url(REDIS).delete(svc.queue)  # phase 1's audits never run
        report["throughput"] = []
        counts = [int(x) for x in args.workers.split(",") if int(x) > 0]
        if counts:  # warm the PyTensor and GHC caches so every count is measured warm
            report["warm_up"] = throughput(svc, 1, 1, args.timeout)
        for n in counts:
            r = throughput(svc, n, args.audits, args.timeout)
            print(json.dumps(r), flush=True)
            report["throughput"].append(r)
    finally:
        svc.close()
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
