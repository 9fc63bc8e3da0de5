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

``--lazyppl`` instead checks the LazyPPL side's solver, ``LazyPPL.ODE.dormandPrince``, with
the right-hand sides of the corpus's ``Model.hs`` programs: a small trusted Haskell program
(compiled against our lazyppl build, GHC -O2) solves each picked draw at every tolerance
pair of :data:`LAZYPPL_TOLERANCES` and times the solves (CPU microseconds per solve, each
solve repeated); the log-likelihood from its states is compared with the same tight SciPy
solution. Prints one JSON line per posterior and tolerance pair.
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


def pick_draws(flat: dict, n_draws: int, seed: int, names) -> list[int]:
    """Indices of a random sample of reference draws plus the draws with the smallest and
    largest value of every scalar of the parameters ``names``."""
    from workers.fit import base_name

    total = next(iter(flat.values())).size
    rng = np.random.default_rng(seed)
    picked = set(rng.choice(total, size=min(n_draws, total), replace=False).tolist())
    for scalar in flat:
        if base_name(scalar) in names:
            picked |= {int(np.argmin(flat[scalar])), int(np.argmax(flat[scalar]))}
    return sorted(picked)


def measure(name: str, n_draws: int, seed: int) -> dict:
    from corpus.loader import load_data, load_reference
    from workers.fit import base_name

    data = load_data(name)
    reference = load_reference(name)
    names, fn = program_loglik(name, data)
    flat = {k: v.reshape(-1) for k, v in reference.draws.items()}
    picked = pick_draws(flat, n_draws, seed, names)
    solve, (m1, r1), (m2, r2) = SETUP[name]
    errors, spread = [], []
    started = time.perf_counter()
    for i in picked:
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
    worst = picked[int(np.argmax(errors))]
    return {"posterior": name, "draws": len(picked), "max_abs_error": float(errors.max()),
            "median_abs_error": float(np.median(errors)),
            "reference": f"{m1} rtol {r1:g}", "reference_vs_" + m2: float(spread.max()),
            "worst_draw": {k: float(v[worst]) for k, v in flat.items()
                           if base_name(k) in names},
            "seconds": round(time.perf_counter() - started, 1)}


#: (rtol, atol) pairs checked by --lazyppl; the first of each is what Model.hs uses.
LAZYPPL_TOLERANCES = {
    LV: [(1e-6, 1e-6), (1e-8, 1e-8), (1e-5, 1e-3)],
    ONE_COMP: [(1e-6, 1e-8), (1e-8, 1e-10), (1e-6, 1e-6)],
}

#: The right-hand sides as in the Model.hs programs; parameters p, data constants c.
HASKELL_RHS = {
    LV: "rhs p _ _ [u, v] = [(p !! 0 - p !! 1 * v) * u, (-(p !! 2) + p !! 3 * u) * v]\n"
        "rhs _ _ _ _ = error \"two components\"",
    ONE_COMP: "rhs p c t [x] = [dose - (p !! 2 / vol) * x / (p !! 1 + x)]\n"
              "  where dose = if t > 0 then exp (-(p !! 0) * t) * (c !! 0) * (p !! 0) / vol else 0\n"
              "        vol = c !! 1\n"
              "rhs _ _ _ _ = error \"one component\"",
}

HASKELL_MAIN = """module Main (main) where
import Control.Monad (forM_)
import System.CPUTime (getCPUTime)
import LazyPPL.ODE (dormandPrince)

{rhs}

-- stdin: line 1 "rtol atol repeats", line 2 "t0 ts...", line 3 data constants, then one
-- line per draw "parameters... initial state..." (the state's size is given by nstate)
main :: IO ()
main = do
  ls <- lines <$> getContents
  let [rtol, atol, reps] = map read (words (head ls)) :: [Double]
      (t0 : ts) = map read (words (ls !! 1)) :: [Double]
      c = map read (words (ls !! 2)) :: [Double]
      nstate = {nstate} :: Int
  forM_ (drop 3 ls) $ \\line -> do
    let xs = map read (words line) :: [Double]
        (p, y0) = splitAt (length xs - nstate) xs
        solve k = dormandPrince rtol atol (rhs (p ++ [k * 0]) c) t0 y0 ts
    start <- getCPUTime
    let total = sum [maybe 0 (sum . map sum) (solve (fromIntegral k)) | k <- [1 .. round reps :: Int]]
    total `seq` return ()
    end <- getCPUTime
    let micro = fromIntegral (end - start) / 1e6 / reps :: Double
    putStrLn (show micro ++ " " ++ maybe "nothing" (unwords . map show . concat) (solve 0))
"""


def lazyppl_solver(name: str, n_draws: int, seed: int, repeats: int = 50) -> list[dict]:
    """The LazyPPL solver's log-likelihood error and CPU time per solve, per tolerance pair."""
    import subprocess
    import tempfile

    from corpus.loader import load_data, load_reference
    from haskell_bridge.compile import package_flags
    from haskell_bridge.paths import ghc_executable, lazyppl_build
    from workers.fit import base_name

    data = load_data(name)
    reference = load_reference(name)
    flat = {k: v.reshape(-1) for k, v in reference.draws.items()}
    picked = pick_draws(flat, n_draws, seed, {base_name(k) for k in flat})
    if name == LV:
        times = [0.0, *map(float, data["ts"])]
        consts: list[float] = []
        rows = [[*(flat[f"theta[{k}]"][i] for k in range(1, 5)),
                 *(flat[f"z_init[{k}]"][i] for k in (1, 2))] for i in picked]
        nstate = 2
    else:
        times = [float(data["t0"]), *map(float, data["times"])]
        consts = [float(data["D"]), float(data["V"])]
        rows = [[flat["k_a"][i], flat["K_m"][i], flat["V_m"][i], 0.0] for i in picked]
        nstate = 1
    params = [{k: float(v[i]) for k, v in flat.items()} for i in picked]
    for p in params:  # the reference solvers' parameter layout
        if name == LV:
            p["theta"] = [p[f"theta[{k}]"] for k in range(1, 5)]
            p["z_init"] = [p["z_init[1]"], p["z_init[2]"]]
            p["sigma"] = [p["sigma[1]"], p["sigma[2]"]]
    solve, (m1, r1), _ = SETUP[name]
    tight = [solve(data, p, m1, r1) for p in params]

    def loglik(p: dict, states: list[float]) -> float:
        if name == LV:
            z = np.asarray(states).reshape(-1, 2)
            y, s, z0 = np.asarray(data["y"], dtype=float), p["sigma"], p["z_init"]
            return float(sum(lognormal_logpdf(data["y_init"][k], math.log(z0[k]), s[k])
                             + lognormal_logpdf(y[:, k], np.log(z[:, k]), s[k]).sum()
                             for k in (0, 1)))
        return float(lognormal_logpdf(data["C_hat"], np.log(np.asarray(states)),
                                      p["sigma"]).sum())

    build = lazyppl_build()
    out = []
    with tempfile.TemporaryDirectory(prefix="ode-bench-") as tmp:
        (Path(tmp) / "Main.hs").write_text(
            HASKELL_MAIN.replace("{rhs}", HASKELL_RHS[name]).replace("{nstate}", str(nstate)))
        subprocess.run([ghc_executable(), "-O2", "-hide-all-packages",
                        *package_flags(build, thinned=False), "-package", "base",
                        "Main.hs", "-o", "solve"], cwd=tmp, check=True, capture_output=True)
        for rtol, atol in LAZYPPL_TOLERANCES[name]:
            stdin = "\n".join([f"{rtol!r} {atol!r} {repeats}", " ".join(map(repr, times)),
                                " ".join(map(repr, consts)),
                                *(" ".join(map(repr, map(float, r))) for r in rows)]) + "\n"
            done = subprocess.run([str(Path(tmp) / "solve")], input=stdin, text=True,
                                  capture_output=True, check=True)
            micros, errors, failed = [], [], 0
            for p, t, line in zip(params, tight, done.stdout.splitlines()):
                first, rest = line.split(" ", 1)
                micros.append(float(first))
                if rest == "nothing":
                    failed += 1
                    continue
                errors.append(abs(loglik(p, [float(x) for x in rest.split()]) - t))
            out.append({"posterior": name, "solver": "LazyPPL.ODE.dormandPrince",
                        "rtol": rtol, "atol": atol, "draws": len(picked), "failed": failed,
                        "max_abs_error": max(errors), "median_abs_error": float(np.median(errors)),
                        "reference": f"{m1} rtol {r1:g}",
                        "median_cpu_us_per_solve": float(np.median(micros)),
                        "max_cpu_us_per_solve": float(max(micros))})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--posteriors", default=f"{LV},{ONE_COMP}")
    ap.add_argument("--lazyppl", action="store_true",
                    help="check the LazyPPL solver (LazyPPL.ODE) instead of the PyMC graphs")
    args = ap.parse_args()
    for name in args.posteriors.split(","):
        if args.lazyppl:
            for row in lazyppl_solver(name, args.draws, args.seed):
                print(json.dumps(row), flush=True)
            continue
        print(json.dumps(measure(name, args.draws, args.seed)), flush=True)


if __name__ == "__main__":
    main()
