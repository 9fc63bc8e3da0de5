"""Audit the whole shipped posteriordb corpus and write the JSON report under reports/.

    .venv/bin/python benchmarks/corpus_batch.py [--posteriors a,b] [--out reports/corpus.json]
    .venv/bin/python benchmarks/corpus_batch.py --reference-only   # reports/reference_audits.json
    .venv/bin/python benchmarks/corpus_batch.py --markdown reports/corpus.json   # table only

Uses the local pipeline (no servers) with the product's default settings and a SQLite
database of its own (reports/corpus.sqlite3, not committed), so an interrupted run
resumes where it stopped: identical audits are reused. The report records the commit
it ran on, the machine and the wall time. ``--reference-only`` audits our PyMC
translations alone against posteriordb's reference draws (reference audits, no LazyPPL
side; the same as ``ppl-audit batch posteriordb --lazyppl-from none``).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
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
    settings = AuditSettings().with_overrides(
        {"pymc": {"backend": args.pymc_backend}} if args.pymc_backend else None)
    report = run_batch(names, settings, console=Console(stderr=True),
                       lazyppl=not args.reference_only)
    out = args.out or ROOT / "reports" / ("reference_audits.json" if args.reference_only
                                          else "corpus.json")
    report.update({"commit": commit, "wall_seconds": round(time.monotonic() - started, 1),
                   "machine": {"cores": os.cpu_count(), "python": platform.python_version(),
                               "platform": platform.platform()}})
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print_batch(Console(width=120), report)
    print(f"report written to {out}")


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
