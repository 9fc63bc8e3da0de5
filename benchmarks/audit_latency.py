"""Time to a verdict for the SPEC eight-schools pair, end to end, cold and warm caches.

Cold: a fresh cache directory (PyTensor compile cache, compiled LazyPPL binaries) that
only links the already built lazyppl library, so the figure is what a new program costs,
not the one-off library build. Warm: the same audit again in that cache.

    .venv/bin/python benchmarks/audit_latency.py [--repeat 2]
    .venv/bin/python benchmarks/audit_latency.py --sandbox-compare [--repeat 5]

``--sandbox-compare`` runs warm audits alternately with the OS sandbox (bubblewrap) and
with ``PPL_AUDIT_SANDBOX=none`` in the same run and prints both medians and their ratio.
``--versus-import`` (issue 11) runs, alternately in the same run, one bare ``python -c
"import pymc"`` in the same venv and one warm audit, and prints both medians, their
ratio and where the audit's PyMC time went (imports, compiles, samplings).
``--service`` does the same through the service: its own database, API and two Celery
workers (one per core, each pool process holding a standby PyMC session, issue 11),
time from ``POST /api/v1/audits`` to the audit reading ``done``, waiting before each
audit until the workers are idle (standbys imported and pre-warmed), as a deployed
worker between jobs.
The shared PyTensor cache (seeded by ``ppl-audit warm-cache``) is the machine's own in
every mode; it is what a deployed worker has.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures" / "eight_schools"
CACHE = Path(os.environ.get("PPL_AUDIT_CACHE", Path.home() / ".cache" / "ppl-audit"))


def audit(cache: Path, sandbox_mode: str = "bwrap") -> tuple[float, dict]:
    cmd = [str(ROOT / ".venv" / "bin" / "ppl-audit"), "audit", "--pymc", str(FIX / "model.py"),
           "--lazyppl", str(FIX / "Model.hs"), "--scope", f"visible={FIX / 'visible.json'}",
           "--scope", f"full={FIX / 'full.json'}", "--json", "--no-save"]
    env = dict(os.environ, PPL_AUDIT_CACHE=str(cache), PPL_AUDIT_SANDBOX=sandbox_mode)
    t0 = time.monotonic()
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    return time.monotonic() - t0, json.loads(out)


def describe(label: str, wall: float, ev: dict) -> None:
    print(f"{label:>5}: {wall:6.1f} s wall, verdict {ev['verdict']} "
          f"({', '.join(f'{k}={v}' for k, v in ev['scope_verdicts'].items())})")
    for scope, sc in ev["scopes"].items():
        for side in ("pymc", "lazyppl"):
            t = sc["fits"][side]["timings"]
            print(f"        {scope:8s} {side:8s} " + ", ".join(
                f"{k} {v:.2f} s" for k, v in t.items() if isinstance(v, (int, float))))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=2, help="warm runs")
    ap.add_argument("--sandbox-compare", action="store_true",
                    help="warm audits with and without the OS sandbox, alternately")
    ap.add_argument("--versus-import", action="store_true",
                    help="warm audits and bare `import pymc`, alternately")
    ap.add_argument("--service", action="store_true",
                    help="with --versus-import: audits through the REST API and workers")
    args = ap.parse_args()
    if args.service:
        service_latency(args.repeat)
        return
    if args.sandbox_compare:
        sandbox_compare(args.repeat)
        return
    if args.versus_import:
        versus_import(args.repeat)
        return
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp)
        for build in CACHE.glob("lazyppl-*"):
            # the library and its package DB are shared; compiled programs start empty
            (cache / build.name).mkdir()
            for part in build.iterdir():
                if part.name != "programs":
                    (cache / build.name / part.name).symlink_to(part)
        shared = CACHE / "pymc" / "pytensor-shared"  # seeded by setup, as on a worker
        if shared.is_dir():
            (cache / "pymc").mkdir()
            (cache / "pymc" / "pytensor-shared").symlink_to(shared)
        wall, ev = audit(cache)
        describe("cold", wall, ev)
        for _ in range(args.repeat):
            wall, ev = audit(cache)
            describe("warm", wall, ev)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores")


def sandbox_compare(repeat: int) -> None:
    import statistics

    audit(CACHE)  # compiled LazyPPL binaries in place: both modes run warm
    walls: dict[str, list[float]] = {"bwrap": [], "none": []}
    for _ in range(repeat):
        for mode in ("bwrap", "none"):
            wall, ev = audit(CACHE, mode)
            assert ev["sandbox"] == mode and ev["verdict"] == "agree", ev["reason"]
            walls[mode].append(wall)
            print(f"{mode:>5}: {wall:6.2f} s wall, verdict {ev['verdict']}", flush=True)
    med = {m: statistics.median(w) for m, w in walls.items()}
    print(f"median over {repeat}: bwrap {med['bwrap']:.2f} s, none {med['none']:.2f} s, "
          f"sandbox / none = {med['bwrap'] / med['none']:.3f}")
    print(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores")


def bare_import() -> float:
    t0 = time.monotonic()
    subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-c", "import pymc"], check=True,
                   capture_output=True)
    return time.monotonic() - t0


def versus_import(repeat: int) -> None:
    import statistics

    audit(CACHE)  # compiled LazyPPL binaries in place: every audit below runs warm
    imports, audits = [], []
    for _ in range(repeat):
        imports.append(bare_import())
        wall, ev = audit(CACHE)
        assert ev["verdict"] == "agree", ev["reason"]
        audits.append(wall)
        work = ev["timings"]["pymc"]
        first = [look["pymc_fit"] for sc in ev["scopes"].values() for look in sc["looks"]
                 if "pymc_fit" in look]
        print(f"import pymc {imports[-1]:5.2f} s | audit {wall:5.2f} s: PyMC import "
              f"{sum(f.get('import') or 0 for f in first):.2f} s, {work['compiles']} compiles "
              f"{work['compile_seconds']:.2f} s, {work['fits']} samplings "
              f"{work['sample_seconds']:.2f} s", flush=True)
    a, i = statistics.median(audits), statistics.median(imports)
    print(f"median over {repeat}: audit {a:.2f} s, import pymc {i:.2f} s, ratio {a / i:.2f}")
    print(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores")


def service_latency(repeat: int) -> None:
    """Time to verdict through the service with idle workers (standby sessions ready)."""
    import statistics

    import httpx

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from corpus_batch import sampling_cpu  # noqa: E402
    from fanout import Run  # noqa: E402 - the benchmark's service harness

    pair = {"pymc": {"source": (FIX / "model.py").read_text()},
            "lazyppl": {"source": (FIX / "Model.hs").read_text()},
            "scopes": {"visible": json.loads((FIX / "visible.json").read_text()),
                       "full": json.loads((FIX / "full.json").read_text())}}
    run = Run("latency", (0, 1), Path(tempfile.mkdtemp(prefix="ppl-audit-latency-")))
    imports, audits, floors = [], [], []
    try:
        run.start()
        headers = {"Authorization": f"Bearer {run.token}"}
        with httpx.Client(base_url=run.base, headers=headers, timeout=30) as client:
            for i in range(repeat + 1):  # the first audit compiles the LazyPPL program
                for worker in run.workers:
                    run._wait_idle(worker)
                imported = bare_import()
                for worker in run.workers:
                    run._wait_idle(worker)
                t0 = time.monotonic()
                r = client.post("/api/v1/audits", json={**pair, "name": f"latency {i}",
                                                        "settings": {"seed": 100 + i}})
                r.raise_for_status()
                accepted = r.json()
                url, audit_id = accepted["url"], accepted["id"]
                while (body := client.get(url).json())["status"] not in ("done", "failed"):
                    time.sleep(0.1)
                wall = time.monotonic() - t0
                print(f"{'warm-up' if i == 0 else 'audit'} {wall:5.2f} s, verdict "
                      f"{body.get('verdict')} | import pymc {imported:5.2f} s", flush=True)
                for name, scope in ((body.get("evidence") or {}).get("scopes") or {}).items():
                    looks = scope.get("looks", [])
                    fits = [look.get("pymc_fit") or {} for look in looks]
                    print(f"    {name}: {scope.get('seconds')} s in the worker; looks "
                          + ", ".join(f"{look.get('seconds')} s ({'+'.join(look.get('refitted') or [])})"
                                      for look in looks) + "; PyMC "
                          + "; ".join(", ".join(f"{k} {v}" for k, v in f.items()) for f in fits))
                cpu = sampling_cpu([audit_id], run.sessions)
                print(f"    CPU-seconds of its fits: PyMC {cpu['pymc_cpu_seconds']} (sampling "
                      f"{cpu['pymc_sampling_seconds']}), LazyPPL {cpu['lazyppl_sampling_seconds']};"
                      f" over {os.cpu_count()} cores {cpu['fits_floor_seconds']} s", flush=True)
                if i:
                    imports.append(imported)
                    audits.append(wall)
                    floors.append(cpu["fits_floor_seconds"])
    finally:
        run.close()
    a, i = statistics.median(audits), statistics.median(imports)
    print(f"service, median over {repeat}: audit {a:.2f} s, import pymc {i:.2f} s, "
          f"ratio {a / i:.2f}; load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores")
    # the fits' CPU over the cores: no schedule of these fits is faster (GHC's compile of
    # a new program and the service's own work come on top)
    f = statistics.median(floors)
    print(f"the fits' CPU over the cores, median: {f:.2f} s, ratio {f / i:.2f} to the import")


if __name__ == "__main__":
    main()
