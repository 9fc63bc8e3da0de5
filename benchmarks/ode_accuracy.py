"""Log-likelihood error of the corpus's fixed-step ODE programs against a tight solution.

    .venv/bin/python benchmarks/ode_accuracy.py [--draws 200] [--seed 1]

For each ODE posterior (hudson_lynx_hare-lotka_volterra, one_comp_mm_elim_abs), the
PyMC program's own log-likelihood graph (the observed variables' log-density, built by
`model.py` from posteriordb's full data, pytensor.scan RK4 inside) is evaluated at
posteriordb reference draws (a random sample plus the draws with the most extreme
values of each parameter) and compared with the same log-likelihood computed from
SciPy's `solve_ivp` at tight tolerances. Reports the largest and median absolute
error, and how far two different tight reference solvers are apart (the reference's
own error). Trusted programs only (it runs them outside the sandbox).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

LV = "hudson_lynx_hare-lotka_volterra"
ONE_COMP = "one_comp_mm_elim_abs-one_comp_mm_elim_abs"


def lognormal_logpdf(y, mu, sigma):
    y = np.asarray(y, dtype=float)
    return -np.log(y * sigma * math.sqrt(2 * math.pi)) - (np.log(y) - mu) ** 2 / (2 * sigma ** 2)


def program_loglik(name: str, data: dict):
    """(parameter names, f(values) -> log-likelihood) from the program's own graph."""
    import pymc as pm

    namespace: dict = {}
    source = (ROOT / "corpus" / "translations" / name / "model.py").read_text()
    exec(compile(source, f"{name}/model.py", "exec"), namespace)  # noqa: S102 - our own program
    model = namespace["model"](data)
    free = list(model.free_RVs)
    loglik = sum(pm.logp(rv, model.rvs_to_values[rv]).sum() for rv in model.observed_RVs)
    # the observed values are constants of the graph; the inputs are the free variables
    fn = pm.compile(free, loglik, on_unused_input="ignore")
    return [rv.name for rv in free], fn


def lv_reference(data: dict, p: dict, method: str, rtol: float) -> float:
    from scipy.integrate import solve_ivp

    a, b, g, d = p["theta"]
    ts = np.asarray(data["ts"], dtype=float)
    y = np.asarray(data["y"], dtype=float)
    sol = solve_ivp(lambda t, z: [(a - b * z[1]) * z[0], (-g + d * z[0]) * z[1]],
                    (0.0, ts[-1]), p["z_init"], t_eval=ts, method=method, rtol=rtol,
                    atol=rtol)
    z = sol.y.T
    s, z0 = p["sigma"], p["z_init"]
    return float(sum(lognormal_logpdf(data["y_init"][k], math.log(z0[k]), s[k])
                     + lognormal_logpdf(y[:, k], np.log(z[:, k]), s[k]).sum() for k in (0, 1)))


def one_comp_reference(data: dict, p: dict, method: str, rtol: float) -> float:
    from scipy.integrate import solve_ivp

    ka, km, vm = p["k_a"], p["K_m"], p["V_m"]
    D, V = data["D"], data["V"]
    times = np.asarray(data["times"], dtype=float)

    def rhs(t, c):
        dose = math.exp(-ka * t) * D * ka / V if t > 0 else 0.0
        return [dose - (vm / V) * c[0] / (km + c[0])]

    sol = solve_ivp(rhs, (float(data["t0"]), times[-1]), [0.0], t_eval=times, method=method,
                    rtol=rtol, atol=1e-14, first_step=1e-9)
    return float(lognormal_logpdf(data["C_hat"], np.log(sol.y[0]), p["sigma"]).sum())


SETUP = {
    LV: (lv_reference, ("DOP853", 1e-12), ("Radau", 1e-10)),
    ONE_COMP: (one_comp_reference, ("Radau", 1e-11), ("LSODA", 1e-11)),
}


def measure(name: str, n_draws: int, seed: int) -> dict:
    from corpus.loader import load_data, load_reference
    from workers.fit import base_name

    data = load_data(name)
    reference = load_reference(name)
    names, fn = program_loglik(name, data)
    total = next(iter(reference.draws.values())).size
    flat = {k: v.reshape(-1) for k, v in reference.draws.items()}
    rng = np.random.default_rng(seed)
    picked = set(rng.choice(total, size=min(n_draws, total), replace=False).tolist())
    for scalar in flat:  # the extremes of every parameter
        if base_name(scalar) in names:
            picked |= {int(np.argmin(flat[scalar])), int(np.argmax(flat[scalar]))}
    solve, (m1, r1), (m2, r2) = SETUP[name]
    errors, spread = [], []
    started = time.perf_counter()
    for i in sorted(picked):
        p = {}
        for n in names:
            scalars = [k for k in flat if base_name(k) == n]
            vals = [flat[k][i] for k in scalars]
            p[n] = vals if len(scalars) > 1 or "[" in scalars[0] else vals[0]
        ours = float(fn(*[np.asarray(p[n], dtype=float) for n in names]))
        tight = solve(data, p, m1, r1)
        errors.append(abs(ours - tight))
        spread.append(abs(solve(data, p, m2, r2) - tight))
    errors, spread = np.asarray(errors), np.asarray(spread)
    worst = sorted(picked)[int(np.argmax(errors))]
    return {"posterior": name, "draws": len(picked), "max_abs_error": float(errors.max()),
            "median_abs_error": float(np.median(errors)),
            "reference": f"{m1} rtol {r1:g}", "reference_vs_" + m2: float(spread.max()),
            "worst_draw": {k: float(v[worst]) for k, v in flat.items()
                           if base_name(k) in names},
            "seconds": round(time.perf_counter() - started, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--posteriors", default=f"{LV},{ONE_COMP}")
    args = ap.parse_args()
    for name in args.posteriors.split(","):
        print(json.dumps(measure(name, args.draws, args.seed)), flush=True)


if __name__ == "__main__":
    main()
