"""The audit as a sequence of steps: verify, fit each program on each scope, compare.

Each step takes plain values and returns plain values (dicts that serialise to JSON),
so the Celery tasks and the local CLI are thin wrappers around the same code. The
untrusted programs only ever run inside the runners' sandboxed subprocesses.
"""
from __future__ import annotations

import hashlib
import json
import math
import time
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from typing import Callable

import numpy as np

from sandbox import Limits
from sandbox import mode as sandbox_mode
from workers import compare, looks
from workers.errors import AuditError, InvalidRequest, ResourceLimit
from workers.fit import Fit, base_name
from workers.pymc_runner import choice as choices
from workers.settings import AuditSettings, derive_seed

Progress = Callable[..., None]

# Scopes of one local audit fitted at the same time (each scope runs its PyMC and
# LazyPPL fits side by side, so 2 scopes = up to 4 sandboxed processes).
MAX_PARALLEL_SCOPES = 2


def _quiet(event: str, **info) -> None:
    return None


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def jsonable(obj):
    """Evidence as strict JSON: tuples become lists, NaN and ±inf become None
    (PostgreSQL's JSON and every JSON parser refuse them)."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalars
        return jsonable(obj.item())
    return obj


def data_hash(data: dict) -> str:
    """Hash of a scope's data in canonical JSON (sorted keys, no spaces)."""
    return sha256_text(json.dumps(data, sort_keys=True, separators=(",", ":")))


@dataclass(frozen=True)
class AuditRequest:
    """One translation pair with its scopes. ``reference`` (posteriordb draws) is
    compared on ``reference_scope`` only."""

    name: str
    pymc_source: str
    lazyppl_source: str
    scopes: dict[str, dict]
    parameters: list[str] | None = None
    settings: AuditSettings = field(default_factory=AuditSettings)
    reference: Fit | None = None
    reference_scope: str = "full"


@dataclass
class ScopeOutcome:
    """Evidence of one scope (JSON-able) and the fits behind it, keyed (language, look)."""

    evidence: dict
    fits: dict[tuple[str, int], Fit] = field(default_factory=dict)


def validate(request: AuditRequest) -> None:
    """Cheap checks before anything is queued: shapes of the request, then both verifiers.

    Raises InvalidRequest for a malformed request and ProgramRefused for a program the
    verifier refuses. Nothing runs.
    """
    from haskell_bridge import lint
    from workers.pymc_runner import verify
    from workers.pymc_runner.profile import get as get_profile

    if not request.scopes:
        raise InvalidRequest("at least one scope is needed")
    for name, data in request.scopes.items():
        if not isinstance(data, dict):
            raise InvalidRequest(f"scope {name!r} must be a JSON object of data fields")
    for p in request.parameters or []:
        try:
            if base_name(p) != p:
                raise ValueError
        except ValueError:
            raise InvalidRequest(f"parameters lists base names such as 'theta', not {p!r}") from None
    verify(request.pymc_source, get_profile(request.settings.pymc.profile))
    lint(request.lazyppl_source)


def provenance(request: AuditRequest) -> dict:
    """Hashes of the programs and of every scope's data."""
    return {
        "pymc_sha256": sha256_text(request.pymc_source),
        "lazyppl_sha256": sha256_text(request.lazyppl_source),
        "data_sha256": {name: data_hash(d) for name, d in request.scopes.items()},
    }


def compared_names(parameters: list[str] | None, other: Fit, pymc: Fit, *,
                   other_draw: str = "the LazyPPL program's draw",
                   other_short: str = "the LazyPPL draw") -> tuple[list[str], list[str]]:
    """Scalar names to compare, and the PyMC base names left uncompared (SPEC §2.3).

    Default: every base name in ``other``'s draw (the LazyPPL fit, or posteriordb's
    reference draws in a reference audit; ``other_draw``/``other_short`` name it in
    errors). Each must be reportable by the PyMC model (free RV or named Deterministic)
    with the same scalar names.
    """
    other_bases = list(dict.fromkeys(base_name(n) for n in other.draws))
    bases = list(parameters) if parameters else other_bases
    names: list[str] = []
    for b in bases:
        if b not in other_bases:
            raise InvalidRequest(f"parameter {b!r} is not in {other_draw}",
                                 parameter=b, reported=other_bases)
        if b not in pymc.reportable:
            raise InvalidRequest(
                f"parameter {b!r} is not a free random variable or named Deterministic "
                "of the PyMC model", parameter=b, reportable=list(pymc.reportable))
        other_scalars = [n for n in other.draws if base_name(n) == b]
        pymc_scalars = [n for n in pymc.draws if base_name(n) == b]
        if sorted(other_scalars) != sorted(pymc_scalars):
            raise InvalidRequest(
                f"parameter {b!r} has {len(other_scalars)} scalars in {other_short} but "
                f"{len(pymc_scalars)} in the PyMC model", parameter=b)
        names.extend(other_scalars)
    uncompared = [b for b in pymc.reportable if b not in bases]
    return names, uncompared


def fit_meta(fit: Fit) -> dict:
    """Everything about a fit except its draws (those are stored separately)."""
    return {
        "language": fit.language, "chains": fit.n_chains, "draws": fit.n_draws,
        "divergences": fit.divergences, "sampler": fit.sampler, "stats": fit.stats,
        "timings": fit.timings, "versions": fit.versions, "reportable": list(fit.reportable),
    }


#: The phases of a PyMC fit whose seconds a look's record sums over the fit's attempts.
FIT_PHASES = ("import", "prewarm", "build", "compile", "sample")


def _seconds(value) -> float:
    """A phase's seconds as the child reported them: anything but a finite, non-negative
    number counts as none."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return float(value) if ok and math.isfinite(value) and value >= 0 else 0.0


def _attempt_timings(attempts: list) -> list[dict]:
    """The timings of each of a PyMC fit's attempts (``stats["attempts"]``, or some of
    them; a skipped or stopped attempt has none)."""
    return [a["timings"] for a in attempts
            if isinstance(a, dict) and isinstance(a.get("timings"), dict)]


def _rerun_attempts(fit: Fit) -> list[dict]:
    """The attempts of a PyMC fit that a refit with more draws (a later look, same seed)
    runs again: from its last attempt's ``target_accept`` on, when every attempt before
    that one diverged; else all of them (a refit starts at the first ``target_accept``).

    Why an attempt that diverged can be skipped: nutpie's draws do not depend on how
    many are asked for (a later look's first draws are exactly the earlier fit's, every
    chain and parameter: ``benchmarks/refit_recompute.py``), so the same attempt with
    more draws contains the same divergent transitions and would be retried again
    (gp_pois_regr's visible scope, look 2: 0.9 and 0.95 sampled again for 23 s, with 186
    and 31 divergences against 63 and 2 at look 1). Only for nutpie with one mass matrix
    over all attempts (no fallback: a fallback is for that fit only). The refit returns
    the fit a refit from the first ``target_accept`` returns, except when all of its
    attempts diverge: the fewest-divergences choice is then made among those run."""
    attempts = [a for a in fit.stats.get("attempts") or []
                if isinstance(a, dict) and isinstance(a.get("divergences"), (int, float))
                and isinstance(a.get("target_accept"), (int, float))]
    if (len(attempts) < 2 or fit.sampler.get("backend") != "nutpie" or fit.sampler.get("fallbacks")
            or len({a.get("mass_matrix") for a in attempts}) != 1
            or not all(a["divergences"] > 0 for a in attempts[:-1])):
        return attempts
    return attempts[-1:]


def _retry_start(fit: Fit | None, schedule: list[float]) -> int:
    """Where in the ``target_accept`` schedule the refit of PyMC fit ``fit`` (None: a
    first fit) starts: :func:`_rerun_attempts`' first one, else the beginning."""
    rerun = _rerun_attempts(fit) if fit is not None else []
    accept = float(rerun[0]["target_accept"]) if rerun else None
    return schedule.index(accept) if accept in schedule else 0


def pymc_fit_record(fit: Fit) -> dict:
    """What one PyMC fit of a look cost: whether its session compiled the program for it
    (first fit of this program on this data), its attempts (divergence retries included)
    and the seconds of each phase summed over them, and the whole request's seconds
    (``process``). The fit's own ``timings`` are its chosen attempt's: after a retry they
    would show none of the first attempt's import and compile (one_comp's looks read
    compile 0 s although they compiled)."""
    session = fit.stats.get("session") or {}
    t = fit.timings
    attempts = _attempt_timings(fit.stats.get("attempts") or [])
    phases = ({k: round(sum(_seconds(a.get(k)) for a in attempts), 4) for k in FIT_PHASES}
              if attempts else {k: t.get(k) for k in FIT_PHASES})
    record = {"compiled": bool(session.get("compiled")), "session_fit": session.get("fit"),
              "attempts": max(1, len(attempts)), **phases, "process": t.get("process")}
    if type(fit.sampler.get("continued_from")) is int:  # extended the look before's chains
        record["continued_from"] = fit.sampler["continued_from"]
    cached = session.get("callbacks_cached")  # nutpie: callbacks loaded from the cache
    if type(cached) is int and 0 <= cached <= 2:
        record["callbacks_cached"] = cached
    return record


def comparison_rows(result: compare.ScopeComparison, labels: tuple[str, str]) -> list[dict]:
    """Per-parameter evidence rows: d, D, r, R, verdict, hints and both summaries."""
    cand, base = labels
    return [
        {"parameter": c.parameter, "d": c.d, "D": list(c.d_interval), "r": c.r,
         "R": list(c.r_interval), "verdict": c.verdict, "hints": list(c.hints),
         cand: asdict(c.candidate), base: asdict(c.baseline)}
        for c in result.comparisons
    ]


def comparison_evidence(result: compare.ScopeComparison, labels: tuple[str, str]) -> dict:
    cand, base = labels
    return {
        "verdict": result.verdict, "reason": result.reason, "hints": list(result.hints),
        "gates": {cand: list(result.candidate_gates), base: list(result.baseline_gates)},
        "comparisons": comparison_rows(result, labels),
        # chain-by-chain checks of the fit that failed its gates (docs/RULE.md), if made
        "gross": [{**asdict(g), "failing": cand if g.failing == "candidate" else base}
                  for g in result.gross],
    }


def _extendable(result: compare.ScopeComparison) -> bool:
    """Inconclusive only for lack of draws: gates pass (or fail only on ESS or R-hat, not
    divergences) and no parameter disagrees. Whether an R-hat failure is slow mixing or
    separated modes is :func:`workers.looks.diagnose`'s question (see :func:`_plan_look`)."""
    if result.verdict != compare.INCONCLUSIVE:
        return False
    gates = list(result.candidate_gates) + list(result.baseline_gates)
    return not gates or compare.curable_by_more_draws(gates)


#: Largest draws per chain a look may ask for (the settings' own upper bounds).
MAX_DRAWS = {"pymc": 50_000, "lazyppl": 100_000}
#: A projection above the cap by at most this factor asks for the cap (if the wall budget
#: pays for it): projections come from noisy ESS and MCSE estimates, so a look at the cap
#: may still decide. Beyond it, or when a side is already at the cap, the scope stops.
CAP_STRETCH = 4.0
#: A PyMC fit that needed a divergence retry (an attempt with divergent transitions) grows
#: by at most this factor per look: a longer run of the same sampler meets the funnel's
#: neck more often, so a larger projection mostly buys a look that fails on divergences
#: (eight_schools_centered spent 323 s so, now 134 s; it cannot pass PyMC's own gates).
#: A bounded look only re-projects at the next look; calibration (hier6 pairs, 40 seeds
#: each, reports/calibration.json) unchanged at 40/40 agree.
DIVERGING_GROWTH = 4.0
#: A look bounded by the budget (``_plan_look``) plans its fits to take at most this share
#: of the wall time left: fit times vary between runs of the same size.
BUDGET_USE = 0.8


#: One NUTS leapfrog step of the PyMC side (one gradient of its log density) counted in
#: LazyPPL model evaluations, to weigh the two sides' refits against each other
#: (:func:`_refit_work`): the median of (PyMC sampling seconds per step) / (LazyPPL run
#: seconds per evaluation) over 32 scope fits of 15 corpus posteriors, 1.42 (quartiles
#: 0.45-3.4, range 0.15-25: PyMC's steps are dearest on scan-based time series), from
#: benchmarks/refit_costs.py, reports/refit_costs.json. A fixed constant, not a measured
#: per-audit figure: when the plan was weighed by measured seconds (sessions 14-15) it
#: changed with the machine's load, so the same seeds did not give the same draws. A
#: look that grows both sides of a model whose true ratio is q times off this costs at
#: most (2 + √q + 1/√q) / 4 of the best split: 12.5 % more at q = 4, 67 % at q = 20.
PYMC_STEP_IN_EVALUATIONS = 1.4


def sampler_work(fit: Fit) -> float:
    """The work a fit's sampler reports, fixed by the seeds (unlike seconds): a LazyPPL
    fit's model evaluations over all chains (start-state search, Laplace step and warm-up
    included); a PyMC fit's NUTS leapfrog steps (each chain's mean steps per kept draw
    times its tuning and kept draws). NaN when the fit does not report them.
    ``benchmarks/refit_costs.py`` prices these units in seconds."""
    if fit.language == "lazyppl":
        chains = fit.stats.get("chains") or []
        counts = [c.get("evaluations") for c in chains if isinstance(c, dict)]
        if not counts or not all(isinstance(n, (int, float)) and n >= 0 for n in counts):
            return math.nan
        return float(sum(counts))
    steps = fit.stats.get("n_steps")
    per_chain = int(fit.sampler.get("tune") or 0) + int(fit.sampler.get("draws") or 0)
    if not (isinstance(steps, list) and steps and per_chain > 0
            and all(isinstance(n, (int, float)) and n >= 0 for n in steps)):
        return math.nan
    return float(sum(steps)) * per_chain


def _refit_work(fit: Fit) -> float:
    """What refitting this fit at its draws costs, in LazyPPL model evaluations:
    :func:`sampler_work`, a PyMC fit's steps times :data:`PYMC_STEP_IN_EVALUATIONS`. NaN
    when a fit does not report its work: the look then gives each side half of an
    interval's error allowance (:func:`workers.looks.project` without costs)."""
    work = sampler_work(fit)
    return work if fit.language == "lazyppl" else work * PYMC_STEP_IN_EVALUATIONS


def _fit_seconds(fit: Fit) -> float:
    """Seconds a refit of this fit's kind costs per this many draws, checked against the
    wall budget (never used to plan the draws): a PyMC refit in the same session only
    samples (its program stays compiled), every attempt of it that the refit runs again
    (:func:`_rerun_attempts`): a retry that did not skip the attempts that diverged will
    likely need them again (one_comp's full scope, look 1: the chosen attempt sampled
    23 s, both attempts 44 s); a LazyPPL fit reruns its cached binary, so the sandboxed
    run counts, not a first fit's GHC compile (5-12 s cold): all the runs of its chains
    (``run_chain``) when it continued an earlier fit's, as a refit would take (a later
    look's continuation takes less; the budget check stays on the safe side). The same
    for a PyMC attempt that extended earlier chains (``sample_chain``)."""
    t = fit.timings
    if "session" in fit.stats:
        # an attempt that extended earlier chains: all their sampling (``sample_chain``)
        attempts = _attempt_timings(_rerun_attempts(fit))
        sampled = (sum(_seconds(a.get("sample_chain", a.get("sample"))) for a in attempts)
                   if attempts else _seconds(t.get("sample_chain", t.get("sample"))))
        return sampled + 0.5
    if fit.language == "lazyppl" and t.get("run"):
        return (_seconds(t.get("run_chain")) or float(t["run"])) + 0.2
    return float(t.get("total") or t.get("process") or t.get("sample") or 0.0)


def _diverged(fit: Fit) -> bool:
    """Whether any attempt of this PyMC fit (its divergence retries included) diverged,
    or it skipped target_accepts whose attempts diverged at the look before."""
    if fit.stats.get("skipped_target_accepts"):
        return True
    attempts = fit.stats.get("attempts") or []
    counts = [a.get("divergences") for a in attempts if isinstance(a, dict)]
    # the counts come from the child's output: anything but a number counts as none
    return fit.divergences > 0 or any(isinstance(c, (int, float)) and c > 0 for c in counts)


def _plan_look(main: compare.ScopeComparison, vs_ref: compare.ScopeComparison | None,
               names: list[str], lazy: Fit, pymc: Fit, rule: compare.Rule,
               draws: dict[str, int], seconds_left: float) -> tuple[dict, str | None, dict[str, int]]:
    """After an inconclusive look that more draws might cure: diagnose each fit, project
    the draws that would decide the scope, and check them against the wall budget.
    Returns (evidence for the look record, the reason to stop or None, next draws)."""
    diag = {"lazyppl": looks.diagnose(lazy.draws, names, list(main.candidate_gates)),
            "pymc": looks.diagnose(pymc.draws, names, list(main.baseline_gates)
                                   + (list(vs_ref.candidate_gates) if vs_ref is not None else []))}
    evidence: dict = {"diagnosis": {side: d.to_dict() for side, d in diag.items()}}
    for side, d in diag.items():
        if d.kind == looks.SEPARATED_MODES:
            return evidence, (f"the {side} chains sit in separate modes ({d.parameter}: chain means "
                              f"{d.separation:.0f} within-chain MCSEs apart, every chain with bulk ESS "
                              f">= {d.min_chain_ess:.0f}); more draws would not join them"), draws
    needing = compare.sides_needing_draws(main, rule)
    # PyMC against the reference undecided: PyMC grows for it too
    ref_open = vs_ref is not None and vs_ref.verdict == compare.INCONCLUSIVE

    # what each side's draws cost, and the most a look may ask of it: when both grow (and
    # both pass their gates), an interval's error allowance is split at the least work
    # (looks.split). The work is counted, not timed, so the plan (and the next look's
    # draws) follows from the seeds; the seconds only check the wall budget.
    costs = tuple(float(round(w)) if math.isfinite(w) else math.nan
                  for w in (_refit_work(lazy), _refit_work(pymc)))
    caps = (MAX_DRAWS["lazyppl"] / draws["lazyppl"], MAX_DRAWS["pymc"] / draws["pymc"])
    evidence["refit_work"] = {side: (int(c) if math.isfinite(c) else None)
                              for side, c in zip(("lazyppl", "pymc"), costs)}
    if not all(math.isfinite(c) and c > 0 for c in costs):
        costs = None  # a side's work not reported: equal halves (looks.project)
    evidence["refit_seconds"] = {"lazyppl": round(_fit_seconds(lazy), 3),
                                 "pymc": round(_fit_seconds(pymc), 3)}

    # the tails of the parameters a look plans for (both fits' draws pooled: an agreeing
    # pair has one posterior; a heavier tail on one side shows in the pool), measured
    # where every R-hat passes (a fit whose chains disagree may hold a transient's far
    # draws): the draws that make a mean or an SD a reliable estimate (looks.tail_draws)
    tails: dict[str, float] = {}
    if compare.max_rhat(main) <= rule.rhat_max:
        checks = [main] + ([vs_ref] if vs_ref is not None else [])
        for name in dict.fromkeys(c.parameter for check in checks for c in check.comparisons
                                  if c.verdict == compare.INCONCLUSIVE or not check.gates_passed):
            k = looks.tail_khat(np.concatenate([np.ravel(lazy.draws[name]), np.ravel(pymc.draws[name])]))
            if math.isfinite(k):
                tails[name] = k
        evidence["tail_khat"] = {name: round(k, 3) for name, k in tails.items()}

    def projections(minimal: bool) -> tuple[looks.Projection, looks.Projection]:
        if not ref_open:
            return looks.project(main, rule, needing, minimal, costs, caps, tails=(tails, tails))
        # PyMC grows for its check against the reference anyway: the comparison with
        # LazyPPL is planned from those draws (a floor), so LazyPPL is not grown to
        # relieve PyMC error that the reference's growth removes
        p_ref, _ = looks.project(vs_ref, rule, (True, False), minimal, tails=(tails, None))
        p_lazy, p_pymc = looks.project(main, rule, (needing[0], True), minimal, costs, caps,
                                       floors=(1.0, p_ref.factor), tails=(tails, tails))
        return p_lazy, (p_ref if p_ref.factor >= p_pymc.factor else p_pymc)

    p_lazy, p_pymc = projections(False)
    grow_lazy = needing[0] or p_lazy.factor > 1
    grow_pymc = needing[1] or p_pymc.factor > 1 or ref_open
    fits = {"lazyppl": lazy, "pymc": pymc}
    growing = [side for side, g in (("lazyppl", grow_lazy), ("pymc", grow_pymc)) if g]
    plan = {"lazyppl": p_lazy, "pymc": p_pymc}
    evidence["projection"] = {side: plan[side].to_dict() for side in growing}
    asked = _asked_draws(plan, growing, fits, draws, evidence)
    if isinstance(asked, str):
        return evidence, asked, draws
    nxt, cost = asked
    evidence["next_draws"] = nxt
    evidence["projected_seconds"] = round(cost, 1)
    minimal = dict(zip(("lazyppl", "pymc"), projections(True)))
    short = _bounded_short_of_least(minimal, growing, fits, draws, nxt, evidence)
    if short is not None and short["seconds"] > seconds_left:
        # a bounded look (the diverging-growth bound, the cap) only re-projects; when the
        # fewest draws that could decide, at their full length, already cost more than
        # the time left, no later look can pay for them either
        evidence["short_of_least"] = short
        return evidence, (f"budget spent: even the fewest draws that could decide "
                          f"({', '.join(f'{n} {side}' for side, n in short['draws'].items())} "
                          f"per chain) need about {short['seconds']:.0f} s of fitting, more "
                          f"than the {max(0.0, seconds_left):.0f} s left of wall_seconds; "
                          "this look's draws were bounded below them"), draws
    if cost <= seconds_left:
        return evidence, None, nxt
    # The planned look (aimed past every boundary with margins) is over the budget. If the
    # fewest draws that could decide at all fit in what is left, the last look takes as
    # many of the planned draws as the budget pays for; otherwise more draws cannot
    # decide within the budget and the scope stops.
    least = _asked_draws(minimal, growing, fits, draws, {})
    bound: dict = {"planned_seconds": round(cost, 1),
                   "minimal": {side: minimal[side].to_dict() for side in growing}}
    evidence["budget_bound"] = bound
    if not isinstance(least, str):
        least_draws, least_cost = least
        bound["minimal_draws"], bound["minimal_seconds"] = least_draws, round(least_cost, 1)
        if least_cost <= seconds_left:
            paid = dict(draws)
            for side in growing:
                per_draw = _fit_seconds(fits[side]) / draws[side]
                affordable = (math.floor(BUDGET_USE * seconds_left / per_draw) if per_draw > 0
                              else nxt[side])
                paid[side] = max(least_draws[side], min(nxt[side], affordable))
            cost = max(_fit_seconds(fits[side]) * paid[side] / draws[side] for side in growing)
            bound["asked"] = paid
            evidence["next_draws"] = paid
            evidence["projected_seconds"] = round(cost, 1)
            return evidence, None, paid
    return evidence, (f"budget spent: deciding needs about {cost:.0f} s more of fitting, "
                      f"more than the {max(0.0, seconds_left):.0f} s left of wall_seconds"
                      + ("" if isinstance(least, str) else
                         f" (even the fewest draws that could decide need {least[1]:.0f} s)")), draws


def _bounded_short_of_least(minimal: dict[str, looks.Projection], growing: list[str],
                            fits: dict[str, Fit], draws: dict[str, int], nxt: dict[str, int],
                            evidence: dict) -> dict | None:
    """The sides whose next draws ``nxt`` were bounded (``evidence`` records the
    diverging-growth bound and capped projections) below the fewest draws that could
    decide (``minimal``, unbounded), with those draws and what fitting them would cost:
    ``{"draws": {side: n}, "seconds"}``; ``None`` when no bounded side falls short."""
    bounded = set(evidence.get("capped", {}))
    if "diverging_growth" in evidence:
        bounded.add("pymc")
    need = {side: math.ceil(draws[side] * minimal[side].factor) for side in growing
            if side in bounded and math.isfinite(minimal[side].factor)}
    short = {side: n for side, n in need.items() if n > nxt[side]}
    if not short:
        return None
    seconds = max(_fit_seconds(fits[side]) * n / draws[side] for side, n in short.items())
    return {"draws": short, "seconds": round(seconds, 1)}


def _asked_draws(plan: dict[str, looks.Projection], growing: list[str], fits: dict[str, Fit],
                 draws: dict[str, int], evidence: dict) -> tuple[dict[str, int], float] | str:
    """The draws per chain a look asks for on the growing sides under projections
    ``plan`` and the projected seconds of its fits, or why no look can decide: a side
    that no number of draws decides, or a projection far over the cap. Records the
    diverging-growth bound and capped projections in ``evidence``."""
    nxt = dict(draws)
    cost = 0.0
    capped: dict[str, int] = {}
    for side in growing:
        p, fit = plan[side], fits[side]
        if not math.isfinite(p.factor):
            return f"no number of {side} draws can decide it ({'; '.join(p.reasons)})"
        want = math.ceil(draws[side] * p.factor)
        if side == "pymc" and p.factor > DIVERGING_GROWTH and _diverged(fit):
            bounded = math.ceil(draws[side] * DIVERGING_GROWTH)
            evidence["diverging_growth"] = {"projected": want, "asked": bounded}
            want = bounded
        cap = MAX_DRAWS[side]
        if want > cap:
            if draws[side] >= cap or want > CAP_STRETCH * cap:
                return (f"deciding needs {want} {side} draws per chain, above the "
                        f"{cap} a look may ask for"
                        + (" (this look had them)" if draws[side] >= cap else ""))
            capped[side] = want
            want = cap
        nxt[side] = want
        cost = max(cost, _fit_seconds(fit) * want / draws[side])
    if capped:
        # projected above the cap but within CAP_STRETCH of it: a look at the cap may decide
        evidence["capped"] = capped
    return nxt, cost


def accept_schedule(s: AuditSettings) -> list[float]:
    """The ``target_accept`` values a PyMC fit of these settings tries in turn (the
    session's schedule)."""
    return choices.accept_schedule(s.pymc.target_accept, s.pymc.retry_target_accepts)


def _fit_pymc(session, source: str, data: dict, s: AuditSettings, draws: int, seed: int,
              limits: Limits, start: int = 0) -> Fit:
    """``start``: index into :func:`accept_schedule` of the first attempt (a later look
    skips the attempts that diverged at the earlier one: :func:`_rerun_attempts`)."""
    p = s.pymc
    schedule = accept_schedule(s)
    start = min(max(0, start), len(schedule) - 1)
    fit = session.fit(source, data, chains=p.chains, tune=p.tune, draws=draws,
                      target_accept=schedule[start], backend=p.backend, seed=seed,
                      retry_target_accepts=tuple(schedule[start + 1:]),
                      mass_matrix=p.mass_matrix, profile=p.profile,
                      wall_seconds=limits.wall_seconds,
                      # a later look extends these chains (same draws as a refit)
                      draw_cap=(MAX_DRAWS["pymc"] if p.extend_chains and s.budget.max_looks > 1
                                else None))
    if start:  # stored with the fit: it needed divergence retries, as before
        fit.stats["skipped_target_accepts"] = schedule[:start]
    return fit


class _OwnSession:
    """The given PyMC session, or a new one (closed on exit) when none was given."""

    def __init__(self, session, settings: AuditSettings, scopes: int = 1) -> None:
        self.given, self.settings, self.scopes = session, settings, scopes
        self.own = None

    def __enter__(self):
        if self.given is not None:
            return self.given
        from workers.pymc_runner.session import PymcSession, limits_for

        # one child per scope fitted at the same time: their compiles overlap
        self.own = PymcSession(limits_for(self.settings),
                               max_children=min(self.scopes, MAX_PARALLEL_SCOPES))
        return self.own

    def __exit__(self, *exc) -> None:
        if self.own is not None:
            self.own.close()


def _fit_lazyppl(source: str, data: dict, s: AuditSettings, draws: int, seed: int, limits: Limits,
                 earlier: Fit | None = None) -> Fit:
    """A LazyPPL fit of ``draws`` draws; a later look continues the chains of the
    look before (``earlier``) where they have checkpoints: same draws as a refit, without
    sampling the warm-up and the earlier draws again. Every look reckons the
    multi-start budget from the first look's draws, which is what makes the two agree."""
    from haskell_bridge.run import fit_lazyppl, resumable

    q = s.lazyppl
    return fit_lazyppl(source, data, chains=q.chains, warmup=q.warmup, draws=draws,
                       thin=q.thin, kernel=q.kernel, seed=seed, limits=limits,
                       budget_draws=q.draws,
                       resume=earlier if resumable(earlier, draws=draws) else None)


def _both(first: Callable[[], Fit], second: Callable[[], Fit]) -> tuple[Fit, Fit]:
    """Run two fits at the same time (each is a sandboxed subprocess; the threads only
    wait). Their single-threaded phases (imports, compilation) overlap, which is most
    of a small model's wall time. Each fit has its own seed, so the draws are the same
    as when run one after the other. If one fails, its error is raised once the other
    has finished, so no subprocess is left behind."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        a, b = pool.submit(first), pool.submit(second)
        wait([a, b])
    return a.result(), b.result()


def _limits(s: AuditSettings, deadline: float) -> Limits:
    wall = max(30.0, deadline - time.monotonic())
    return Limits(cpu_seconds=2 * wall + 30, memory_mb=s.budget.memory_mb, wall_seconds=wall)


def run_scope(
    pymc_source: str,
    lazyppl_source: str,
    scope: str,
    data: dict,
    parameters: list[str] | None,
    settings: AuditSettings,
    reference: Fit | None = None,
    progress: Progress = _quiet,
    pymc_session=None,
) -> ScopeOutcome:
    """Fit both programs on one scope and compare them, taking more looks while the
    answer is inconclusive for lack of draws and the budget lasts (k stays fixed).

    User errors (refused, compile, runtime, memory) become a scope verdict ``error``
    with the reason; running out of the wall budget makes it ``inconclusive``. The PyMC
    fits go to ``pymc_session`` (a :class:`workers.pymc_runner.PymcSession` of this
    audit), or to a session of this scope's own.
    """
    with _OwnSession(pymc_session, settings) as session:
        return _run_scope(session, pymc_source, lazyppl_source, scope, data, parameters,
                          settings, reference, progress)


def _run_scope(session, pymc_source: str, lazyppl_source: str, scope: str, data: dict,
               parameters: list[str] | None, settings: AuditSettings, reference: Fit | None,
               progress: Progress) -> ScopeOutcome:
    s = settings
    rule = compare.Rule.from_settings(s.rule)
    started = time.monotonic()
    deadline = started + s.budget.wall_seconds
    seeds = {"pymc": derive_seed(s.seed, scope, "pymc"), "lazyppl": derive_seed(s.seed, scope, "lazyppl")}
    outcome = ScopeOutcome(evidence={"scope": scope, "data_sha256": data_hash(data), "seeds": seeds,
                                     "looks": []})
    ev = outcome.evidence
    pymc_draws, lazy_draws = s.pymc.draws, s.lazyppl.draws
    schedule = accept_schedule(s)
    pymc: Fit | None = None
    lazy: Fit | None = None
    try:
        for look in range(1, s.budget.max_looks + 1):
            t0 = time.monotonic()
            # a side whose draws did not grow keeps its fit: same seed and draws would
            # give the same draws again
            refit_pymc = pymc is None or pymc.n_draws != pymc_draws
            refit_lazy = lazy is None or lazy.n_draws != lazy_draws
            # a later look's PyMC refit skips the target_accepts that diverged before
            start = _retry_start(pymc, schedule) if refit_pymc else 0
            if refit_pymc:
                progress("fit", scope=scope, language="pymc", look=look, draws=pymc_draws)
            if refit_lazy:
                progress("fit", scope=scope, language="lazyppl", look=look, draws=lazy_draws)
            pymc, lazy = _both(
                (lambda: _fit_pymc(session, pymc_source, data, s, pymc_draws, seeds["pymc"],
                                   _limits(s, deadline), start)) if refit_pymc else (lambda f=pymc: f),
                (lambda f=lazy: _fit_lazyppl(lazyppl_source, data, s, lazy_draws, seeds["lazyppl"],
                                             _limits(s, deadline), f)) if refit_lazy
                else (lambda f=lazy: f))
            outcome.fits[("pymc", look)] = pymc
            outcome.fits[("lazyppl", look)] = lazy
            names, uncompared = compared_names(parameters, lazy, pymc)
            progress("compare", scope=scope, look=look)
            main = compare.compare_draws(lazy.draws, pymc.draws, names, rule,
                                         baseline_divergences=pymc.divergences,
                                         labels=("lazyppl", "pymc"))
            checks = [main]
            ref_ev = None
            if reference is not None:
                ref_names = [n for n in names if n in reference.draws]
                vs_ref = compare.compare_draws(pymc.draws, reference.draws, ref_names, rule,
                                               candidate_divergences=pymc.divergences,
                                               labels=("pymc", "reference"))
                lazy_ref = compare.compare_draws(lazy.draws, reference.draws, ref_names, rule,
                                                 labels=("lazyppl", "reference"))
                checks.append(vs_ref)
                ref_ev = {"parameters": ref_names,
                          "pymc_vs_reference": comparison_evidence(vs_ref, ("pymc", "reference")),
                          "lazyppl_vs_reference": comparison_evidence(lazy_ref, ("lazyppl", "reference"))}
            verdict, reason = _scope_decision(main, checks[1] if reference is not None else None)
            ev["looks"].append({"look": look, "pymc_draws": pymc_draws, "lazyppl_draws": lazy_draws,
                                "refitted": [n for n, r in (("pymc", refit_pymc),
                                                            ("lazyppl", refit_lazy)) if r],
                                **({"pymc_fit": pymc_fit_record(pymc)} if refit_pymc else {}),
                                **({"pymc_first_target_accept": schedule[start]}
                                   if start else {}),
                                **({"lazyppl_continued_from": lazy.sampler["continued_from"]}
                                   if refit_lazy and "continued_from" in lazy.sampler else {}),
                                "verdict": verdict, "reason": reason,
                                "seconds": round(time.monotonic() - t0, 3)})
            ev.update(comparison_evidence(main, ("lazyppl", "pymc")))
            ev.update({"verdict": verdict, "reason": reason, "lazyppl_vs_pymc": main.verdict,
                       "compared": names,
                       "uncompared_pymc": uncompared, "reference": ref_ev,
                       "fits": {"pymc": fit_meta(pymc), "lazyppl": fit_meta(lazy)}})
            if not any(_extendable(c) for c in checks) or verdict != compare.INCONCLUSIVE:
                break
            if look == s.budget.max_looks:
                ev["reason"] = f"{reason}; budget spent: {look} looks (max_looks)"
                break
            # the next look asks for the draws projected to decide the scope, unless
            # the chains sit in separate modes or the budget cannot pay for them
            plan_ev, stop, nxt = _plan_look(main, checks[1] if reference is not None else None,
                                            names, lazy, pymc, rule,
                                            {"pymc": pymc_draws, "lazyppl": lazy_draws},
                                            deadline - time.monotonic())
            ev["looks"][-1].update(plan_ev)
            if stop is not None:
                ev["reason"] = f"{reason}; {stop}"
                break
            pymc_draws, lazy_draws = nxt["pymc"], nxt["lazyppl"]
    except AuditError as err:
        ev.update(stopped_scope(err))
    ev["seconds"] = round(time.monotonic() - started, 3)
    outcome.evidence = jsonable(ev)
    progress("scope_done", scope=scope, verdict=ev["verdict"])
    return outcome


def stopped_scope(err: AuditError) -> dict:
    """Verdict, reason and error of a scope that a user-facing error stopped: the wall
    clock or CPU running out leaves it ``inconclusive`` (budget spent, never a
    disagreement); any other error (refused, compile, runtime, memory) is ``error``."""
    if isinstance(err, ResourceLimit) and err.details.get("limit") in ("timeout", "cpu"):
        return {"verdict": compare.INCONCLUSIVE, "error": err.to_dict(),
                "reason": f"budget spent: {err}"}
    return {"verdict": compare.ERROR, "reason": str(err), "error": err.to_dict()}


def _scope_decision(main: compare.ScopeComparison, vs_ref: compare.ScopeComparison | None) -> tuple[str, str]:
    """LazyPPL↔PyMC verdict, unless PyMC cannot serve as baseline (SPEC §4)."""
    if vs_ref is not None and vs_ref.verdict != compare.AGREE:
        return compare.INCONCLUSIVE, (
            f"the PyMC fit does not agree with posteriordb's reference ({vs_ref.verdict}: "
            f"{vs_ref.reason}), so it cannot serve as baseline; LazyPPL vs PyMC: {main.verdict}")
    return main.verdict, main.reason


def finish_audit(request_meta: dict, scopes: dict[str, dict], settings: AuditSettings) -> dict:
    """Pair verdict (SPEC §4) and the audit's evidence from its scopes' evidence."""
    verdicts = {name: ev["verdict"] for name, ev in scopes.items()}
    verdict = compare.pair_verdict(verdicts)
    if verdict == compare.AGREE:
        reason = f"every compared parameter agrees in every scope ({', '.join(scopes)})"
    else:
        reason = "; ".join(f"{name}: {ev['verdict']} ({ev.get('reason', '')})"
                           for name, ev in scopes.items() if ev["verdict"] != compare.AGREE)
    versions: dict = {}
    for ev in scopes.values():
        for side in (ev.get("fits") or {}).values():
            versions.update(side.get("versions") or {})
    return jsonable({
        **request_meta,
        "verdict": verdict,
        "reason": reason,
        "scope_verdicts": verdicts,
        "scopes": scopes,
        "settings": settings.model_dump(mode="json"),
        "versions": versions,
        # "none" only when an operator switched the OS sandbox off (trusted local use)
        "sandbox": sandbox_mode(),
        "timings": {"scopes_seconds": {n: ev.get("seconds") for n, ev in scopes.items()},
                    "pymc": pymc_work(scopes)},
    })


def pymc_work(scopes: dict[str, dict]) -> dict:
    """PyMC fits and compiles over the audit's looks, from the scopes' look records:
    with one session per audit, one compile per (program, scope data)."""
    fits = [look["pymc_fit"] for ev in scopes.values() for look in ev.get("looks", [])
            if "pymc_fit" in look]
    return {"fits": len(fits), "compiles": sum(1 for f in fits if f["compiled"]),
            "compile_seconds": round(sum(f.get("compile") or 0.0 for f in fits), 3),
            "sample_seconds": round(sum(f.get("sample") or 0.0 for f in fits), 3)}


def error_audit(request_meta: dict, err: AuditError, settings: AuditSettings) -> dict:
    """Evidence of an audit stopped before fitting (refused program, bad request)."""
    return jsonable({**request_meta, "verdict": compare.ERROR, "reason": str(err),
                     "error": err.to_dict(), "scope_verdicts": {}, "scopes": {},
                     "settings": settings.model_dump(mode="json"), "sandbox": sandbox_mode()})


def run_audit(request: AuditRequest, progress: Progress = _quiet, *,
              pymc_session=None) -> tuple[dict, dict[tuple[str, str, int], Fit]]:
    """The whole audit in this process (the programs still run sandboxed).

    Every PyMC fit of the audit goes to one :class:`workers.pymc_runner.PymcSession`
    (PyMC imported once, each program compiled once per scope data), started before
    anything else so its imports overlap the LazyPPL side's compile; ``pymc_session``
    passes one in (our own trusted programs only: a benchmark fitting one pair with
    many seeds). Returns the evidence and the fits keyed (scope, language, look).
    """
    meta = {"name": request.name, **provenance(request)}
    try:
        validate(request)
    except AuditError as err:
        return error_audit(meta, err, request.settings), {}

    with _OwnSession(pymc_session, request.settings, len(request.scopes)) as session:
        def one(scope: str) -> ScopeOutcome:
            ref = request.reference if scope == request.reference_scope else None
            return _run_scope(session, request.pymc_source, request.lazyppl_source, scope,
                              request.scopes[scope], request.parameters, request.settings,
                              ref, progress)

        # scopes are independent (own data, own seeds): run them side by side (their
        # PyMC fits take turns in the session), keep the request's scope order
        workers = max(1, min(len(request.scopes), MAX_PARALLEL_SCOPES))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            outcomes = dict(zip(request.scopes, pool.map(one, request.scopes)))
    scopes, fits = {}, {}
    for scope, out in outcomes.items():
        scopes[scope] = out.evidence
        fits.update({(scope, lang, look): f for (lang, look), f in out.fits.items()})
    return finish_audit(meta, scopes, request.settings), fits
