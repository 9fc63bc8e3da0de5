"""Continued LazyPPL chains against refits (issue 11): same draws, less sampling.

    .venv/bin/python benchmarks/continued_chains.py [--posteriors A,B] [--draws 1000,3000]
                                                    [--scope full|visible] [--seed 7]

For each corpus posterior (our LazyPPL translation, on the scope's data, audit settings:
4 chains, 4,000 warm-up iterations, thinning 10), fits the first look's draws, then the
later look's draws twice: continuing the first fit's chains from their checkpoints, and
as a fresh refit reckoning the multi-start budget from the first look's draws (what the
pipeline does, docs/ARCHITECTURE.md "Continued chains"). Prints whether the two give
identical draws and chain statistics (they must), the seconds each took (the harness's
sampling clock and the sandboxed run's wall time) and the checkpoints' size.
Each fit runs in the sandbox, one after the other; take the figures on a quiet machine.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from corpus.loader import derive_visible, load_data, read_meta  # noqa: E402
from haskell_bridge import fit_lazyppl  # noqa: E402
from sandbox import Limits  # noqa: E402

SETTINGS = dict(chains=4, warmup=4000, thin=10, kernel="default")
LIMITS = Limits(cpu_seconds=3600, memory_mb=4096, wall_seconds=3600)


def _chain_stats(fit) -> list[dict]:
    return [{k: v for k, v in c.items() if k != "seconds"} for c in fit.stats["chains"]]


def measure(name: str, scope: str, first: int, later: int, seed: int) -> dict:
    source = (ROOT / "corpus" / "translations" / name / "Model.hs").read_text()
    data = load_data(name)
    if scope == "visible":
        data = derive_visible(data, read_meta(name))
    earlier = fit_lazyppl(source, data, draws=first, seed=seed, limits=LIMITS, **SETTINGS)
    continued = fit_lazyppl(source, data, draws=later, seed=seed, limits=LIMITS,
                            budget_draws=first, resume=earlier, **SETTINGS)
    refit = fit_lazyppl(source, data, draws=later, seed=seed, limits=LIMITS,
                        budget_draws=first, **SETTINGS)
    same = (all(np.array_equal(continued.draws[n], refit.draws[n]) for n in refit.draws)
            and _chain_stats(continued) == _chain_stats(refit))
    return {"posterior": name, "scope": scope, "draws": [first, later], "identical": same,
            "continued": {k: continued.timings[k] for k in ("sample", "run")},
            "refit": {k: refit.timings[k] for k in ("sample", "run")},
            "checkpoint_bytes_per_chain": earlier.stats["checkpoint_bytes"] // SETTINGS["chains"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--posteriors", default="eight_schools-eight_schools_noncentered,"
                                            "gp_pois_regr-gp_pois_regr")
    ap.add_argument("--draws", default="1000,3000", help="first look's and later look's draws")
    ap.add_argument("--scope", choices=("full", "visible"), default="full")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    first, later = (int(x) for x in args.draws.split(","))
    for name in args.posteriors.split(","):
        r = measure(name, args.scope, first, later, args.seed)
        print(f"{name:45s} {r['scope']:7s} {first} -> {later} draws: identical {r['identical']}; "
              f"continued {r['continued']['sample']:6.2f} s sampling, {r['continued']['run']:6.2f} s run; "
              f"refit {r['refit']['sample']:6.2f} s, {r['refit']['run']:6.2f} s; "
              f"checkpoint {r['checkpoint_bytes_per_chain'] / 1e3:.0f} kB per chain", flush=True)
    print(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
