"""Extended nutpie chains against blocking fits and refits (issue 11): same draws, how
many seconds.

    .venv/bin/python benchmarks/extended_pymc_chains.py [--posteriors A,B] [--draws 1000,3000]
        [--scope full|visible] [--accepts 0.9,0.99] [--mass-matrix low_rank] [--seed 7]

For each corpus posterior (our PyMC translation on the scope's data; 4 chains, 1,000
tuning steps) and each target_accept, two sandboxed PyMC sessions fit the first look's
draws and then the later look's, one attempt each: one session with a draw cap (the
chains run in nutpie's background sampler and are extended by the later fit,
``backends._Extendable``), one without (a blocking fit on the job's cores, then a refit
from the start: what every later look did before). Prints whether the later fits' draws
are identical (they must be), each fit's sampling seconds, and the draws each chain held
when paused (what it sampled past the draws asked while a slower chain caught up).
Fits run one after another; take the figures on a quiet machine.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from corpus.loader import derive_visible, load_data, read_meta  # noqa: E402
from sandbox import Limits  # noqa: E402
from workers.pymc_runner import PymcSession  # noqa: E402

LIMITS = Limits(cpu_seconds=7200, memory_mb=4096, wall_seconds=3600)


def _session_fits(source, data, draws, accept, mass_matrix, seed, cap):
    with PymcSession(LIMITS) as session:
        return [session.fit(source, data, draws=n, seed=seed, target_accept=accept,
                            retry_target_accepts=(), mass_matrix=mass_matrix,
                            backend="nutpie", draw_cap=cap) for n in draws]


def measure(name: str, scope: str, draws: list[int], accept: float, mass_matrix: str,
            seed: int) -> dict:
    source = (ROOT / "corpus" / "translations" / name / "model.py").read_text()
    data = load_data(name)
    if scope == "visible":
        data = derive_visible(data, read_meta(name))
    extended = _session_fits(source, data, draws, accept, mass_matrix, seed, 50_000)
    plain = _session_fits(source, data, draws, accept, mass_matrix, seed, None)
    same = all(np.array_equal(a.draws[k], b.draws[k])
               for a, b in zip(extended, plain) for k in b.draws)
    return {"posterior": name, "scope": scope, "target_accept": accept,
            "mass_matrix": mass_matrix, "draws": draws, "identical": same,
            "divergences": [f.divergences for f in plain],
            "extended_sample": [round(f.timings["sample"], 3) for f in extended],
            "plain_sample": [round(f.timings["sample"], 3) for f in plain],
            "held": [f.stats["session"].get("sampled_ahead") for f in extended]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--posteriors", default="eight_schools-eight_schools_centered,"
                                            "gp_pois_regr-gp_pois_regr")
    ap.add_argument("--draws", default="1000,3000")
    ap.add_argument("--scope", default="full", choices=("full", "visible"))
    ap.add_argument("--accepts", default="0.9,0.99")
    ap.add_argument("--mass-matrix", default="low_rank")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    draws = [int(n) for n in args.draws.split(",")]
    print(f"# load {os.getloadavg()[0]:.2f}")
    for name in args.posteriors.split(","):
        for accept in (float(a) for a in args.accepts.split(",")):
            row = measure(name, args.scope, draws, accept, args.mass_matrix, args.seed)
            print(json.dumps(row))
    print(f"# load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
