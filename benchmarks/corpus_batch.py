"""Audit the whole shipped posteriordb corpus and write the JSON report under reports/.

    .venv/bin/python benchmarks/corpus_batch.py [--posteriors a,b] [--out reports/corpus.json]
    .venv/bin/python benchmarks/corpus_batch.py --reference-only   # reports/reference_audits.json
    .venv/bin/python benchmarks/corpus_batch.py --markdown reports/corpus.json   # table only

Uses the local pipeline (no servers) with the product's default settings and a SQLite
database of its own (reports/corpus.sqlite3, not committed), so an interrupted run
resumes where it stopped: identical audits are reused. The report records the commit
it ran on, the machine and the wall time, and ``cpu``: the CPU-seconds of the whole run
(this process and every child it waited for: PyMC children, GHC, LazyPPL binaries) and,
from the stored fits, the CPU-seconds spent sampling (each look's refitted fits: the
PyMC child's CPU less its import, pre-warm, build and compile seconds; a LazyPPL run's
CPU), with ``sampling_floor_seconds`` = that sum over the cores: a lower bound on the
wall time of any schedule of these fits on this machine (issue 11's batch goal).
``--reference-only`` audits our PyMC translations alone against posteriordb's
reference draws (reference audits, no LazyPPL side; the same as ``ppl-audit batch
posteriordb --lazyppl-from none``).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import time
from pathlib import Path
from typing import get_args

from rich.console import Console

from workers.settings import AuditSettings, PyMCSettings

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--posteriors", help="comma-separated names (default: every translation)")
    ap.add_argument("--out", type=Path, help="default: reports/corpus.json, or "
                    "reports/reference_audits.json with --reference-only")
    ap.add_argument("--reference-only", action="store_true",
                    help="our PyMC programs against the reference draws, no LazyPPL side")
    ap.add_argument("--pymc-backend", choices=get_args(PyMCSettings.model_fields["backend"].annotation),
                    help="PyMC NUTS backend instead of the default (e.g. auto: the measured "
                    "rule of workers/pymc_runner/choice.py)")
    ap.add_argument("--markdown", type=Path, metavar="REPORT",
                    help="print a Markdown table of an existing report and exit")
    args = ap.parse_args()
    if args.markdown:
        print(markdown_table(json.loads(args.markdown.read_text())))
        return
    os.environ.setdefault("PPL_AUDIT_DATABASE_URL", f"sqlite:///{ROOT / 'reports' / 'corpus.sqlite3'}")

    from corpus.loader import list_posteriors
    from service.local import run_batch
    from service.report import print_batch
    names = args.posteriors.split(",") if args.posteriors else list_posteriors()
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    started = time.monotonic()
    cpu_started = _cpu_seconds()
    settings = AuditSettings().with_overrides(
        {"pymc": {"backend": args.pymc_backend}} if args.pymc_backend else None)
    report = run_batch(names, settings, console=Console(stderr=True),
                       lazyppl=not args.reference_only)
    out = args.out or ROOT / "reports" / ("reference_audits.json" if args.reference_only
                                          else "corpus.json")
    report.update({"commit": commit, "wall_seconds": round(time.monotonic() - started, 1),
                   "machine": {"cores": os.cpu_count(), "python": platform.python_version(),
                               "platform": platform.platform()},
                   "cpu": {"run_seconds": round(_cpu_seconds() - cpu_started, 1),
                           **sampling_cpu([p["audit_id"] for p in report["posteriors"]
                                           if p.get("audit_id") and not p.get("reused")])}})
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print_batch(Console(width=120), report)
    print(f"report written to {out}")
    print(f"CPU-seconds: {json.dumps(report['cpu'])}")


def _cpu_seconds() -> float:
    """User + system CPU-seconds of this process and of the children it waited for."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


#: PyMC child phases that are set-up, not sampling (seconds of one thread)
_SETUP = ("import", "prewarm", "build", "compile")


def sampling_cpu(audit_ids: list[str], sessions=None, cores: int | None = None) -> dict:
    """``sampling_seconds`` of these audits' stored evidence and fits (in ``sessions``'
    database, default the configured one), summed, and the floor they set on ``cores``
    cores (default: this machine's): their sum over the cores."""
    import uuid

    import sqlalchemy as sa

    from service.db.models import FitRecord, ScopeResult
    from service.local import _session_factory

    pymc = lazyppl = pymc_cpu = 0.0
    with (sessions or _session_factory())() as session:
        for audit_id in audit_ids:
            key = uuid.UUID(audit_id)
            scopes = {r.scope: r.evidence for r in session.scalars(
                sa.select(ScopeResult).where(ScopeResult.audit_id == key))}
            fits = [(f.scope, f.language, f.look, f.summary) for f in session.scalars(
                sa.select(FitRecord).where(FitRecord.audit_id == key))]
            spent = sampling_seconds(scopes, fits)
            pymc, lazyppl = pymc + spent["pymc"], lazyppl + spent["lazyppl"]
            pymc_cpu += spent["pymc_cpu"]
    cores = cores or os.cpu_count() or 1
    return {"pymc_sampling_seconds": round(pymc, 1), "lazyppl_sampling_seconds": round(lazyppl, 1),
            "sampling_floor_seconds": round((pymc + lazyppl) / cores, 1),
            "pymc_cpu_seconds": round(pymc_cpu, 1),
            "fits_floor_seconds": round((pymc_cpu + lazyppl) / cores, 1)}


def sampling_seconds(scopes: dict[str, dict], fits: list[tuple]) -> dict[str, float]:
    """CPU-seconds one audit spent sampling, per side. ``scopes``: scope -> its evidence;
    ``fits``: (scope, language, look, summary) of its stored fits. Only the fits a look
    refitted count (a kept fit is stored again under the later look). PyMC: the child's
    CPU over the fit's attempts less the look's set-up phases (``pymc_fit``: wall
    seconds of one thread summed over the attempts, at least their CPU, so the figure is
    a lower bound); LazyPPL: the run's CPU (its compile is a separate process; a
    continued run's CPU is the continuation's). ``pymc_cpu``: the PyMC children's whole
    CPU in those fits (compiles included; a standby's import and pre-warm ran before
    the request and are not in it)."""
    setup = {}  # (scope, look, side) refitted -> PyMC set-up seconds
    for scope, evidence in scopes.items():
        for look in evidence.get("looks", []):
            fit = look.get("pymc_fit") or {}
            for side in look.get("refitted") or []:
                setup[(scope, look["look"], side)] = sum(
                    float(fit.get(k) or 0.0) for k in _SETUP) if side == "pymc" else 0.0
    out = {"pymc": 0.0, "lazyppl": 0.0, "pymc_cpu": 0.0}
    for scope, language, look, summary in fits:
        spent = setup.get((scope, look, language))
        if spent is None or language not in ("pymc", "lazyppl"):
            continue
        stats = summary.get("stats") or {}
        if language == "pymc":
            cpu = float((stats.get("process") or {}).get("cpu_seconds") or 0.0)
            out["pymc"] += max(cpu - spent, 0.0)
            out["pymc_cpu"] += cpu
        else:
            out["lazyppl"] += float(stats.get("cpu_seconds") or 0.0)
    return out


def markdown_table(report: dict) -> str:
    """One row per posterior: pair verdict, scope verdicts, reference checks, seconds (the
    audit's own wall time; * = a stored result reused, timed when it ran)."""
    rows = ["| posterior | verdict | visible | full | PyMC↔ref | LazyPPL↔ref | s |",
            "|---|---|---|---|---|---|---|"]
    for p in report["posteriors"]:
        sc, ref = p["scopes"], p["reference"]
        rows.append(f"| {p['posterior']} | {p['verdict']} | {sc.get('visible', {}).get('verdict', '')}"
                    f" | {sc.get('full', {}).get('verdict', '')} | {ref.get('pymc_vs_reference')}"
                    f" | {ref.get('lazyppl_vs_reference')} | {_seconds(p)} |")
    return "\n".join(rows)


def _seconds(row: dict) -> str:
    if row.get("reused") and row.get("audit_seconds"):
        return f"{row['audit_seconds']:.0f}*"
    return f"{row['seconds']:.0f}"


if __name__ == "__main__":
    main()
