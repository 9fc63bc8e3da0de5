"""NUTS backends for the PyMC runner: start-up, compile, sampling, ESS, cold vs warm cache.

Run on demand (not in CI)::

    .venv/bin/python benchmarks/nuts_backends.py                      # all, ~30 min on 2 cores
    .venv/bin/python benchmarks/nuts_backends.py --posterior eight_schools --backend nutpie

Every fit goes through the real path (``workers.pymc_runner.fit_pymc``: verifier,
sandboxed child, 4 chains x 1000 draws after 1000 tuning steps, retries disabled).
"Cold" points ``PPL_AUDIT_CACHE`` at an empty directory (no PyTensor C modules, numba
or JAX caches); "warm" repeats the identical fit with that cache filled. ESS is ArviZ's
bulk ESS, the minimum over every posteriordb reference parameter; ``|d| max`` is the
largest |mean - reference mean| / reference SD over those parameters, a sanity check
(with ~4,000 effective draws, values below ~0.1 are noise).

Measured 2026-11-30 on the 2-core build machine under a load average of 7-10 (other
jobs), so wall seconds are inflated ~2-3x; "CPU s" (whole child process) is the
steadier figure. Warm cache, 4 x 1000 draws:

    posterior      backend/mass      compile  sample  process  CPU s  min ESS  ESS/s*
    eight schools  nutpie diag           7.5    0.22     17.6    8.1    2,341     133
                   nutpie low_rank      11.2    0.75     16.1    7.9    1,982     123
                   pymc diag             3.7   18.1      29.8    9.9    1,956      66
                   numpyro diag          2.8    3.8      18.5    5.7    1,999     108
    kidiq momiq    nutpie diag          16.2    1.05     24.6    9.0      702      28
                   nutpie low_rank      15.0    0.65     24.8    8.6    6,618     267
                   pymc dense            5.5   28.5      45.5   13.0    6,136     135
                   numpyro dense         3.0   16.2      31.9    8.9    3,477     109
    diamonds       nutpie low_rank       6.7    7.6      18.7   13.3    6,078     325
                   pymc dense            6.1  153.6     171.2   63.6    8,011      47
                   numpyro dense         4.8   36.3      53.2   16.8    4,282      81

(ESS/s* = min ESS per second of the whole process.) Cold caches add 15-45 s of
compilation for every backend (PyTensor C modules, numba, XLA). nutpie's numba
wrappers are recompiled every run (~5 CPU s even warm); its sampling is the fastest by
far. Default: nutpie + low_rank (workers/pymc_runner/runner.py).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import sandbox  # noqa: E402
from workers.errors import AuditError  # noqa: E402
from workers.pymc_runner import fit_pymc  # noqa: E402

# The posteriordb subset shipped in corpus/ (POSTERIORDB overrides it).
PDB = Path(os.environ.get("POSTERIORDB", Path(__file__).resolve().parents[1] / "corpus"
                          / "posterior_database"))

EIGHT_SCHOOLS = '''
import numpy as np
import pymc as pm

def model(data):
    with pm.Model() as m:
        mu = pm.Normal("mu", 0.0, 5.0)
        tau = pm.HalfCauchy("tau", 5.0)
        theta_trans = pm.Normal("theta_trans", 0.0, 1.0, shape=int(data["J"]))
        theta = pm.Deterministic("theta", mu + tau * theta_trans)
        pm.Normal("y", theta, np.asarray(data["sigma"], dtype=float),
                  observed=np.asarray(data["y"], dtype=float))
    return m
'''

KIDIQ_MOMIQ = '''
import numpy as np
import pymc as pm

def model(data):
    mom_iq = np.asarray(data["mom_iq"], dtype=float)
    with pm.Model() as m:
        beta = pm.Flat("beta", shape=2)
        sigma = pm.HalfCauchy("sigma", 2.5)
        pm.Normal("kid_score", beta[0] + beta[1] * mom_iq, sigma,
                  observed=np.asarray(data["kid_score"], dtype=float))
    return m
'''

DIAMONDS = '''
import numpy as np
import pymc as pm

def model(data):
    K = int(data["K"])
    X = np.asarray(data["X"], dtype=float).reshape(-1, K)
    Xc = X[:, 1:] - X[:, 1:].mean(axis=0)
    with pm.Model() as m:
        b = pm.Normal("b", 0.0, 1.0, shape=K - 1)
        intercept = pm.StudentT("Intercept", nu=3.0, mu=8.0, sigma=10.0)
        sigma = pm.HalfStudentT("sigma", nu=3.0, sigma=10.0)
        pm.Normal("Y", intercept + pm.math.dot(Xc, b), sigma,
                  observed=np.asarray(data["Y"], dtype=float))
    return m
'''

POSTERIORS = {
    "eight_schools": ("eight_schools-eight_schools_noncentered", "eight_schools", EIGHT_SCHOOLS),
    "kidiq": ("kidiq-kidscore_momiq", "kidiq", KIDIQ_MOMIQ),
    "diamonds": ("diamonds-diamonds", "diamonds", DIAMONDS),
}
# (backend, mass matrix). Diagonal adaptation on diamonds takes 150-600 s per fit
# (PITFALLS.md); it runs only with --diamonds-diag and under --diag-cap seconds.
CONFIGS = [("nutpie", "diag"), ("pymc", "diag"), ("numpyro", "diag"),
           ("nutpie", "low_rank"), ("pymc", "dense"), ("numpyro", "dense")]


def _read_zip_json(path: Path):
    with zipfile.ZipFile(path) as z:
        return json.loads(z.read(z.namelist()[0]))


def reference(posterior: str) -> dict[str, tuple[float, float]]:
    chains = _read_zip_json(PDB / "reference_posteriors" / "draws" / "draws" / f"{posterior}.json.zip")
    return {name: (float(np.mean(v)), float(np.std(v)))
            for name in chains[0]
            for v in [np.concatenate([np.asarray(c[name], dtype=float) for c in chains])]}


def min_bulk_ess(draws: dict[str, np.ndarray], names) -> float:
    import arviz as az

    return min(float(az.ess(np.asarray(draws[n]), method="bulk")) for n in names)


def run_one(key: str, backend: str, mass: str, cache: Path, args) -> dict:
    posterior, data_name, source = POSTERIORS[key]
    data = _read_zip_json(PDB / "data" / "data" / f"{data_name}.json.zip")
    os.environ["PPL_AUDIT_CACHE"] = str(cache)
    wall = args.diag_cap if (key == "diamonds" and mass == "diag") else args.wall
    limits = sandbox.Limits(cpu_seconds=4 * wall, wall_seconds=wall, memory_mb=args.memory_mb)
    started = time.monotonic()
    try:
        fit = fit_pymc(source, data, chains=4, tune=1000, draws=1000, seed=args.seed,
                       backend=backend, mass_matrix=mass, limits=limits,
                       retry_target_accepts=(), cores=args.cores)
    except AuditError as exc:
        return {"error": f"{exc.code}: {exc}", "wall": time.monotonic() - started}
    ref = reference(posterior)
    names = [n for n in ref if n in fit.draws]
    ess = min_bulk_ess(fit.draws, names)
    d_max = max(abs(fit.draws[n].mean() - ref[n][0]) / ref[n][1] for n in names)
    t = fit.timings
    return {"import": t["import"], "compile": t["compile"], "sample": t["sample"],
            "process": t["process"], "ess": ess, "ess_per_s": ess / max(t["sample"], 1e-9),
            "ess_per_s_total": ess / t["process"], "divergences": fit.divergences,
            "cpu": fit.stats["process"]["cpu_seconds"],
            "d_max": d_max, "vm_mb": fit.stats["memory_mb"].get("virtual"),
            "rss_mb": fit.stats["memory_mb"].get("resident")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--posterior", choices=list(POSTERIORS), action="append")
    parser.add_argument("--backend", choices=["nutpie", "pymc", "numpyro"], action="append")
    parser.add_argument("--mass-matrix", choices=["diag", "dense", "low_rank"], action="append")
    parser.add_argument("--no-cold", action="store_true", help="skip the cold-cache runs")
    parser.add_argument("--diamonds-diag", action="store_true")
    parser.add_argument("--diag-cap", type=float, default=300.0)
    parser.add_argument("--wall", type=float, default=600.0)
    parser.add_argument("--memory-mb", type=int, default=4096)
    parser.add_argument("--cores", type=int, default=2,
                        help="processes/threads for the chains (pymc: 1 = chains in turn)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    header = (f"{'posterior':14} {'backend':8} {'mass':8} {'cache':5} {'import':>6} "
              f"{'compile':>7} {'sample':>7} {'process':>7} {'CPU s':>6} {'minESS':>7} {'ESS/s':>8} "
              f"{'ESS/s*':>7} {'div':>4} {'|d|max':>6} {'VM MB':>6} {'RSS MB':>6}")
    print(header, "\n" + "-" * len(header), flush=True)
    for key in args.posterior or list(POSTERIORS):
        for backend in ("nutpie", "pymc", "numpyro"):
            configs = [mass for b, mass in CONFIGS if b == backend
                       and (not args.mass_matrix or mass in args.mass_matrix)
                       and not (key == "diamonds" and mass == "diag" and not args.diamonds_diag)]
            if (args.backend and backend not in args.backend) or not configs:
                continue
            # One cache per posterior and backend: the first configuration runs cold and
            # then warm; later configurations (another mass matrix, same model) run warm.
            with tempfile.TemporaryDirectory(prefix="ppl-audit-bench-cache-") as cache:
                for i, mass in enumerate(configs):
                    states = ["warm"] if (i or args.no_cold) else ["cold", "warm"]
                    for state in states:
                        _print_row(key, backend, mass, state,
                                   run_one(key, backend, mass, Path(cache), args))


def _print_row(key, backend, mass, state, r) -> None:
    prefix = f"{key:14} {backend:8} {mass:8} {state:5}"
    if "error" in r:
        print(f"{prefix} after {r['wall']:.0f} s: {r['error']}", flush=True)
        return
    print(f"{prefix} {r['import']:6.1f} {r['compile']:7.1f} {r['sample']:7.2f} "
          f"{r['process']:7.1f} {r['cpu']:6.1f} {r['ess']:7.0f} {r['ess_per_s']:8.0f} "
          f"{r['ess_per_s_total']:7.0f} {r['divergences']:4d} {r['d_max']:6.3f} "
          f"{r['vm_mb'] or 0:6.0f} {r['rss_mb'] or 0:6.0f}", flush=True)


if __name__ == "__main__":
    main()
