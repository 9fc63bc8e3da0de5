"""Pareto k̂ of every parameter's tail in posteriordb's reference draws (and, with
``--audits``, in the fits of stored audits), and the draws its SD needs to be a reliable
estimate (``workers.looks.tail_draws``, docs/RULE.md "Heavy tails"): which corpus
posteriors the looks' heavy-tail asks would touch. Prints one line per parameter whose SD
needs more than a first look's 4 x 1,000 draws, and a summary; ``--all`` prints every one.

    .venv/bin/python benchmarks/tail_khat.py [--all] [--audits N]

The reference draws are iid (10,000 per posterior, thinned by posteriordb), so a
parameter flagged there has a heavy tail in its true posterior, whatever the sampler.
"""
from __future__ import annotations

import argparse
import math
import warnings

import numpy as np

from corpus import loader
from workers import looks

#: a first look's draws per fit (4 chains x 1,000)
FIRST_LOOK = 4000


def reference_khats() -> list[tuple[str, str, float]]:
    rows = []
    for name in loader.reference_posteriors():
        try:
            ref = loader.load_reference(name)
        except FileNotFoundError:  # shipped without reference draws
            continue
        for param, x in ref.draws.items():
            rows.append((name, param, looks.tail_khat(np.asarray(x))))
    return rows


def audit_khats(limit: int) -> list[tuple[str, str, float]]:
    """k̂ of each compared parameter in the stored fits of the newest ``limit`` audits."""
    import sqlalchemy as sa

    from service.config import default_database_url
    from service.db import make_engine, make_session_factory, models
    from service.db.draws import decode_draws

    rows = []
    sessions = make_session_factory(make_engine(default_database_url()))
    with sessions() as db:
        audits = db.scalars(sa.select(models.Audit).order_by(models.Audit.created_at.desc())
                            .limit(limit)).all()
        for audit in audits:
            fits = db.scalars(sa.select(models.FitRecord).where(models.FitRecord.audit_id == audit.id)).all()
            for fit in fits:
                label = f"{audit.id} {fit.scope} {fit.language}/{fit.look}"
                for param, x in decode_draws(fit.draws).items():
                    rows.append((label, param, looks.tail_khat(x)))
    return rows


def main() -> None:
    warnings.filterwarnings("ignore")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--all", action="store_true", help="print every parameter, not only flagged ones")
    ap.add_argument("--audits", type=int, default=0, help="also the newest N stored audits' fits")
    args = ap.parse_args()
    rows = reference_khats() + (audit_khats(args.audits) if args.audits else [])
    ks = np.array([k for _, _, k in rows if math.isfinite(k)])
    for where, param, k in rows:
        need = looks.tail_draws(k, 2)
        if args.all or need > FIRST_LOOK:
            print(f"{k:+.3f}  SD needs {need:.3g} draws  {where}  {param}")
    print(f"{len(rows)} parameters, {ks.size} with a k-hat; SD needs more than {FIRST_LOOK} "
          f"draws: {sum(looks.tail_draws(k, 2) > FIRST_LOOK for k in ks)}; "
          f"no variance (>= 0.5): {int((ks >= 0.5).sum())}; "
          f"quantiles 50/95/99 %: {np.quantile(ks, 0.5):+.3f} / {np.quantile(ks, 0.95):+.3f} / "
          f"{np.quantile(ks, 0.99):+.3f}")


if __name__ == "__main__":
    main()
