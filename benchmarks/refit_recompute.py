"""How much of a later look's fitting repeats the look before it (issue 11): the case for
continuing a side's chains across looks instead of refitting them.

    .venv/bin/python benchmarks/refit_recompute.py [--db URL] [--audit ID-PREFIX] [--json FILE]

A look that grows a side refits it with the same seed and more draws. Where a sampler's
draws do not depend on how many are asked for, the refit's first draws are exactly the
previous fit's: everything up to there (warm-up or tuning, and the earlier draws) is
computed again. This script reads stored audits (default: the CLI's database; any URL the
service uses works), and for each scope that took more than one look and each side that
refitted, says

* whether the earlier fit's draws are a prefix of the later one's, for every chain and
  parameter (then a continued chain would have given today's draws exactly);
* the sampler iterations per chain the refit ran (LazyPPL: warm-up + draws x thin;
  PyMC: tune + draws) and how many of them repeat the earlier fit's;
* the refit's sampling seconds (LazyPPL: the harness's clock; PyMC: sampling, compile
  excluded) and the share of them a continuation would not have spent, pro rata.

A fit that continued the earlier chains (``sampler.continued_from``: LazyPPL since the
continued chains of issue 11, PyMC since its extended nutpie chains) repeated nothing: its
row says "continued", its iterations are the new ones only.

It prints one row per refit and, per side, the sums over the scopes read.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from sqlalchemy import create_engine, text  # noqa: E402

from service.config import default_database_url  # noqa: E402
from service.db.draws import decode_draws  # noqa: E402


def iterations(language: str, sampler: dict) -> int:
    """Sampler iterations per chain of one fit (warm-up or tuning included)."""
    if language == "lazyppl":
        return int(sampler["warmup"]) + int(sampler["draws"]) * int(sampler["thin"])
    return int(sampler["tune"]) + int(sampler["draws"])


def is_prefix(earlier: dict[str, np.ndarray], later: dict[str, np.ndarray]) -> bool:
    if set(earlier) != set(later):
        return False
    for name, x in earlier.items():
        y = later[name]
        if x.shape[0] != y.shape[0] or x.shape[1] > y.shape[1]:
            return False
        if not np.array_equal(x, y[:, : x.shape[1]]):
            return False
    return True


def measure(url: str, audit: str | None = None) -> dict:
    engine = create_engine(url)
    query = ("select f.audit_id, coalesce(a.posterior, a.name), f.scope, f.language, f.look, "
             "f.summary, f.draws from fits f join audits a on a.id = f.audit_id")
    params = {}
    if audit:
        query += " where cast(f.audit_id as text) like :audit"
        params["audit"] = audit + "%"
    with engine.connect() as conn:
        rows = conn.execute(text(query + " order by f.audit_id, f.scope, f.language, f.look"),
                            params).all()
    fits: dict = {}
    for audit_id, posterior, scope, language, look, summary, blob in rows:
        summary = summary if isinstance(summary, dict) else json.loads(summary)
        fits.setdefault((str(audit_id), posterior, scope, language), []).append(
            (look, summary, blob))
    out = []
    for (audit_id, posterior, scope, language), looks in fits.items():
        for (_, s0, b0), (look, s1, b1) in zip(looks, looks[1:]):
            if s0["sampler"].get("draws") == s1["sampler"].get("draws"):
                continue  # the same fit kept (a look that did not grow this side)
            total = iterations(language, s1["sampler"])
            again = iterations(language, s0["sampler"])  # what a continuation would skip
            seconds = float(s1["timings"].get("sample") or 0.0)
            continued = "continued_from" in s1["sampler"]
            if continued:  # it did continue: it ran only the new iterations, none again
                total, again = total - again, 0
            out.append({"audit": audit_id[:8], "posterior": posterior, "scope": scope,
                        "language": language, "look": look,
                        "draws": [s0["sampler"]["draws"], s1["sampler"]["draws"]],
                        "prefix": is_prefix(decode_draws(b0), decode_draws(b1)),
                        "continued": continued,
                        "iterations": total, "repeated": again,
                        "seconds": round(seconds, 2),
                        "seconds_repeated": round(seconds * again / total, 2)})
    sums = {}
    for language in ("lazyppl", "pymc"):
        rs = [r for r in out if r["language"] == language]
        sums[language] = {"refits": len(rs), "prefix": sum(r["prefix"] for r in rs),
                          "continued": sum(r["continued"] for r in rs),
                          "seconds": round(sum(r["seconds"] for r in rs), 1),
                          "seconds_repeated": round(sum(r["seconds_repeated"] for r in rs), 1)}
    return {"rows": out, "sums": sums}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default=default_database_url())
    ap.add_argument("--audit", help="only audits whose id starts with this")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    report = measure(args.db, args.audit)
    for r in report["rows"]:
        print(f"{r['posterior'][:40]:40s} {r['scope']:8s} {r['language']:7s} look {r['look']} "
              f"draws {r['draws'][0]:>6} -> {r['draws'][1]:>6}  prefix {str(r['prefix']):5s} "
              f"iterations {r['repeated']:>7}/{r['iterations']:<7} repeated  "
              f"{r['seconds_repeated']:7.1f} of {r['seconds']:7.1f} s"
              + ("  (continued)" if r["continued"] else ""))
    for language, s in report["sums"].items():
        print(f"{language}: {s['refits']} refits ({s['continued']} continued), {s['prefix']} "
              f"with the earlier draws as prefix; {s['seconds_repeated']} of {s['seconds']} s "
              f"sampling repeated")
    if args.json:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                                text=True).stdout.strip()
        report["commit"] = commit
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
