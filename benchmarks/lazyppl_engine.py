"""LazyPPL engine benchmark (issue 2): our default sampler against upstream-semantics mh.

Run on demand (not in CI; about 5-10 minutes on 2 shared cores)::

    .venv/bin/python benchmarks/lazyppl_engine.py
    .venv/bin/python benchmarks/lazyppl_engine.py --posterior kidiq-kidscore_momiq --json out.json

Every fit goes through the real path (``haskell_bridge.fit_lazyppl``: lint, Safe
Haskell compile with the binary cache, sandboxed harness run, 4 chains on ``-N2``).
Figures per posterior and kernel:

* bulk ESS (ArviZ ``az.ess(method="bulk")``) over the compared parameters (the corpus
  ``meta.json`` parameters, expanded to scalars), minimum and median, divided by the
  harness process's CPU seconds (user + system, all chains, GC included);
* peak RSS of the harness process (MB), from GNU ``/usr/bin/time -f %M`` on a repeat
  of the same run: the sandbox's own ``wait4`` figure (``Fit.stats["max_rss_mb"]``)
  includes the RSS of the Python process it was forked from, because Linux keeps the
  pre-exec high-water mark across ``execve``;
* ``|d| max``: the largest |mean - reference mean| / reference SD against posteriordb's
  reference draws, a sanity check that speed is not bought with a wrong answer
  (values below ~0.1 are noise at these ESS);
* cold compile (GHC on a never-seen source: Safe compile + link), cached start-up
  (a 1-draw fit of a cached binary, end to end in Python), and the wall time of a
  default-kernel run that reaches 800 bulk ESS on every compared scalar (4 chains;
  draws grown by the measured ESS rate until a run reaches it).

Models: ``corpus/translations/<posterior>/Model.hs`` when it exists, else the file in
``benchmarks/lazyppl_models/`` (kidiq there uses wide normal(0, 100) priors on beta
where Stan has flat ones; see the file).

``--chains POSTERIOR`` (issue 14, minor modes) instead fits a corpus posterior with the audit's
default LazyPPL settings and the audit's own seeds (``workers.settings.derive_seed``) on both
scopes (visible, full) and prints every chain's posterior means, ArviZ R-hat and bulk ESS per
compared scalar and each chain's ``multistart_*`` tuning entries (extra Laplace starts tried,
nats gained, whether the start moved), e.g.
``--chains bball_drive_event_0-hmm_drive_0``; ``--seed`` overrides the derived seeds.

``--versus-nuts`` (issue 14) instead runs, on the posteriors of :data:`VERSUS`, the
default kernel with the audit's default settings (4 chains, warm-up 4000, 1000 draws
thinned by 10) and PyMC NUTS with the audit's defaults (nutpie, 4 x 1000 after 1000
tuning steps) through ``workers.pymc_runner.fit_pymc``, and prints per posterior: min
bulk ESS over the compared scalars, CPU seconds of each sandboxed process (PyMC's
includes its imports and compilation, ~8 CPU-s even with warm caches), ESS per
CPU-second for both, the ratio LazyPPL / NUTS, and max R-hat.

``--to-target`` (issue 14's goal: 800 bulk ESS on every parameter in <= 30 s wall, 4 chains,
2 cores) instead runs the LazyPPL side of each :data:`VERSUS` posterior at the audit's own
settings (warm-up 4000, thin 10), growing the draws by 1.25 x 800 / measured min bulk ESS
until one run reaches 800, and prints each run's wall time (the sandboxed harness run, the
binary already compiled: Laplace step and warm-up included), CPU, min bulk ESS and R-hat.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import arviz as az  # noqa: E402

from corpus.loader import TRANSLATIONS_DIR, load_data, load_reference  # noqa: E402
from haskell_bridge import build_program, fit_lazyppl, lazyppl_build  # noqa: E402
from haskell_bridge.run import rts_options  # noqa: E402
from sandbox import Limits  # noqa: E402
from workers.fit import Fit, base_name  # noqa: E402

HERE = Path(__file__).resolve().parent
POSTERIORS = {
    "eight_schools-eight_schools_noncentered": ("eight_schools_noncentered.hs",
                                                ["mu", "tau", "theta"]),
    "kidiq-kidscore_momiq": ("kidiq_kidscore_momiq.hs", ["beta", "sigma"]),
}
#: Iterations per chain. Upstream mh mixes slowly, so it runs longer and is thinned;
#: ESS per CPU-second is a rate, so the run lengths need not match.
KERNELS = {
    "default": {"warmup": 1000, "draws": 1000, "thin": 1},
    "mh": {"warmup": 5000, "draws": 2000, "thin": 10, "options": {"mh_p": 0.1}},
}
CHAINS = 4
TARGET_ESS = 800
LIMITS = Limits(cpu_seconds=1800, memory_mb=4096, wall_seconds=1800)


def model_source(posterior: str) -> tuple[str, str]:
    corpus = TRANSLATIONS_DIR / posterior / "Model.hs"
    if corpus.is_file():
        return corpus.read_text(), str(corpus.relative_to(HERE.parent))
    fallback = HERE / "lazyppl_models" / POSTERIORS[posterior][0]
    return fallback.read_text(), str(fallback.relative_to(HERE.parent))


def compared(fit: Fit, bases: list[str]) -> list[str]:
    return [n for n in fit.draws if base_name(n) in bases]


def bulk_ess(fit: Fit, names: list[str]) -> dict[str, float]:
    return {n: float(az.ess(fit.draws[n], method="bulk")) for n in names}


def max_abs_d(fit: Fit, reference: Fit | None, names: list[str]) -> float | None:
    if reference is None:
        return None
    ds = [abs(fit.draws[n].mean() - reference.draws[n].mean()) / reference.draws[n].std()
          for n in names if n in reference.draws]
    return max(ds) if ds else None


def peak_rss_mb(source: str, request: dict) -> float | None:
    """Peak RSS of the harness binary on ``request``, measured by GNU time (see above)."""
    if not os.access("/usr/bin/time", os.X_OK):
        return None
    binary = build_program(source, limits=LIMITS).path
    done = subprocess.run(
        ["/usr/bin/time", "-f", "%M", str(binary), *rts_options(request["chains"],
                                                                LIMITS.memory_mb)],
        input=json.dumps(request).encode(), capture_output=True, check=True, env={})
    return int(done.stderr.decode().strip().splitlines()[-1]) / 1024.0


def run_kernel(source: str, data: dict, bases: list[str], reference: Fit | None,
               kernel: str, seed: int) -> dict:
    settings = dict(KERNELS[kernel])
    options = settings.pop("options", None)
    fit = fit_lazyppl(source, data, chains=CHAINS, kernel=kernel, seed=seed,
                      limits=LIMITS, options=options, **settings)
    names = compared(fit, bases)
    ess = bulk_ess(fit, names)
    cpu = fit.stats["cpu_seconds"]
    request = {"data": data, "seed": seed, "chains": CHAINS, "kernel": kernel,
               **settings, **(options or {})}
    values = np.array(list(ess.values()))
    acceptance = [c.get("acceptance") for c in fit.stats["chains"]]
    return {
        "kernel": kernel, "iterations": settings["warmup"] + settings["draws"] * settings["thin"],
        "cpu_s": cpu, "wall_s": fit.timings["run"],
        "ess_min": float(values.min()), "ess_median": float(np.median(values)),
        "ess_per_cpu_min": float(values.min() / cpu),
        "ess_per_cpu_median": float(np.median(values) / cpu),
        "peak_rss_mb": peak_rss_mb(source, request),
        "acceptance": float(np.mean([a for a in acceptance if a is not None])),
        "d_max": max_abs_d(fit, reference, names),
        "worst": min(ess, key=ess.get),
    }


def cold_compile_and_startup(source: str, data: dict) -> dict:
    fresh = source + f"\n-- benchmark {uuid.uuid4().hex}\n"
    compiled = build_program(fresh, limits=LIMITS)
    assert not compiled.cached
    started = time.monotonic()
    fit = fit_lazyppl(fresh, data, chains=1, warmup=0, draws=1, thin=1, kernel="default",
                      seed=1, limits=LIMITS)
    startup = time.monotonic() - started
    assert fit.stats["compile_cached"]
    return {"cold_compile_s": compiled.seconds, "cached_startup_s": startup}


def time_to_target(source: str, data: dict, bases: list[str], seed: int, *,
                   warmup: int = KERNELS["default"]["warmup"], thin: int = 1,
                   draws: int = KERNELS["default"]["draws"], max_draws: int = 200_000,
                   chains: int = CHAINS, kernel: str = "default",
                   label: str | None = None) -> dict:
    """Grow draws (warm-up and thin fixed) until one run reaches TARGET_ESS bulk ESS on
    every compared scalar; wall seconds are the sandboxed harness run
    (``fit.timings["run"]``: start-up, Laplace step and warm-up included, the binary
    already compiled). With ``label``, each attempt is printed."""
    attempts = []
    for _ in range(5):
        fit = fit_lazyppl(source, data, chains=chains, warmup=warmup, draws=draws, thin=thin,
                          kernel=kernel, seed=seed, limits=LIMITS)
        ess = bulk_ess(fit, compared(fit, bases))
        worst = min(ess, key=ess.get)
        rhat = max(float(az.rhat(fit.draws[n])) for n in ess)
        attempts.append({"draws": draws, "wall_s": fit.timings["run"],
                         "cpu_s": float(fit.stats["cpu_seconds"]), "ess_min": ess[worst],
                         "worst": worst, "rhat_max": rhat})
        if label:
            print(f"  {label}: {chains} x {draws} draws (thin {thin}, warm-up {warmup}): "
                  f"{fit.timings['run']:.1f} s wall, {fit.stats['cpu_seconds']:.1f} CPU-s, min "
                  f"bulk ESS {ess[worst]:.0f} ({worst}), R-hat max {rhat:.3f}", flush=True)
        if ess[worst] >= TARGET_ESS:
            return {"reached": True, "draws": draws, "wall_s": fit.timings["run"],
                    "ess_min": ess[worst], "attempts": attempts}
        draws = min(max_draws, math.ceil(draws * 1.25 * TARGET_ESS / max(ess[worst], 1.0)))
    return {"reached": False, "attempts": attempts}

ROOT = HERE.parent
GEOMETRY = ROOT / "tests" / "fixtures" / "geometry"


def _hier6(example: str) -> tuple:
    """The 6-group model: lazyppl/examples/<example> against our PyMC program."""
    return (ROOT / "lazyppl" / "examples" / example / "Model.hs", GEOMETRY / "hier6_model.py",
            GEOMETRY / "hier6_data.json", ["mu", "tau", "sigma", "theta"])


#: name -> (LazyPPL program, PyMC program, data file or corpus posterior, compared bases)
VERSUS = {
    "eight_schools_centered": ("corpus", "eight_schools-eight_schools_centered", ["mu", "tau", "theta"]),
    "eight_schools_noncentered": ("corpus", "eight_schools-eight_schools_noncentered",
                                  ["mu", "tau", "theta"]),
    "hier6_centred": _hier6("hier6c"),
    "hier6_noncentred": _hier6("hier6n"),
    # genuinely centred in the tree's coordinates (effects from a fixed base, re-weighted)
    "hier6_score": _hier6("hier6s"),
    "gp_pois_regr": ("corpus", "gp_pois_regr-gp_pois_regr", ["rho", "alpha", "f"]),
    "hier100": (ROOT / "lazyppl" / "examples" / "hier100" / "Model.hs",
                HERE / "lazyppl_models" / "hier100_model.py",
                ROOT / "lazyppl" / "examples" / "hier100" / "data.json", ["mu", "tau", "theta"]),
    "kidiq_momiq": ("corpus", "kidiq-kidscore_momiq", ["beta", "sigma"]),
    "diamonds": ("corpus", "diamonds-diamonds", ["Intercept", "b", "sigma"]),
}


def versus_programs(name: str) -> tuple[str, str, dict, list[str]]:
    entry = VERSUS[name]
    if entry[0] == "corpus":
        posterior, bases = entry[1], entry[2]
        folder = TRANSLATIONS_DIR / posterior
        return ((folder / "Model.hs").read_text(), (folder / "model.py").read_text(),
                load_data(posterior), bases)
    lazy, pymc, data, bases = entry
    return lazy.read_text(), pymc.read_text(), json.loads(data.read_text()), bases


def side(fit: Fit, bases: list[str]) -> dict:
    names = compared(fit, bases)
    ess = bulk_ess(fit, names)
    # the LazyPPL bridge reports the process's CPU at the top level, the PyMC runner
    # under "process"
    cpu = float(fit.stats.get("cpu_seconds") or fit.stats["process"]["cpu_seconds"])
    rhat = max(float(az.rhat(fit.draws[n])) for n in names)
    worst = min(ess, key=ess.get)
    return {"ess_min": ess[worst], "worst": worst, "cpu_s": cpu, "ess_per_cpu": ess[worst] / cpu,
            "rhat_max": rhat, "sample_s": fit.timings.get("sample")}


def audit_time_to_target(name: str, seed: int) -> dict:
    """Issue 14's goal on a --versus-nuts posterior: :func:`time_to_target` of its LazyPPL
    side at the audit's own settings (chains, warm-up, thin, kernel, first draws)."""
    from workers.settings import AuditSettings

    q = AuditSettings().lazyppl
    lazy_src, _, data, bases = versus_programs(name)
    return time_to_target(lazy_src, data, bases, seed, warmup=q.warmup, thin=q.thin,
                          draws=q.draws, max_draws=100_000, chains=q.chains, kernel=q.kernel,
                          label=name)


def versus_nuts(names: list[str], seed: int) -> dict:
    from workers.pymc_runner import fit_pymc
    from workers.settings import AuditSettings

    s = AuditSettings()
    q, p = s.lazyppl, s.pymc
    print("| posterior | LazyPPL min ESS (param) | CPU s | ESS/CPU-s | R-hat max | "
          "NUTS min ESS (param) | CPU s | ESS/CPU-s | R-hat max | LazyPPL / NUTS |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    out = {}
    for name in names:
        lazy_src, pymc_src, data, bases = versus_programs(name)
        lazy = side(fit_lazyppl(lazy_src, data, chains=q.chains, warmup=q.warmup, draws=q.draws,
                                thin=q.thin, kernel=q.kernel, seed=seed, limits=LIMITS), bases)
        nuts = side(fit_pymc(pymc_src, data, chains=p.chains, tune=p.tune, draws=p.draws,
                             target_accept=p.target_accept, backend=p.backend, seed=seed,
                             limits=LIMITS, retry_target_accepts=(), mass_matrix=p.mass_matrix),
                    bases)
        ratio = lazy["ess_per_cpu"] / nuts["ess_per_cpu"]
        out[name] = {"lazyppl": lazy, "nuts": nuts, "ratio": ratio}
        print(f"| {name} | {lazy['ess_min']:.0f} ({lazy['worst']}) | {lazy['cpu_s']:.1f} | "
              f"{lazy['ess_per_cpu']:.1f} | {lazy['rhat_max']:.3f} | {nuts['ess_min']:.0f} "
              f"({nuts['worst']}) | {nuts['cpu_s']:.1f} | {nuts['ess_per_cpu']:.1f} | "
              f"{nuts['rhat_max']:.3f} | {ratio:.2f} |", flush=True)
    ratios = sorted(r["ratio"] for r in out.values())
    if ratios:
        print(f"median LazyPPL / NUTS ESS per CPU-second: {float(np.median(ratios)):.2f}; load "
              f"average {os.getloadavg()[0]:.1f}")
    return out


def per_chain(posterior: str, seed: int | None) -> dict:
    """Per-chain means, R-hat and ESS of the default kernel on both scopes of a posterior."""
    from corpus.loader import derive_visible, read_meta
    from workers.settings import AuditSettings, derive_seed

    s = AuditSettings()
    q = s.lazyppl
    source = (TRANSLATIONS_DIR / posterior / "Model.hs").read_text()
    bases = read_meta(posterior)["parameters"]
    full = load_data(posterior)
    out = {}
    for scope, data in (("visible", derive_visible(full, read_meta(posterior))), ("full", full)):
        run_seed = derive_seed(s.seed, scope, "lazyppl") if seed is None else seed
        fit = fit_lazyppl(source, data, chains=q.chains, warmup=q.warmup, draws=q.draws,
                          thin=q.thin, kernel=q.kernel, seed=run_seed, limits=LIMITS)
        names = compared(fit, bases)
        rows = {n: {"chain_means": [float(m) for m in fit.draws[n].mean(axis=1)],
                    "rhat": float(az.rhat(fit.draws[n])),
                    "ess_bulk": float(az.ess(fit.draws[n], method="bulk"))} for n in names}
        shown = ("laplace", "multistart", "transport", "weight", "slice", "acceptance")
        tuning = [{k: v for k, v in c["tuning"].items() if k.startswith(shown)}
                  for c in fit.stats["chains"]]
        print(f"\n## {posterior}, {scope} scope, seed {run_seed}: CPU {fit.stats['cpu_seconds']:.1f} s, "
              f"load average {os.getloadavg()[0]:.1f}")
        print("| scalar | " + " | ".join(f"chain {c}" for c in range(fit.n_chains))
              + " | R-hat | bulk ESS |")
        print("|---|" + "---|" * (fit.n_chains + 2))
        for n, r in rows.items():
            print(f"| {n} | " + " | ".join(f"{m:.4f}" for m in r["chain_means"])
                  + f" | {r['rhat']:.3f} | {r['ess_bulk']:.0f} |")
        for c, t in enumerate(tuning):
            print(f"chain {c}: " + ", ".join(f"{k}={v:g}" for k, v in t.items()))
        out[scope] = {"seed": run_seed, "cpu_s": float(fit.stats["cpu_seconds"]), "scalars": rows,
                      "tuning": tuning}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versus-nuts", action="store_true",
                        help="default kernel against PyMC NUTS on the issue-14 posteriors")
    parser.add_argument("--to-target", action="store_true",
                        help=f"wall time for the default kernel at the audit's settings to reach "
                             f"{TARGET_ESS} bulk ESS on the issue-14 posteriors (draws grown)")
    parser.add_argument("--only", choices=sorted(VERSUS), action="append",
                        help="with --versus-nuts or --to-target: these posteriors only")
    parser.add_argument("--posterior", choices=sorted(POSTERIORS), action="append")
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--chains", metavar="POSTERIOR",
                        help="per-chain means, R-hat and multistart tuning on both scopes of a "
                             "corpus posterior (audit settings and seeds)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    build = lazyppl_build()
    print(f"GHC {build.ghc_version}, lazyppl {build.version} (build {build.hash}); "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    if args.chains:
        seed = None if "--seed" not in sys.argv else args.seed
        results = per_chain(args.chains, seed)
        if args.json:
            args.json.write_text(json.dumps(results, indent=2))
        return
    if args.to_target:
        results = {}
        for name in args.only or list(VERSUS):
            results[name] = audit_time_to_target(name, args.seed)
            r = results[name]
            print(f"{name}: {TARGET_ESS} bulk ESS " + (
                f"in {r['wall_s']:.1f} s wall ({r['draws']} draws per chain)" if r["reached"]
                else "not reached") + f"; load average {os.getloadavg()[0]:.1f}", flush=True)
        if args.json:
            args.json.write_text(json.dumps(results, indent=2))
        return
    if args.versus_nuts:
        results = versus_nuts(args.only or list(VERSUS), args.seed)
        if args.json:
            args.json.write_text(json.dumps(results, indent=2))
        return
    results = {}
    for posterior in args.posterior or list(POSTERIORS):
        source, origin = model_source(posterior)
        bases = POSTERIORS[posterior][1]
        data = load_data(posterior)
        try:
            reference = load_reference(posterior)
        except FileNotFoundError:
            reference = None
        print(f"\n## {posterior}  (model: {origin})")
        startup = cold_compile_and_startup(source, data)
        print(f"cold compile {startup['cold_compile_s']:.2f} s; "
              f"cached start-up {startup['cached_startup_s']:.2f} s")
        rows = [run_kernel(source, data, bases, reference, k, args.seed) for k in KERNELS]
        print("| kernel | iter/chain | CPU s | wall s | bulk ESS min / median | "
              "ESS per CPU-s min / median | peak RSS MB | acceptance | |d| max |")
        print("|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            d = "n/a" if r["d_max"] is None else f"{r['d_max']:.3f}"
            rss = "n/a" if r["peak_rss_mb"] is None else f"{r['peak_rss_mb']:.0f}"
            print(f"| {r['kernel']} | {r['iterations']} | {r['cpu_s']:.2f} | {r['wall_s']:.2f} | "
                  f"{r['ess_min']:.0f} / {r['ess_median']:.0f} | "
                  f"{r['ess_per_cpu_min']:.1f} / {r['ess_per_cpu_median']:.1f} | "
                  f"{rss} | {r['acceptance']:.2f} | {d} |")
        a, b = rows[0], rows[1]
        ratio_min = a["ess_per_cpu_min"] / max(b["ess_per_cpu_min"], 1e-9)
        ratio_med = a["ess_per_cpu_median"] / max(b["ess_per_cpu_median"], 1e-9)
        print(f"default / mh, ESS per CPU-second: min {ratio_min:.1f}x, median {ratio_med:.1f}x")
        target = time_to_target(source, data, bases, args.seed)
        if target["reached"]:
            print(f"{TARGET_ESS} bulk ESS on every compared scalar: {target['wall_s']:.2f} s wall "
                  f"({CHAINS} chains x {target['draws']} draws after "
                  f"{KERNELS['default']['warmup']} warm-up; min ESS {target['ess_min']:.0f})")
        else:
            print(f"{TARGET_ESS} bulk ESS not reached: {target['attempts']}")
        results[posterior] = {"model": origin, **startup, "kernels": rows,
                              "ratio_min": ratio_min, "ratio_median": ratio_med,
                              "target": target}
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
