"""The comparison rule of SPEC §4, as pure functions over arrays and frozen dataclasses.

Conventions: the *baseline* B is the fit we trust more (PyMC, or posteriordb's
reference), the *candidate* C the fit under audit (LazyPPL, or PyMC against the
reference). For one scalar parameter:

* d = (m_C − m_B) / s_B, in units of the baseline posterior SD, with the Monte Carlo
  interval D = d ± k·√(mcse_m,C² + mcse_m,B²) / s_B;
* r = s_C / s_B with R = r·exp(± k·√((mcse_s,C/s_C)² + (mcse_s,B/s_B)²)).

agree: D ⊆ [−δ, δ] and R ⊆ band; disagree: D wholly outside [−δ, δ] or R wholly
outside the band; inconclusive otherwise. Interval ends touching a bound count as
inside it (closed intervals). Means, SDs, MCSEs, ESS and R-hat come from ArviZ
(rank-normalised split R-hat, bulk/tail ESS; Vehtari et al. 2021).

This module imports only NumPy and ArviZ; it knows nothing of programs or storage.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import arviz as az
import numpy as np

AGREE, INCONCLUSIVE, DISAGREE, ERROR = "agree", "inconclusive", "disagree", "error"


@dataclass(frozen=True)
class Rule:
    """Thresholds of the rule and of the convergence gates (SPEC §4 defaults)."""

    k: float = 4.0
    delta: float = 0.2
    sd_ratio_band: tuple[float, float] = (0.8, 1.25)
    rhat_max: float = 1.01
    ess_bulk_min: float = 400.0
    ess_tail_min: float = 400.0
    max_divergences: int = 0
    # a scope whose one fit failed its gates (R-hat/ESS only) may still disagree when
    # every chain of that fit grossly differs from the other fit (GrossCheck.fires).
    # Off by default: SPEC §4 says a failed gate is never disagree (docs/RULE.md)
    gross_difference: bool = False

    @classmethod
    def from_settings(cls, rule) -> "Rule":
        """Build from ``workers.settings.RuleSettings`` (or anything with those fields)."""
        return cls(
            k=rule.k,
            delta=rule.delta,
            sd_ratio_band=tuple(rule.sd_ratio_band),
            rhat_max=rule.rhat_max,
            ess_bulk_min=rule.ess_bulk_min,
            ess_tail_min=rule.ess_tail_min,
            max_divergences=rule.max_divergences,
            gross_difference=getattr(rule, "gross_difference", False),
        )


@dataclass(frozen=True)
class Summary:
    """Posterior summary of one scalar parameter of one fit (ArviZ estimators)."""

    mean: float
    sd: float
    mcse_mean: float
    mcse_sd: float
    ess_bulk: float
    ess_tail: float
    rhat: float
    chains: int
    draws: int
    frac_positive: float


def summarize(draws: np.ndarray) -> Summary:
    """Summarise a (chains, draws) array. MCSEs are of the mean and of the SD."""
    x = np.asarray(draws, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] < 4:
        raise ValueError(f"draws must be (chains, draws) with at least 4 draws, got {x.shape}")

    def scalar(v) -> float:
        return float(np.squeeze(np.asarray(v)))

    return Summary(
        mean=float(x.mean()),
        sd=float(x.std(ddof=1)),
        mcse_mean=scalar(az.mcse(x, method="mean")),
        mcse_sd=scalar(az.mcse(x, method="sd")),
        ess_bulk=scalar(az.ess(x, method="bulk")),
        ess_tail=scalar(az.ess(x, method="tail")),
        rhat=scalar(az.rhat(x)),
        chains=int(x.shape[0]),
        draws=int(x.shape[1]),
        frac_positive=float((x > 0).mean()),
    )


@dataclass(frozen=True)
class Comparison:
    """Candidate vs baseline on one scalar parameter, with the verdict of the rule."""

    parameter: str
    d: float
    d_interval: tuple[float, float]
    r: float
    r_interval: tuple[float, float]
    verdict: str
    candidate: Summary
    baseline: Summary
    hints: tuple[str, ...] = ()


def _finite(*xs: float) -> bool:
    return all(math.isfinite(x) for x in xs)


def intervals(candidate: Summary, baseline: Summary, k: float) -> tuple[float, tuple, float, tuple]:
    """(d, D, r, R) of SPEC §4. NaN where the baseline SD (or candidate SD) is zero."""
    nan = float("nan")
    if not (_finite(candidate.sd, baseline.sd) and baseline.sd > 0):
        return nan, (nan, nan), nan, (nan, nan)
    d = (candidate.mean - baseline.mean) / baseline.sd
    half = k * math.hypot(candidate.mcse_mean, baseline.mcse_mean) / baseline.sd
    if candidate.sd <= 0:
        return d, (d - half, d + half), 0.0, (0.0, 0.0)
    r = candidate.sd / baseline.sd
    spread = k * math.hypot(candidate.mcse_sd / candidate.sd, baseline.mcse_sd / baseline.sd)
    return d, (d - half, d + half), r, (r * math.exp(-spread), r * math.exp(spread))


def interval_verdict(d_interval, r_interval, rule: Rule) -> str:
    """The rule on already computed intervals; NaN intervals are inconclusive."""
    if not _finite(*d_interval, *r_interval):
        return INCONCLUSIVE
    d_state, r_state = interval_states(d_interval, r_interval, rule)
    if d_state == r_state == "in":
        return AGREE
    return DISAGREE if "out" in (d_state, r_state) else INCONCLUSIVE


def interval_states(d_interval, r_interval, rule: Rule) -> tuple[str, str]:
    """Where D lies against [−δ, δ] and R against the SD-ratio band: ``"in"`` (wholly
    inside, ends included), ``"out"`` (wholly outside) or ``"open"`` (straddling)."""
    lo, hi = rule.sd_ratio_band

    def state(low: float, high: float, a: float, b: float) -> str:
        if a <= low and high <= b:
            return "in"
        return "out" if (high < a or low > b) else "open"

    return state(*d_interval, -rule.delta, rule.delta), state(*r_interval, lo, hi)


def compare_summaries(name: str, candidate: Summary, baseline: Summary, rule: Rule) -> Comparison:
    """Apply the rule to one parameter (no gates: see :func:`gate_failures`)."""
    d, d_int, r, r_int = intervals(candidate, baseline, rule.k)
    verdict = interval_verdict(d_int, r_int, rule)
    hints = parameter_hints(candidate, baseline, r_int) if verdict == DISAGREE else ()
    return Comparison(name, d, d_int, r, r_int, verdict, candidate, baseline, hints)


def gate_failures(summaries: dict[str, Summary], divergences: int, rule: Rule) -> list[str]:
    """Names of the failed convergence checks of one fit, e.g. ``R-hat of tau 1.03 > 1.01``."""
    failures = []
    if divergences > rule.max_divergences:
        failures.append(f"{divergences} divergent transitions > {rule.max_divergences}")
    for name, s in summaries.items():
        if not (math.isfinite(s.rhat) and s.rhat <= rule.rhat_max):
            failures.append(f"R-hat of {name} {s.rhat:.3f} > {rule.rhat_max}")
        if not (math.isfinite(s.ess_bulk) and s.ess_bulk >= rule.ess_bulk_min):
            failures.append(f"bulk ESS of {name} {s.ess_bulk:.0f} < {rule.ess_bulk_min:.0f}")
        if not (math.isfinite(s.ess_tail) and s.ess_tail >= rule.ess_tail_min):
            failures.append(f"tail ESS of {name} {s.ess_tail:.0f} < {rule.ess_tail_min:.0f}")
    return failures


#: A chain with at least this single-chain bulk ESS has a mean (and SD) whose ArviZ MCSE
#: can be trusted on its own (the same floor as ``workers.looks.USEFUL_CHAIN_ESS``).
GROSS_MIN_CHAIN_ESS = 50.0


@dataclass(frozen=True)
class GrossCheck:
    """Chain by chain, how far the fit that failed its gates lies from the fit that passed,
    on one parameter (the "gross difference despite poor mixing" rule, docs/RULE.md).

    For each chain c of the failing fit F, against the passing fit O (means m, SDs s,
    MCSEs and bulk ESS from ArviZ on that chain alone, O's from all its chains):

    * ``margin``: the largest m such that every chain's interval
      ((m_C − m_B) ± k·√(mcse_c² + mcse_O²)) / s_O lies wholly beyond m on one and the
      same side (d's sign convention: candidate minus baseline, here in units of the
      passing fit's SD); NaN when the chains' intervals are not all on one side of 0;
    * ``width_low`` / ``width_high``: the smallest lower end and the smallest upper end,
      over chains, of the interval s_c / s_O · exp(± k·√((mcse_s,c/s_c)² + (mcse_s,O/s_O)²));
    * ``min_chain_ess``: the smallest single-chain bulk ESS of F on this parameter.
    """

    parameter: str
    failing: str  # "candidate" | "baseline"
    margin: float
    width_low: float
    width_high: float
    min_chain_ess: float

    def fires(self, rule: "Rule", min_chain_ess: float = GROSS_MIN_CHAIN_ESS) -> str | None:
        """Why this parameter grossly differs, or None. Every chain of F must have a
        useful ESS, and then either

        * every chain lies wholly outside the δ band on the same side, and no chain is
          demonstrably narrower than O (a chain stuck in part of the posterior, such as
          a funnel's neck or one of two modes, has a mean far from the posterior mean
          but also a small SD: that is poor mixing, not a different posterior); or
        * every chain is wholly wider than the SD band allows (only *wider* counts: a
          slowly mixing chain explores too little, never too much).
        """
        if not (math.isfinite(self.min_chain_ess) and self.min_chain_ess >= min_chain_ess):
            return None
        lo, hi = rule.sd_ratio_band
        # F's SD over O's: the band's edges in that direction
        narrow, wide = (lo, hi) if self.failing == "candidate" else (1 / hi, 1 / lo)
        if (math.isfinite(self.margin) and self.margin > rule.delta
                and math.isfinite(self.width_high) and self.width_high >= narrow):
            return (f"{self.parameter}: every {self.failing} chain lies more than {self.margin:.2f} "
                    f"SDs from the other fit's mean (delta {rule.delta:g})")
        if math.isfinite(self.width_low) and self.width_low > wide:
            return (f"{self.parameter}: every {self.failing} chain is more than {self.width_low:.2f} "
                    f"times as wide as the other fit (band up to {wide:.3g})")
        return None


def gross_check(name: str, failing: np.ndarray, passing: Summary, failing_is_candidate: bool,
                k: float) -> GrossCheck:
    """:class:`GrossCheck` of one parameter: ``failing`` is the (chains, draws) array of
    the fit that failed its gates, ``passing`` the summary of the fit that passed."""
    nan = float("nan")
    x = np.asarray(failing, dtype=np.float64)
    label = "candidate" if failing_is_candidate else "baseline"
    if (x.ndim != 2 or x.shape[1] < 8 or not np.all(np.isfinite(x))
            or not (_finite(passing.mean, passing.sd, passing.mcse_mean, passing.mcse_sd)
                    and passing.sd > 0)):
        return GrossCheck(name, label, nan, nan, nan, nan)
    lows, highs, w_low, w_high, esses = [], [], [], [], []
    for chain in x:
        c = chain[None, :]
        m, s = float(chain.mean()), float(chain.std(ddof=1))
        if s <= 0:  # a chain that never moved: nothing to say
            return GrossCheck(name, label, nan, nan, nan, 0.0)
        mcse_m = float(np.squeeze(az.mcse(c, method="mean")))
        mcse_s = float(np.squeeze(az.mcse(c, method="sd")))
        esses.append(float(np.squeeze(az.ess(c, method="bulk"))))
        diff = (m - passing.mean) if failing_is_candidate else (passing.mean - m)
        half = k * math.hypot(mcse_m, passing.mcse_mean)
        lows.append((diff - half) / passing.sd)
        highs.append((diff + half) / passing.sd)
        spread = k * math.hypot(mcse_s / s, passing.mcse_sd / passing.sd)
        w_low.append(s / passing.sd * math.exp(-spread))
        w_high.append(s / passing.sd * math.exp(spread))
    if not _finite(*lows, *highs, *w_low, *w_high, *esses):
        return GrossCheck(name, label, nan, nan, nan, nan)
    if min(lows) > 0:
        margin = min(lows)
    elif max(highs) < 0:
        margin = -max(highs)
    else:
        margin = nan
    return GrossCheck(name, label, margin, min(w_low), min(w_high), min(esses))


def gross_checks(candidate: dict[str, np.ndarray], baseline: dict[str, np.ndarray],
                 summaries: tuple[dict[str, Summary], dict[str, Summary]],
                 gates: tuple[tuple[str, ...], tuple[str, ...]], names: list[str],
                 rule: "Rule") -> tuple[GrossCheck, ...]:
    """Gross-difference checks of a scope in which exactly one fit failed its gates, on
    R-hat or ESS only (divergences mean a biased sampler: no check); () otherwise."""
    cand_gates, base_gates = gates
    if bool(cand_gates) == bool(base_gates):
        return ()
    failing_gates = cand_gates or base_gates
    if not all(("ESS of" in g) or ("R-hat of" in g) for g in failing_gates):
        return ()
    failing_is_candidate = bool(cand_gates)
    draws = candidate if failing_is_candidate else baseline
    passing = summaries[1] if failing_is_candidate else summaries[0]
    return tuple(gross_check(n, draws[n], passing[n], failing_is_candidate, rule.k) for n in names)


#: Above this R-hat, chains sit in different modes; longer chains rarely bring them together.
RHAT_CURABLE_MAX = 1.1


def curable_by_more_draws(failures: list[str], max_rhat: float = 1.0) -> bool:
    """True when every failed gate is an ESS shortfall or a mild R-hat excess (at most
    :data:`RHAT_CURABLE_MAX` over all parameters), which longer chains can cure.
    Divergences, and chains stuck in separate modes, are not cured that way."""
    return (bool(failures) and all(("ESS of" in f) or ("R-hat of" in f) for f in failures)
            and max_rhat <= RHAT_CURABLE_MAX)


def sides_needing_draws(result: "ScopeComparison", rule: Rule) -> tuple[bool, bool]:
    """(candidate, baseline): which fit has to run longer for an undecided scope.

    A fit that failed a gate does. Otherwise, for each parameter left inconclusive, look
    at the interval that is undecided: for D the fit with the larger MCSE of the mean
    (same units on both sides), for R the one with the larger relative MCSE of the SD;
    both on a tie. If nothing points at either side, both do.
    """
    if result.candidate_gates or result.baseline_gates:
        return bool(result.candidate_gates), bool(result.baseline_gates)
    cand = base = False
    for c in result.comparisons:
        if c.verdict != INCONCLUSIVE:
            continue
        a, b = c.candidate, c.baseline
        rel_a = a.mcse_sd / a.sd if a.sd > 0 else math.inf
        rel_b = b.mcse_sd / b.sd if b.sd > 0 else math.inf
        if not _finite(a.mcse_mean, b.mcse_mean, rel_a, rel_b, *c.d_interval, *c.r_interval):
            return True, True
        d_state, r_state = interval_states(c.d_interval, c.r_interval, rule)
        if d_state == "open":
            cand |= a.mcse_mean >= b.mcse_mean
            base |= b.mcse_mean >= a.mcse_mean
        if r_state == "open":
            cand |= rel_a >= rel_b
            base |= rel_b >= rel_a
    return (cand, base) if (cand or base) else (True, True)


def max_rhat(result: "ScopeComparison") -> float:
    """Largest R-hat of either fit over the compared parameters (NaN counts as infinite)."""
    values = [s.rhat for c in result.comparisons for s in (c.candidate, c.baseline)]
    return max((v if math.isfinite(v) else math.inf for v in values), default=1.0)


@dataclass(frozen=True)
class ScopeComparison:
    """Candidate vs baseline on one scope: gates first, then the rule per parameter."""

    verdict: str
    reason: str
    candidate_gates: tuple[str, ...]
    baseline_gates: tuple[str, ...]
    comparisons: tuple[Comparison, ...]
    hints: tuple[str, ...] = field(default=())
    # chain-by-chain checks of the fit that failed its gates (empty when none was made)
    gross: tuple[GrossCheck, ...] = field(default=())

    @property
    def gates_passed(self) -> bool:
        return not self.candidate_gates and not self.baseline_gates

    def to_dict(self) -> dict:
        return asdict(self)


def compare_draws(
    candidate: dict[str, np.ndarray],
    baseline: dict[str, np.ndarray],
    names: list[str],
    rule: Rule,
    *,
    candidate_divergences: int = 0,
    baseline_divergences: int = 0,
    labels: tuple[str, str] = ("candidate", "baseline"),
) -> ScopeComparison:
    """Compare two fits on ``names`` (scalar names present in both draw dicts)."""
    cand = {n: summarize(candidate[n]) for n in names}
    base = {n: summarize(baseline[n]) for n in names}
    cand_gates = tuple(gate_failures(cand, candidate_divergences, rule))
    base_gates = tuple(gate_failures(base, baseline_divergences, rule))
    comparisons = tuple(compare_summaries(n, cand[n], base[n], rule) for n in names)
    gross = (gross_checks(candidate, baseline, (cand, base), (cand_gates, base_gates), names, rule)
             if rule.gross_difference else ())
    fired = tuple(r for r in (g.fires(rule) for g in gross) if r)
    verdict, reason = scope_verdict(cand_gates, base_gates, comparisons, labels, gross=fired)
    hints = scope_hints(comparisons)
    return ScopeComparison(verdict, reason, cand_gates, base_gates, comparisons, hints, gross)


def scope_verdict(cand_gates, base_gates, comparisons, labels=("candidate", "baseline"),
                  gross: tuple[str, ...] = ()) -> tuple[str, str]:
    """Verdict and reason for one scope. A failed gate makes it inconclusive, never
    disagree, unless ``gross`` names parameters on which the failing fit's every chain
    grossly differs from the other fit (:meth:`GrossCheck.fires`): then it is disagree,
    with the gate failure in the reason."""
    if cand_gates or base_gates:
        parts = [f"{lab} failed its gates: {'; '.join(g[:3])}{' …' if len(g) > 3 else ''}"
                 for lab, g in zip(labels, (cand_gates, base_gates)) if g]
        if gross:
            return DISAGREE, (f"gross difference despite failed gates: {'; '.join(gross[:3])}"
                              f"{' …' if len(gross) > 3 else ''} ({' / '.join(parts)})")
        return INCONCLUSIVE, " / ".join(parts)
    bad = [c.parameter for c in comparisons if c.verdict == DISAGREE]
    if bad:
        return DISAGREE, f"disagree on {', '.join(bad)}"
    open_ = [c.parameter for c in comparisons if c.verdict == INCONCLUSIVE]
    if open_:
        return INCONCLUSIVE, f"intervals too wide to decide on {', '.join(open_)}"
    return AGREE, f"all {len(comparisons)} parameters agree"


def pair_verdict(scope_verdicts: dict[str, str]) -> str:
    """agree if every scope agrees; disagree if any scope disagrees; else inconclusive.

    A scope only reaches ``disagree`` when its gates passed, or when one fit failed them
    but every chain of it grossly differs from the other fit (see :func:`scope_verdict`).
    """
    values = list(scope_verdicts.values())
    if not values:
        return INCONCLUSIVE
    if ERROR in values:
        return ERROR
    if DISAGREE in values:
        return DISAGREE
    if all(v == AGREE for v in values):
        return AGREE
    return INCONCLUSIVE


def _contains(interval, x: float) -> bool:
    lo, hi = interval
    return _finite(lo, hi) and lo <= x <= hi


def parameter_hints(c: Summary, b: Summary, r_interval) -> tuple[str, ...]:
    """Name the usual translation slips that fit a disagreeing parameter."""
    hints = []
    if _contains(r_interval, math.sqrt(2)) or _contains(r_interval, 1 / math.sqrt(2)):
        hints.append("SD ratio ≈ √2 or 1/√2: a variance used where an SD was meant (or the reverse)?")
    if (c.mean * b.mean < 0 and abs(c.mean) > 0.5 * c.sd and abs(b.mean) > 0.5 * b.sd
            and abs(abs(c.mean) - abs(b.mean)) < 0.5 * max(c.sd, b.sd)):
        hints.append("means of opposite sign: a sign flipped?")
    for sym, pos, who in ((c, b, "candidate"), (b, c, "baseline")):
        if pos.frac_positive > 0.999 and 0.2 < sym.frac_positive < 0.8 and abs(sym.mean) < 0.3 * sym.sd:
            hints.append(f"{who} is symmetric about 0 where the other is positive: "
                         "a full distribution where a half one was meant?")
    return tuple(hints)


def scope_hints(comparisons) -> tuple[str, ...]:
    """Hints across parameters: a constant scale factor points at units or parameterisation."""
    bad = [c for c in comparisons if c.verdict == DISAGREE and c.baseline.mean != 0]
    ratios = [c.candidate.mean / c.baseline.mean for c in bad]
    if len(ratios) >= 2 and all(x > 0 for x in ratios):
        spread = np.std(np.log(ratios))
        factor = float(np.exp(np.mean(np.log(ratios))))
        if spread < 0.05 and abs(factor - 1) > 0.1:
            return (f"means differ by a constant factor ≈ {factor:.3g} across "
                    f"{', '.join(c.parameter for c in bad)}: units or parameterisation "
                    "(e.g. gamma scale vs rate)?",)
    return ()


def abs_d_distribution(values: list[float]) -> dict:
    """Batch figure of SPEC §4: median, 95th percentile, maximum and count above 1 of |d|."""
    x = np.abs(np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float))
    if x.size == 0:
        return {"count": 0, "median": None, "p95": None, "max": None, "above_1": 0}
    return {
        "count": int(x.size),
        "median": float(np.median(x)),
        "p95": float(np.percentile(x, 95)),
        "max": float(x.max()),
        "above_1": int((x > 1).sum()),
    }


def batch_summary(audits: list[dict]) -> dict:
    """SPEC §4 batch report from audit evidence dicts (``verdict`` and ``scopes``).

    Counts posteriors by pair verdict, scope comparisons separately, and the |d|
    distribution over every compared parameter of every scope.
    """
    posteriors = {AGREE: 0, INCONCLUSIVE: 0, DISAGREE: 0, ERROR: 0}
    scopes = {AGREE: 0, INCONCLUSIVE: 0, DISAGREE: 0, ERROR: 0}
    ds: list[float] = []
    for audit in audits:
        posteriors[audit.get("verdict", ERROR)] = posteriors.get(audit.get("verdict", ERROR), 0) + 1
        for scope in (audit.get("scopes") or {}).values():
            scopes[scope.get("verdict", ERROR)] = scopes.get(scope.get("verdict", ERROR), 0) + 1
            for row in scope.get("comparisons", []):
                ds.append(row.get("d"))
    return {"posteriors": posteriors, "scopes": scopes, "abs_d": abs_d_distribution(ds),
            "total": len(audits)}
