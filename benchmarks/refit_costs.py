"""What a unit of each sampler's work costs: the constant behind the look planner's cost
weights (``workers.pipeline.PYMC_STEP_IN_EVALUATIONS``).

    .venv/bin/python benchmarks/refit_costs.py [--db URL] [--json reports/refit_costs.json]

A look that grows both sides splits an interval's error allowance at the least refit
cost (``workers.looks.split``). The costs are counted, not timed, so that the same seeds
give the same draws whatever the machine's load: a LazyPPL fit's model evaluations, a
PyMC fit's NUTS leapfrog steps times one constant, the cost of a step in evaluations.
This script reads stored audits (by default the corpus batch's own database,
``reports/corpus.sqlite3``, written by ``benchmarks/corpus_batch.py``; any database URL
the service uses works) and prints, per scope and look where both sides fitted:

* LazyPPL: run seconds of the sandboxed harness (compile excluded) per model evaluation;
* PyMC: sampling seconds (tuning and kept draws, compile excluded) per leapfrog step;
* their ratio, the cost of a step in evaluations;

then the median, quartiles and range of the ratio over the fits. The median is the
constant; the spread says how far any one model's weights may be off. Weights q times
off make a look that grows both sides cost at most (2 + √q + 1/√q) / 4 of the best
split of that interval: 12.5 % more at q = 4, 67 % at q = 20.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sqlalchemy import create_engine, text  # noqa: E402

from workers.fit import Fit  # noqa: E402
from workers.pipeline import PYMC_STEP_IN_EVALUATIONS, sampler_work  # noqa: E402


def per_unit(summary: dict, language: str) -> tuple[float, float] | None:
    """(seconds, units) of one stored fit, or None when it lacks either: the units are
    what the look planner counts (``workers.pipeline.sampler_work``), the seconds the
    sandboxed LazyPPL run or PyMC's sampling (compiles excluded)."""
    fit = Fit(language, {}, sampler=summary.get("sampler") or {},
              stats=summary.get("stats") or {}, timings=summary.get("timings") or {})
    units = sampler_work(fit)
    seconds = fit.timings.get("run" if language == "lazyppl" else "sample")
    if not (math.isfinite(units) and units > 0 and seconds):
        return None
    return float(seconds), units


def measure(url: str) -> dict:
    engine = create_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(text(
            "select a.posterior, a.name, f.scope, f.look, f.language, f.summary "
            "from fits f join audits a on a.id = f.audit_id")).all()
    fits: dict = {}
    for posterior, name, scope, look, language, summary in rows:
        got = per_unit(summary if isinstance(summary, dict) else json.loads(summary), language)
        if got is not None:
            fits.setdefault((posterior or name, scope, look), {})[language] = got
    out = []
    for (posterior, scope, look), sides in sorted(fits.items()):
        if set(sides) != {"lazyppl", "pymc"}:
            continue
        (ls, lu), (ps, pu) = sides["lazyppl"], sides["pymc"]
        out.append({"posterior": posterior, "scope": scope, "look": look,
                    "lazyppl_us_per_evaluation": round(1e6 * ls / lu, 2),
                    "pymc_us_per_step": round(1e6 * ps / pu, 2),
                    "step_in_evaluations": round((ps / pu) / (ls / lu), 3)})
    ratios = sorted(r["step_in_evaluations"] for r in out)
    summary = {}
    if ratios:
        q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
        summary = {"fits": len(ratios), "median": round(statistics.median(ratios), 3),
                   "quartiles": [round(q[0], 3), round(q[2], 3)],
                   "range": [ratios[0], ratios[-1]]}
    return {"rows": out, "step_in_evaluations": summary}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default=f"sqlite:///{ROOT / 'reports' / 'corpus.sqlite3'}")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    report = measure(args.db)
    for r in report["rows"]:
        print(f"{r['posterior'][:44]:44s} {r['scope']:8s} look {r['look']}  "
              f"LazyPPL {r['lazyppl_us_per_evaluation']:8.1f} us/evaluation  "
              f"PyMC {r['pymc_us_per_step']:8.1f} us/step  "
              f"step = {r['step_in_evaluations']:6.2f} evaluations")
    print("step in evaluations:", report["step_in_evaluations"])
    if args.json:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                                text=True).stdout.strip()
        report.update({"commit": commit, "constant_in_use": PYMC_STEP_IN_EVALUATIONS})
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
