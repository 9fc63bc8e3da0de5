"""Calibration study of whole audits (issue 14 item 4): error rates and power of the verdict.

Runs WHOLE audits — ``workers.pipeline.run_audit`` with its looks and the default
``AuditSettings``, only ``seed`` varied (and the rule of issue 14 item 3 off, see below) — many times per pair, and counts the pair verdicts:

* **correct pairs** (both programs define the same posterior): the rate of ``disagree``
  (a false disagreement; goal 0, reported with its one-sided 95 % Clopper–Pearson upper
  bound) and of ``inconclusive`` (goal <= 5 %, with its bound);
* **effect pairs** with a known true difference on one parameter, built on a conjugate
  normal model whose posterior is analytic (:func:`conjugate_posterior`): the candidate
  moves the posterior mean of ``mu`` by exactly d baseline SDs, or scales its SD by
  exactly r, and leaves a second parameter ``nu`` identical. The rate of ``disagree`` is
  the power; ``agree`` must not happen at |d| >= 0.5.

The audits run with the gross-difference rule (issue 14 item 3, docs/RULE.md) switched
off, i.e. exactly the SPEC §4 rule; its effect is derived exactly from the same looks
(``with_gross_rule`` per pair), since it can only end an audit earlier with ``disagree``.

One scope per pair (``full``: the whole data set), which halves the cost; SPEC §3's
second scope guards against coincidental agreement, not against Monte Carlo error, so the
per-scope rates measured here are what the rule and looks do. Corpus pairs are audited
without posteriordb's reference draws (a REST user's pair has none).

Cost: with :class:`workers.pymc_runner.session.PymcSession` available (``run_audit(...,
pymc_session=...)``), ONE session — one sandboxed PyMC child that stays alive and compiles
each program once — serves every seed of a pair. That is allowed here because every
program of this study is our own trusted code; the service never shares a PyMC child
between audits of untrusted programs. Without it every fit starts a fresh child.

    .venv/bin/python benchmarks/calibration.py --seeds 40 --out reports/calibration.json --markdown
    .venv/bin/python benchmarks/calibration.py --seeds 3 --pairs eight_schools_nc,effect_d05

Not run in CI (tens of minutes); its pure parts are tested in
tests/unit/test_calibration.py.
"""
from __future__ import annotations

import argparse
import inspect
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODELS = Path(__file__).resolve().parent / "calibration_models"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: The baseline conjugate model (calibration_models/normal_model.py): mu ~ N(M0, S0),
#: y_i ~ N(mu, SIGMA); nu ~ N(NU0, NU_S0), z_j ~ N(nu, NU_SIGMA).
M0, S0, SIGMA = 1.0, 3.0, 2.0
NU0, NU_S0, NU_SIGMA = 0.0, 5.0, 1.0
BASE_SEED = 20261201
#: Pairs run only when named (--pairs): a correct pair whose LazyPPL side did not mix
#: (gp_pois_regr, R-hat 1.5 at default settings before session 19) and a gross mutant that
#: mixes poorly at first; both stress the gross-difference rule of issue 14 item 3; and
#: hier100, whose audits take ~35 s each (40 seeds: ~25 min).
EXTRA_PAIRS = ("gp_pois_regr", "mutant_hier6_index", "hier100")


# ---------------------------------------------------------------- pure parts (unit-tested)

def clopper_pearson_upper(successes: int, trials: int, confidence: float = 0.95) -> float:
    """One-sided upper Clopper–Pearson bound on a binomial rate: the largest p with
    P(X <= successes | p) >= 1 − confidence. 1.0 when every trial succeeded."""
    from scipy.stats import beta

    if not 0 <= successes <= trials or trials <= 0:
        raise ValueError(f"need 0 <= successes <= trials and trials > 0, got {successes}/{trials}")
    if successes == trials:
        return 1.0
    return float(beta.ppf(confidence, successes + 1, trials - successes))


def conjugate_posterior(y, prior_mean: float, prior_sd: float, sigma: float) -> tuple[float, float]:
    """Posterior (mean, SD) of mu for y_i ~ N(mu, sigma) (sigma known), mu ~ N(prior_mean, prior_sd)."""
    n = len(y)
    precision = 1.0 / prior_sd**2 + n / sigma**2
    mean = (prior_mean / prior_sd**2 + sum(y) / sigma**2) / precision
    return mean, 1.0 / math.sqrt(precision)


def effect_truth(y, shift: float, scale: float) -> dict:
    """True d and r of the effect candidate against the baseline, on mu, analytically.

    The candidate models y_i + shift with prior N(M0 + shift, S0·scale) and noise SIGMA·scale:
    both precisions scale by 1/scale², so the posterior mean is the baseline's plus
    ``shift`` and the SD is the baseline's times ``scale``. d is in baseline SDs."""
    base_mean, base_sd = conjugate_posterior(y, M0, S0, SIGMA)
    cand_mean, cand_sd = conjugate_posterior([v + shift for v in y], M0 + shift, S0 * scale, SIGMA * scale)
    return {"d": (cand_mean - base_mean) / base_sd, "r": cand_sd / base_sd,
            "baseline": {"mean": base_mean, "sd": base_sd}, "candidate": {"mean": cand_mean, "sd": cand_sd}}


def shift_for(d: float, y) -> float:
    """The data/prior shift that moves mu's posterior mean by d baseline SDs."""
    return d * conjugate_posterior(y, M0, S0, SIGMA)[1]


def pair_record(name: str, kind: str, true_d: float | None, true_r: float | None,
                runs: list[dict]) -> dict:
    """One row of the report from the pair's runs (each ``{"seed", "verdict", "seconds", ...}``).

    Counts are of pair verdicts; ``error`` runs are counted apart (they are not audits
    that reached a verdict). Correct pairs carry the one-sided 95 % Clopper–Pearson upper
    bounds on the disagree and inconclusive rates."""
    verdicts = [r["verdict"] for r in runs]
    row = {"name": name, "kind": kind, "true_d": true_d, "true_r": true_r, "seeds": len(runs),
           "agree": verdicts.count("agree"), "inconclusive": verdicts.count("inconclusive"),
           "disagree": verdicts.count("disagree"), "error": verdicts.count("error"),
           "seconds_median": round(statistics.median(r["seconds"] for r in runs), 2) if runs else None}
    if kind == "correct" and runs:
        row["disagree_rate_upper95"] = round(clopper_pearson_upper(row["disagree"], len(runs)), 4)
        row["inconclusive_rate_upper95"] = round(clopper_pearson_upper(row["inconclusive"], len(runs)), 4)
    looks = [r["looks"] for r in runs if r.get("looks") is not None]
    if looks:
        row["looks_median"] = statistics.median(looks)
        row["looks_max"] = max(looks)
    observed = [r["observed"] for r in runs if r.get("observed")]
    if observed:
        row["observed_d_median"] = round(statistics.median(o["d"] for o in observed), 3)
        row["observed_r_median"] = round(statistics.median(o["r"] for o in observed), 3)
    gross = [r["gross"] for r in runs if r.get("gross") is not None]
    if gross:
        # issue 14 item 3, evaluated offline: the pair verdicts had the gross-difference
        # rule been on (a run becomes disagree at the first look where it fires)
        would = ["disagree" if (r.get("gross") or {}).get("fires_at") else r["verdict"] for r in runs]
        row["with_gross_rule"] = {v: would.count(v) for v in ("agree", "inconclusive", "disagree")}
        row["gross_checked_runs"] = sum(1 for g in gross if g["checked_looks"])
        margins = [g["max_margin"] for g in gross if g.get("max_margin") is not None]
        row["gross_max_margin"] = max(margins) if margins else None
    row["runs"] = runs
    return row


def report(rows: list[dict], commit: str, machine: dict, settings: dict) -> dict:
    """The committed report: ``{"pairs": [...], "commit", "machine", "settings"}``."""
    return {"pairs": rows, "commit": commit, "machine": machine, "settings": settings}


def markdown(rep: dict) -> str:
    """A markdown table of the report (one line per pair)."""
    lines = ["| pair | kind | true d | true r | seeds | agree | inconcl. | disagree | "
             "disagree ≤ (95 %) | inconcl. ≤ (95 %) | looks (median/max) | s (median) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]

    def f(x, fmt="{:.2f}"):
        return "–" if x is None else fmt.format(x)

    for p in rep["pairs"]:
        err = f" (+{p['error']} error)" if p.get("error") else ""
        lines.append(
            f"| {p['name']} | {p['kind']} | {f(p['true_d'])} | {f(p['true_r'])} | {p['seeds']}{err} | "
            f"{p['agree']} | {p['inconclusive']} | {p['disagree']} | "
            f"{f(p.get('disagree_rate_upper95'), '{:.1%}')} | {f(p.get('inconclusive_rate_upper95'), '{:.1%}')} | "
            f"{f(p.get('looks_median'), '{:g}')}/{f(p.get('looks_max'), '{:g}')} | {f(p['seconds_median'], '{:.1f}')} |")
    m = rep["machine"]
    lines.append("")
    lines.append(f"commit {rep['commit'][:10]}, {m['cores']} cores, load average (1 min) "
                 f"{f(m.get('load_min'))}–{f(m.get('load_max'))}; PyMC session per pair: {m.get('pymc_session')}")
    return "\n".join(lines)


# ---------------------------------------------------------------- the pairs

@dataclass(frozen=True)
class Pair:
    """One translation pair of the study, with one scope (``full``)."""

    name: str
    kind: str  # "correct" | "effect"
    pymc_source: str
    lazyppl_source: str
    data: dict
    parameters: list[str] | None = None
    true_d: float | None = None
    true_r: float | None = None
    effect_parameter: str | None = None
    notes: str = ""
    extra: dict = field(default_factory=dict)


def _corpus(name: str, short: str) -> Pair:
    from corpus.loader import load_data

    folder = ROOT / "corpus" / "translations" / name
    meta = json.loads((folder / "meta.json").read_text())
    return Pair(short, "correct", (folder / "model.py").read_text(), (folder / "Model.hs").read_text(),
                load_data(name), meta["parameters"], 0.0, 1.0, notes=f"corpus {name}, full data")


def normal_data() -> dict:
    return json.loads((MODELS / "normal_data.json").read_text())


def effect_source(shift: float, scale: float) -> str:
    return (MODELS / "NormalEffect.hs.tmpl").read_text().format(shift=float(shift), scale=float(scale))


def _effect(short: str, d: float, r: float) -> Pair:
    data = normal_data()
    shift = shift_for(d, data["y"])
    truth = effect_truth(data["y"], shift, r)
    return Pair(short, "effect", (MODELS / "normal_model.py").read_text(), effect_source(shift, r), data,
                ["mu", "nu"], truth["d"], truth["r"], "mu",
                notes=f"conjugate normal; candidate shift {shift:.6g}, scale {r:g}; nu identical",
                extra={"analytic": truth})


def pairs() -> dict[str, Pair]:
    """Every pair of the study by short name (built lazily: corpus data are read here)."""
    hier_data = json.loads((ROOT / "lazyppl" / "examples" / "hier6c" / "data.json").read_text())
    hier_pymc = (ROOT / "tests" / "fixtures" / "geometry" / "hier6_model.py").read_text()

    def hier6(short: str, example: str, notes: str) -> Pair:
        """The 6-group model: our PyMC program against lazyppl/examples/<example>."""
        return Pair(short, "correct", hier_pymc,
                    (ROOT / "lazyppl" / "examples" / example / "Model.hs").read_text(), hier_data,
                    None, 0.0, 1.0, notes=notes)

    builders = {
        "eight_schools_nc": lambda: _corpus("eight_schools-eight_schools_noncentered", "eight_schools_nc"),
        "hier6_centred": lambda: hier6("hier6_centred", "hier6c",
                                       "6 groups, LazyPPL centred, PyMC non-centred"),
        "hier6_noncentred": lambda: hier6("hier6_noncentred", "hier6n", "6 groups, both non-centred"),
        "hier6_score": lambda: hier6("hier6_score", "hier6s",
                                     "6 groups, LazyPPL genuinely centred in the tree's coordinates "
                                     "(effects from a fixed base, re-weighted by score), PyMC "
                                     "non-centred"),
        "gp_regr": lambda: _corpus("gp_pois_regr-gp_regr", "gp_regr"),
        "logistic": lambda: Pair("logistic", "correct", (MODELS / "logistic_model.py").read_text(),
                                 (MODELS / "Logistic.hs").read_text(),
                                 json.loads((MODELS / "logistic_data.json").read_text()), None, 0.0, 1.0,
                                 notes="logistic regression, N = 150, 2 predictors"),
        "arK": lambda: _corpus("arK-arK", "arK"),
        "gp_pois_regr": lambda: _corpus("gp_pois_regr-gp_pois_regr", "gp_pois_regr"),
        "hier100": lambda: Pair(
            "hier100", "correct", (ROOT / "benchmarks" / "lazyppl_models" / "hier100_model.py").read_text(),
            (ROOT / "lazyppl" / "examples" / "hier100" / "Model.hs").read_text(),
            json.loads((ROOT / "lazyppl" / "examples" / "hier100" / "data.json").read_text()),
            None, 0.0, 1.0, notes="100 groups (102 sites), LazyPPL centred in the program, PyMC "
                                  "non-centred; LazyPPL's wide joint transport of mu and tau"),
        "mutant_hier6_index": lambda: Pair(
            "mutant_hier6_index", "effect", hier_pymc,
            (ROOT / "lazyppl/examples/hier6c/Model.hs").read_text().replace(
                "theta !! (g - 1)", "theta !! (g `mod` int \"J\" d)"), hier_data, None, None, None,
            notes="hier6 centred with the group index off by one (group g uses theta[g+1]); "
                  "a gross difference on theta, not analytic; for item 3"),
        "effect_d03": lambda: _effect("effect_d03", 0.3, 1.0),
        "effect_d05": lambda: _effect("effect_d05", -0.5, 1.0),
        "effect_d10": lambda: _effect("effect_d10", 1.0, 1.0),
        "effect_r14": lambda: _effect("effect_r14", 0.0, 1.4),
        "effect_r07": lambda: _effect("effect_r07", 0.0, 0.7),
    }
    return builders


# ---------------------------------------------------------------- running

def _session_factory(seeds: int):
    """A function making one PymcSession per pair (limits: those of ``seeds`` audits'
    scopes over its life), or None when ``run_audit`` takes no session."""
    from workers import pipeline

    if "pymc_session" not in inspect.signature(pipeline.run_audit).parameters:
        return None
    from dataclasses import replace

    from workers.pymc_runner.session import PymcSession, limits_for

    one = limits_for(audit_settings(0))  # one scope's; the session serves every seed's
    limits = replace(one, cpu_seconds=seeds * one.cpu_seconds,
                     wall_seconds=seeds * one.wall_seconds)
    return lambda: PymcSession(limits)


def audit_settings(seed: int, backend: str | None = None):
    """The default settings with ``seed``, and the gross-difference rule off: the audits
    then run exactly main's SPEC §4 rule, and what that rule would have changed is derived
    exactly from the same looks (:func:`gross_evaluation`; it can only end an audit
    earlier, with ``disagree``), so one run measures the rule with and without it.
    ``backend``: ``pymc.backend`` instead of the default (rows then carry its name)."""
    from workers.settings import AuditSettings

    given: dict = {"seed": seed, "rule": {"gross_difference": False}}
    if backend is not None:
        given["pymc"] = {"backend": backend}
    return AuditSettings.model_validate(given)


def run_one(pair: Pair, seed: int, session, backend: str | None = None) -> dict:
    """One whole audit of ``pair`` with default settings (``backend``: see
    :func:`audit_settings`) and ``seed``; a compact record."""
    from workers.pipeline import AuditRequest, run_audit

    request = AuditRequest(name=f"calibration-{pair.name}", pymc_source=pair.pymc_source,
                           lazyppl_source=pair.lazyppl_source, scopes={"full": pair.data},
                           parameters=pair.parameters, settings=audit_settings(seed, backend))
    t0 = time.monotonic()
    kwargs = {"pymc_session": session} if session is not None else {}
    evidence, fits = run_audit(request, **kwargs)
    seconds = time.monotonic() - t0
    scope = (evidence.get("scopes") or {}).get("full", {})
    record = {"seed": seed, "verdict": evidence["verdict"], "seconds": round(seconds, 2),
              "looks": len(scope.get("looks", [])) or None,
              "reason": (evidence.get("reason") or "")[:300], "load": round(os.getloadavg()[0], 2)}
    record["fit_seconds"] = {side: round(float((f.get("timings") or {}).get("total") or 0.0), 2)
                             for side, f in (scope.get("fits") or {}).items()}
    rows = scope.get("comparisons") or []
    if rows:
        record["max_abs_d"] = round(max(abs(r["d"]) for r in rows if r.get("d") is not None), 3)
    # parameters that did not agree, with their verdict (an effect pair's others should agree)
    record["not_agreeing"] = {r["parameter"]: r["verdict"] for r in rows if r.get("verdict") != "agree"}
    if pair.effect_parameter:
        row = next((r for r in rows if r["parameter"] == pair.effect_parameter), None)
        if row is not None and row.get("d") is not None:
            record["observed"] = {"d": round(row["d"], 4), "r": round(row["r"], 4),
                                  "D": [round(x, 4) for x in row["D"]], "R": [round(x, 4) for x in row["R"]]}
    if scope.get("compared"):
        record["gross"] = gross_evaluation(fits, scope["compared"], request.settings)
    return record


def gross_evaluation(fits: dict, names: list[str], settings) -> dict:
    """Issue 14 item 3, evaluated offline on this audit's own looks: at each look where
    exactly one fit failed its gates (R-hat/ESS only), the chain-by-chain gross-difference
    checks (``workers.compare.gross_checks``). ``fires_at`` is the first look at which the
    rule would have said ``disagree`` (the audit would have ended there), ``reason`` why;
    ``max_margin``/``max_width`` are the largest margin and width seen over checked looks
    and parameters among chains with a useful ESS (how close a correct pair came to a
    false alarm), ``*_any_ess`` the same without the chain-ESS floor."""
    from workers import compare

    rule = compare.Rule.from_settings(settings.rule)
    out = {"checked_looks": 0, "fires_at": None, "reason": None, "max_margin": None, "max_width": None,
           "max_margin_any_ess": None, "max_width_any_ess": None}

    def bump(key: str, value: float) -> None:
        if math.isfinite(value) and (out[key] is None or value > out[key]):
            out[key] = round(value, 3)

    looks = sorted({look for (_, lang, look) in fits if lang == "lazyppl"})
    for look in looks:
        lazy, pymc = fits[("full", "lazyppl", look)], fits[("full", "pymc", look)]
        cand = {n: compare.summarize(lazy.draws[n]) for n in names}
        base = {n: compare.summarize(pymc.draws[n]) for n in names}
        gates = (tuple(compare.gate_failures(cand, 0, rule)),
                 tuple(compare.gate_failures(base, pymc.divergences, rule)))
        checks = compare.gross_checks(lazy.draws, pymc.draws, (cand, base), gates, names, rule)
        if not checks:
            continue
        out["checked_looks"] += 1
        for c in checks:
            bump("max_margin_any_ess", c.margin)
            bump("max_width_any_ess", c.width_low)
            if math.isfinite(c.min_chain_ess) and c.min_chain_ess >= compare.GROSS_MIN_CHAIN_ESS:
                bump("max_margin", c.margin)
                bump("max_width", c.width_low)
        reasons = [r for r in (c.fires(rule) for c in checks) if r]
        if reasons and out["fires_at"] is None:
            out["fires_at"], out["reason"] = look, "; ".join(reasons)[:300]
    return out


def machine_info(rows: list[dict], session_used: bool) -> dict:
    """Cores and the load average (1 min) seen at the start and end of each pair's runs."""
    loads = [v for r in rows for v in (r.get("load") or {}).values()]
    return {"cores": os.cpu_count(), "load_min": min(loads, default=None), "load_max": max(loads, default=None),
            "python": platform.python_version(), "platform": platform.platform(),
            "pymc_session": session_used}


def commit() -> str:
    """The commit measured: git's HEAD, or ``CALIBRATION_COMMIT`` when run from an exported
    snapshot (``git archive``), which lets the work tree change during a long run."""
    done = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else os.environ.get("CALIBRATION_COMMIT", "unknown")


def make_logistic_data(path: Path, seed: int = 14) -> None:
    """Synthetic logistic-regression data (fixed seed): N = 150, two standard-normal predictors."""
    import numpy as np

    rng = np.random.default_rng(seed)
    X = rng.standard_normal((150, 2))
    p = 1 / (1 + np.exp(-(-0.5 + X @ np.array([1.0, -0.7]))))
    y = (rng.uniform(size=150) < p).astype(int)
    path.write_text(json.dumps({"N": 150, "K": 2, "X": np.round(X, 4).tolist(), "y": y.tolist()}))


def make_normal_data(path: Path, seed: int = 15) -> None:
    """Data of the conjugate effect pairs (fixed seed): 20 y's around 2.0 (SD 2), 10 z's around -1 (SD 1)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    y = np.round(2.0 + SIGMA * rng.standard_normal(20), 4)
    z = np.round(-1.0 + NU_SIGMA * rng.standard_normal(10), 4)
    path.write_text(json.dumps({"N": 20, "y": y.tolist(), "M": 10, "z": z.tolist()}))


def verify_truth(draws: int = 25_000, seed: int = 7) -> dict:
    """Long fits of every effect pair (PyMC NUTS baseline and each LazyPPL candidate,
    4 chains x ``draws``, sandboxed as in an audit): mu's d and r from the draws, next to
    the analytic values, and nu's (which should be 0 and 1)."""
    from haskell_bridge import fit_lazyppl
    from sandbox import Limits
    from workers import compare
    from workers.pymc_runner import fit_pymc

    limits = Limits(cpu_seconds=1200, memory_mb=4096, wall_seconds=600)
    builders = pairs()
    first = builders["effect_d03"]()
    base = fit_pymc(first.pymc_source, first.data, chains=4, tune=2000, draws=draws, seed=seed, limits=limits)
    y = first.data["y"]
    mean, sd = conjugate_posterior(y, M0, S0, SIGMA)
    base_mu = compare.summarize(base.draws["mu"])
    out = {"baseline": {"draws_per_chain": draws, "mu_mean": base_mu.mean, "mu_sd": base_mu.sd,
                        "mu_mcse_mean": base_mu.mcse_mean, "analytic_mean": mean, "analytic_sd": sd}, "pairs": {}}
    for name in ("effect_d03", "effect_d05", "effect_d10", "effect_r14", "effect_r07"):
        pair = builders[name]()
        cand = fit_lazyppl(pair.lazyppl_source, pair.data, chains=4, warmup=4000, draws=draws, thin=10,
                           kernel="default", seed=seed, limits=limits)
        row = {}
        for param in ("mu", "nu"):
            c = compare.compare_summaries(param, compare.summarize(cand.draws[param]),
                                          compare.summarize(base.draws[param]), compare.Rule(k=2.0))
            row[param] = {"d": round(c.d, 4), "D_2mcse": [round(v, 4) for v in c.d_interval],
                          "r": round(c.r, 4), "R_2mcse": [round(v, 4) for v in c.r_interval]}
        row["analytic"] = {"d": pair.true_d, "r": pair.true_r}
        out["pairs"][name] = row
        print(name, json.dumps(row), file=sys.stderr, flush=True)
    return out


def main(argv: list[str] | None = None) -> None:
    from typing import get_args

    from workers.settings import PyMCSettings

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=40, help="audits (seeds) per pair")
    ap.add_argument("--pairs", default="", help="comma-separated short names (default: all)")
    ap.add_argument("--out", default="reports/calibration.json")
    ap.add_argument("--markdown", action="store_true", help="print a markdown table at the end")
    ap.add_argument("--append", action="store_true",
                    help="keep the other pairs already in --out (run pairs in several sittings)")
    ap.add_argument("--no-session", action="store_true", help="fresh PyMC child per fit even if a session exists")
    ap.add_argument("--make-data", action="store_true", help="(re)write the synthetic data files and exit")
    ap.add_argument("--pymc-backend", choices=get_args(PyMCSettings.model_fields["backend"].annotation),
                    help="pymc.backend instead of the default; rows are named <pair>_<backend>")
    ap.add_argument("--verify-truth", metavar="OUT",
                    help="long fits of the effect pairs (the analytic d, r checked by NUTS and "
                         "LazyPPL) written to OUT, then exit")
    args = ap.parse_args(argv)
    if args.verify_truth:
        Path(args.verify_truth).write_text(json.dumps(verify_truth(), indent=1) + "\n")
        return
    if args.make_data:
        make_logistic_data(MODELS / "logistic_data.json")
        make_normal_data(MODELS / "normal_data.json")
        return
    builders = pairs()
    names = [n for n in args.pairs.split(",") if n] or [n for n in builders if n not in EXTRA_PAIRS]
    unknown = [n for n in names if n not in builders]
    if unknown:
        ap.error(f"unknown pairs {unknown}; known: {', '.join(builders)}")
    factory = None if args.no_session else _session_factory(args.seeds)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    suffix = f"_{args.pymc_backend}" if args.pymc_backend else ""
    if args.append and out.exists():
        previous = json.loads(out.read_text())
        rows = [r for r in previous["pairs"] if r["name"] not in {n + suffix for n in names}]
    settings = audit_settings(0).model_dump(mode="json")
    settings.pop("seed")
    for name in names:
        pair = builders[name]()
        runs = []
        pair_load = os.getloadavg()[0]
        with (factory() if factory is not None else nullcontext()) as session:
            for i in range(args.seeds):
                rec = run_one(pair, BASE_SEED + i, session, args.pymc_backend)
                runs.append(rec)
                print(f"{name:18s} seed {rec['seed']} {rec['verdict']:12s} {rec['seconds']:6.1f} s "
                      f"looks {rec['looks']} load {os.getloadavg()[0]:.2f}  {rec['reason'][:110]}",
                      file=sys.stderr, flush=True)
        row = pair_record(pair.name + suffix, pair.kind, pair.true_d, pair.true_r, runs)
        row["notes"] = pair.notes + (f"; pymc.backend {args.pymc_backend}" if suffix else "")
        row["load"] = {"start": round(pair_load, 2), "end": round(os.getloadavg()[0], 2)}
        row["commit"] = commit()
        if session is not None:  # child processes started (a kill restarts one) and fits served
            row["pymc_session"] = {"children": session.children, "fits": session.fits}
        row.update(pair.extra)
        rows.append(row)
        rep = report(rows, commit(), machine_info(rows, factory is not None), settings)
        out.write_text(json.dumps(rep, indent=1) + "\n")  # after every pair: partial results survive
    rep = report(rows, commit(), machine_info(rows, factory is not None), settings)
    out.write_text(json.dumps(rep, indent=1) + "\n")
    if args.markdown:
        print(markdown(rep))


if __name__ == "__main__":
    main()
