"""Planning the next look of an undecided scope (pure: NumPy, ArviZ, workers.compare).

Two questions, asked after a look that ended ``inconclusive``:

* **Why is a fit failing its gates?** :func:`diagnose` tells *slow mixing* (chains
  overlap, or each chain has too few effective draws to say they do not) from
  *separated modes* (chain means lie many within-chain MCSEs apart while every chain
  on its own has a useful ESS). More draws cure the first; the second is a property of
  the sampler on this posterior, so the scope stops.
* **How many draws would decide it?** :func:`project` asks, per side, for the factor by
  which its draws must grow so that (a) every gate passes with a margin: bulk and tail
  ESS scale with the draws, and R-hat − 1 is taken to fall as 1/draws; and (b) once
  both fits pass their gates (before, d and r are not to be trusted), every
  undecided interval shrinks (MCSE ∝ 1/√draws) past the boundary it straddles: D
  inside [−δ, δ] if |d| < δ, else wholly outside; likewise log R against the band.
  When both sides grow, an interval's squared error budget is split between them at
  the least fitting time (:func:`split`: the side with the larger error or the cheaper
  draws takes more of the growth; before, each got half, which asked the larger-error
  side for up to twice the draws it needed). A side that is not asked to grow is grown
  too when its own error takes more than half of the budget (growing the other alone
  would cost without bound as that error nears the budget) or, with each side's refit
  cost known (the pipeline passes the work it counts, not seconds it times, so that
  the same seeds give the same plan), when growing both costs less than growing
  the other alone: a cheap fit with a small error relieves a dear one. Costs weigh only
  where both fits pass their gates: while one fails, its MCSE is not to be trusted and
  each side is given half of the allowance, as before (the whole corpus with the split
  applied there too: gp_pois_regr's full scope took 3 looks and 676 s instead of 2 and
  243 s, its LazyPPL side's gate-curing draws having lost the interval's slack).
  A side that grows anyway for another reason (PyMC, when its own check against
  posteriordb's reference is undecided) is a *floor*: the interval is planned from the
  error that side will have at the floor's draws, so the other side is not grown to
  relieve an error that the floor removes (before, the floor was applied after the
  split, as a maximum).

  Each undecided interval is planned twice, and the cheaper plan (in fitting cost)
  is asked of both sides: *at the estimate* (d and r taken as they are now, half-width
  aimed at their distance to the boundary over :data:`MARGIN`), and *at the favourable
  point* (d = 0 and r = 1, or the end of the interval nearest to them; half-width aimed
  at :data:`FAVOURABLE_SHARE` of that point's distance to the nearer boundary, so that
  a new estimate which moves by
  up to k·(1 − share)/share of its own MCSEs, 4 at k = 4 and share 1/2, still decides).
  Why: the calibration study (issue 14)
  found correct hierarchical pairs stopped because an estimate that sat by chance
  near a boundary (r = 1.19 on tau, 2.4 MCSEs from 1, the band's edge at 1.25) made
  the plan at the estimate ask 99× the draws, over the cap; planned at r = 1 it needs
  under 3×, and the next look re-estimates r anyway. A d or r sitting on a boundary with
  no favourable point left (the interval does not reach back into the band) still
  needs infinitely many draws: the projection says so.

  While a fit fails its gates its d and r are not trusted, so the intervals are planned
  at d = 0 and r = 1 only (unclipped), as a floor: the draws without which even an
  exactly agreeing pair could not decide. Without it the looks chased the gates in
  small steps and ran out of looks with the intervals still too wide (3 of 11
  inconclusive hier6 seeds). A failing fit's MCSE of the mean is taken at the other
  side's SD (an agreeing pair's SDs are equal; a poorly mixed fit's own SD is off).

  Heavy tails: once every R-hat passes, an open D or R also asks for the draws
  with which that parameter's mean or SD is a reliable estimate at all under its tail
  (:func:`tail_khat` of both fits' draws pooled, :func:`tail_draws`); a parameter without
  a variance (k̂ ≥ 0.5) has an R no number of draws decides, and the scope stops
  (docs/RULE.md, "Heavy tails").

The draw cap per look, asking for the cap when a projection exceeds it by little, at
most 4× growth for a PyMC fit that needed a divergence retry, and the last look a budget
pays for when the planned one is over it but the minimal projection (``minimal=True``:
no margins) fits, and the stop when a look so bounded falls short of the minimal
projection's draws and those cost more than the time left, are the pipeline's
(``workers.pipeline._plan_look``).

Units: factors multiply the draws per chain; ESS and MCSE are ArviZ's (SPEC §4).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import arviz as az
import numpy as np

from workers import compare

#: Asked-for draws aim past every threshold by this factor (ESS gates, R-hat excess,
#: interval half-widths), so that the next look decides despite estimation noise.
MARGIN = 1.25
#: A chain with at least this bulk ESS has a mean whose MCSE can be trusted.
USEFUL_CHAIN_ESS = 50.0
#: Chain means further apart than this many combined within-chain MCSEs are separate modes.
SEPARATION_Z = 6.0
#: Smallest growth worth a look.
MIN_FACTOR = 1.25
#: Planned at the favourable point (d = 0, r = 1), an interval is aimed at this share of
#: that point's distance to the nearer boundary: a new estimate that moves by up to
#: k·(1 − share)/share of its new MCSEs (4 at k = 4) still decides. Draws scale as
#: 1/share²; 1/2 was chosen so that several open parameters decide at one look.
FAVOURABLE_SHARE = 0.5

SLOW_MIXING, SEPARATED_MODES, CONVERGED = "slow_mixing", "separated_modes", "converged"


@dataclass(frozen=True)
class Diagnosis:
    """Mixing of one fit over the compared parameters.

    ``separation`` is the largest distance between two chain means of one parameter in
    combined within-chain MCSEs, ``parameter`` the parameter it was found on, and
    ``min_chain_ess`` the smallest single-chain bulk ESS of that parameter."""

    kind: str
    parameter: str | None
    separation: float
    min_chain_ess: float

    def to_dict(self) -> dict:
        return asdict(self)


def chain_separation(x: np.ndarray) -> tuple[float, float]:
    """(largest pairwise chain-mean distance in combined within-chain MCSEs, smallest
    single-chain bulk ESS) of a (chains, draws) array. NaN when it cannot be computed."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 2 or x.shape[1] < 8 or not np.all(np.isfinite(x)):
        return math.nan, math.nan
    means = x.mean(axis=1)
    mcses = np.array([float(az.mcse(c[None, :], method="mean")) for c in x])
    esses = np.array([float(az.ess(c[None, :], method="bulk")) for c in x])
    worst = 0.0
    for i in range(len(means)):
        for j in range(i + 1, len(means)):
            scale = math.hypot(mcses[i], mcses[j])
            gap = abs(means[i] - means[j])
            z = gap / scale if scale > 0 else (0.0 if gap == 0 else math.inf)
            worst = max(worst, z)
    return float(worst), float(esses.min())


def diagnose(draws: dict[str, np.ndarray], names: list[str], gate_failures: list[str]) -> Diagnosis:
    """Separated modes if some compared parameter has every chain at a useful ESS and two
    chain means at least :data:`SEPARATION_Z` MCSEs apart; otherwise slow mixing if the
    fit fails a gate, else converged. Constant parameters are skipped."""
    for name in names:
        x = np.asarray(draws[name], dtype=np.float64)
        if x.ndim != 2 or np.ptp(x) == 0:
            continue
        z, ess = chain_separation(x)
        if math.isfinite(z) and z >= SEPARATION_Z and ess >= USEFUL_CHAIN_ESS:
            return Diagnosis(SEPARATED_MODES, name, z, ess)
    return Diagnosis(SLOW_MIXING if gate_failures else CONVERGED, None, math.nan, math.nan)


def tail_khat(x: np.ndarray) -> float:
    """Pareto k̂ of the heavier tail of a parameter's draws (all chains, and the fits
    given, pooled): ArviZ's generalized-Pareto fit of PSIS (``az.psislw``) to the
    largest of the distinct |x − median|, given as log-weights. k̂ estimates 1/ν where
    the moments below ν exist: ≥ 0.25 no fourth moment, ≥ 0.5 no variance, ≥ 1 no
    mean. NaN for fewer than 100 distinct deviations (a constant or few-valued
    parameter has no tail to fit)."""
    x = np.asarray(x, dtype=np.float64).ravel()
    if not np.all(np.isfinite(x)):
        return math.nan
    # distinct deviations only: a Metropolis chain repeats its state after each
    # rejection, and ties in the tail bias the fit (a Cauchy sample with every draw
    # repeated 10 times: k̂ 0.40 instead of 0.95); a discrete parameter has few values
    dev = np.unique(np.abs(x - np.median(x)))
    dev = dev[dev > 0]
    if dev.size < 100:
        return math.nan
    _, k = az.psislw(np.log(dev))
    k = float(np.asarray(k))
    return k if math.isfinite(k) else math.nan


def tail_draws(khat: float, power: int) -> float:
    """Draws with which a mean of x**``power`` (1: the mean, 2: the second moment, hence
    the SD) is a reliable estimate when x's tail has Pareto k̂ ``khat``: the S with
    power·k̂ < 1 − 1/log10(S) (the sample-size threshold of Vehtari et al., "Pareto
    smoothed importance sampling", JMLR 2024; x**power has tail index power·k̂).
    0 when no k̂ could be fitted or the tail is light (k̂ ≤ 0); ``inf`` at power·k̂ ≥ 1
    (that moment does not exist: no number of draws estimates it). Examples: the SD
    needs 316 draws at k̂ 0.3, 7,017 at 0.37, 35,112 at 0.39 and 1.78 million at 0.42."""
    kk = power * khat
    if not (math.isfinite(kk) and kk > 0):
        return 0.0
    if kk >= 1:
        return math.inf
    return 10.0 ** (1.0 / (1.0 - kk))


@dataclass(frozen=True)
class Projection:
    """Factor (≥ 1, ``inf`` if no number of draws can do it) by which one side's draws
    must grow, and why (one short line per binding requirement, largest first)."""

    factor: float
    reasons: tuple[str, ...]

    def to_dict(self) -> dict:
        return {"factor": self.factor if math.isfinite(self.factor) else None,
                "reasons": list(self.reasons)}


def _gate_factor(s: compare.Summary, rule: compare.Rule,
                 margin: float = MARGIN) -> list[tuple[float, str]]:
    out = []
    for label, ess, need in (("bulk ESS", s.ess_bulk, rule.ess_bulk_min),
                             ("tail ESS", s.ess_tail, rule.ess_tail_min)):
        target = margin * need
        if not (math.isfinite(ess) and ess > 0):
            out.append((math.inf, f"{label} not estimable"))
        elif ess < target:
            out.append((target / ess, f"{label} {ess:.0f} -> {target:.0f}"))
    if not math.isfinite(s.rhat):
        out.append((math.inf, "R-hat not estimable"))
    elif s.rhat > rule.rhat_max:
        out.append((margin * (s.rhat - 1) / (rule.rhat_max - 1),
                    f"R-hat {s.rhat:.3f} -> {1 + (rule.rhat_max - 1) / margin:.4f}"))
    return out


def split(terms: tuple[float, float], allowed: float, costs: tuple[float, float] = (1.0, 1.0),
          caps: tuple[float, float] = (math.inf, math.inf)) -> tuple[float, float]:
    """Growth factors (f₀, f₁) of two sides that both refit, so that an interval whose
    half-width is k·√(a₀² + a₁²) (``terms`` = the error terms a, each shrinking as
    1/√f) comes down to k·``allowed``, at the least fitting time c₀f₀ + c₁f₁.

    ``costs``: what a refit of each side costs at its present draws, in any common unit
    (the pipeline counts sampler work, :func:`workers.pipeline._refit_work`; the two fits
    of a look share the cores, so their costs add). Minimising Σ cᵢfᵢ subject to
    Σ aᵢ²/fᵢ = allowed² gives fᵢ = aᵢ·Σⱼ aⱼ√cⱼ / (allowed²·√cᵢ): the side with the larger
    error, or the cheaper draws, takes more of the growth. A side whose share falls
    below 1 keeps its draws, and one above its cap (``caps``, in factors) is held at
    it; the other then takes what is left of the allowance (``inf`` if nothing is).
    Costs that are not positive numbers count as equal."""
    a = [float(t) for t in terms]
    if not (all(math.isfinite(t) and t >= 0 for t in a) and allowed > 0):
        return math.inf, math.inf
    if not all(math.isfinite(c) and c > 0 for c in costs):
        costs = (1.0, 1.0)
    room = allowed * allowed
    roots = [math.sqrt(c) for c in costs]
    total = a[0] * roots[0] + a[1] * roots[1]
    f = [a[i] * total / (room * roots[i]) if a[i] > 0 else 1.0 for i in (0, 1)]

    def hold(i: int, at: float) -> None:
        # side i at factor ``at``; the other takes what is left of the allowance
        f[i] = at
        rest = room - a[i] * a[i] / at
        f[1 - i] = max(1.0, a[1 - i] ** 2 / rest) if rest > 0 else math.inf

    below = [i for i in (0, 1) if f[i] < 1.0]
    if below:
        hold(below[0], 1.0)
    above = [i for i in (0, 1) if f[i] > caps[i]]
    if above:
        hold(above[0], caps[above[0]])
    return f[0], f[1]


def _interval_factor(own: float, other: float, allowed: float) -> float:
    """Factor for one side's error term ``own`` (an MCSE in the interval's units) so that
    √(own'² + other²) ≤ allowed, the other side's term staying as it is."""
    if not (math.isfinite(own) and math.isfinite(other) and allowed > 0):
        return math.inf
    if other * other > allowed * allowed / 2:
        # the fixed side takes more than its half: growing this side alone would cost
        # without bound as the other's error nears the allowance (calibration seed
        # 20261204 of hier6: 4,429x); infinite here makes project() grow both
        return math.inf
    return max(1.0, own * own / (allowed * allowed - other * other))


def _halves(terms: tuple[float, float], allowed: float) -> tuple[float, float]:
    """Factors of two growing sides each given half of the squared allowance (the rule
    while a fit fails its gates, or without costs)."""
    f0, f1 = (max(1.0, t * t / (allowed * allowed / 2)) if math.isfinite(t) and allowed > 0
              else math.inf for t in terms)
    return f0, f1


def _refit_cost(pair: tuple[float, float], costs: tuple[float, float],
                grow: tuple[bool, bool]) -> float:
    """Fitting cost of a look asking factors ``pair``: a side refits when it grows
    (factor above 1, or asked to grow anyway); one that keeps its fit costs nothing."""
    return sum(c * f for c, f, g in zip(costs, pair, grow) if g or f > 1)


def _pair(terms: tuple[float, float], allowed: float, grow: tuple[bool, bool],
          costs: tuple[float, float] | None, caps: tuple[float, float]) -> tuple[float, float]:
    """Factors of both sides (1 for one that keeps its fit) that bring an interval with
    error terms ``terms`` within ``allowed``. Both growing: :func:`split` by ``costs``,
    or equal halves without them (:func:`_halves`). One growing:
    it alone, the other's term fixed; with ``costs`` known, growing the other side too
    (:func:`split`) when that costs less (a cheap side relieves a dear
    one: hmm_drive_1's PyMC refit costs ~15x its LazyPPL refit)."""
    if grow[0] and grow[1]:
        return _halves(terms, allowed) if costs is None else split(terms, allowed, costs, caps)
    s = 0 if grow[0] else 1
    alone = [1.0, 1.0]
    alone[s] = _interval_factor(terms[s], terms[1 - s], allowed)
    if costs is not None:
        both = split(terms, allowed, costs, caps)
        if both[1 - s] > 1 and _refit_cost(both, costs, grow) < _refit_cost(tuple(alone), costs, grow):
            return both
    return alone[0], alone[1]


def _clip(x: float, low: float, high: float) -> float:
    """x moved into [low, high] (the interval's point nearest to x)."""
    return min(max(x, low), high)


def project(result: compare.ScopeComparison, rule: compare.Rule,
            grow: tuple[bool, bool], minimal: bool = False,
            costs: tuple[float, float] | None = None,
            caps: tuple[float, float] = (math.inf, math.inf),
            floors: tuple[float, float] = (1.0, 1.0),
            tails: tuple[dict[str, float] | None, dict[str, float] | None] = (None, None),
            ) -> tuple[Projection, Projection]:
    """(candidate, baseline) projections for the sides ``grow`` marks (the other gets
    factor 1, unless its own error alone keeps an interval undecided, or, with ``costs``
    known and both fits passing their gates, growing it too is cheaper: then both grow).
    Gates come from each side's own summaries; intervals from the undecided comparisons
    (``compare.interval_states`` says which end is open).

    ``minimal``: the fewest draws with which the scope could decide at all, without the
    margins (:data:`MARGIN` 1, :data:`FAVOURABLE_SHARE` 1: the gates just met, an
    interval just narrow enough if the new estimate lands exactly at the favourable
    point or where it is now).

    ``costs`` and ``caps`` (candidate, baseline: cost of a refit at the present
    draws, largest factor a look may ask) shape how an interval's error allowance is
    split when both sides grow (:func:`split`; equal halves when ``None``), and whether a
    side not asked to grow is grown too (:func:`_pair`; only with ``costs``). Costs are
    used only while both fits pass their gates (module docstring). Of an interval's plans
    (at the favourable point, at the estimate) the one with the least fitting cost is
    asked of both sides.

    ``floors``: factors a side grows by whatever this comparison asks (PyMC's growth
    for its own undecided check against a reference); a side with a floor above 1 must
    be marked in ``grow``. Its error terms are taken at the floor's draws, so the other
    side is not grown to relieve an error the floor removes anyway: the allowance is
    planned from the floor (terms ÷ √floor, costs × floor, caps ÷ floor) and the
    factors multiplied back.

    ``tails`` (candidate, baseline): each parameter's :func:`tail_khat` for the draws of
    that side (``None``: a side whose draws cannot grow, or not measured). Where every
    R-hat passes (both fits pass their gates, or one is short only of ESS), each D the
    look plans for asks each side for the draws that make its mean a reliable estimate
    under that tail, and each R for those that make its SD one (:func:`tail_draws`; with
    the margin, total draws over all chains): ``inf`` (a parameter without a variance,
    k̂ ≥ 0.5, whose R is planned for) means no number of draws decides it, and the scope
    stops (docs/RULE.md, "Heavy tails")."""
    floors = tuple(f if math.isfinite(f) and f > 1 else 1.0 for f in floors)
    floors = tuple(min(f, cap) for f, cap in zip(floors, caps))
    if any(f > 1 and not g for f, g in zip(floors, grow)):
        raise ValueError(f"a side with a floor must grow: floors {floors}, grow {grow}")
    margin, share = (1.0, 1.0) if minimal else (MARGIN, FAVOURABLE_SHARE)
    needs: tuple[list, list] = ([], [])
    both = grow[0] and grow[1]
    for side in (0, 1):
        if not grow[side]:
            continue
        for c in result.comparisons:
            s = c.candidate if side == 0 else c.baseline
            needs[side].extend((f, f"{c.parameter}: {why}") for f, why in _gate_factor(s, rule, margin))
    # A fit that failed its gates has unreliable d and r (the calibration study found r = 1.44
    # at bulk ESS 65 on a correct pair, which projected 139x the draws, over the cap, and
    # stopped the audit at its first look): until both pass, the intervals are planned at
    # the favourable point only (d = 0, r = 1), as a floor; once both pass, at the cheaper
    # of the estimate and the favourable point (module docstring).
    trusted = result.gates_passed
    # the tails' asks where every chain agrees with the others (R-hat passes): a fit short
    # only of ESS has no transient's far draws to mistake for a tail
    mixed = trusted or compare.max_rhat(result) <= rule.rhat_max

    def planned(state: str) -> bool:
        """Whether an interval in ``state`` is planned for: an undecided one, or, while a
        fit fails its gates (its d and r not trusted), any not already inside."""
        return state == "open" or (not trusted and state != "in")
    # the split by cost only where both fits' errors can be trusted: while a fit fails
    # its gates its MCSE is not, and the draws that cure its gates were planned with
    # the interval's equal halves as slack (whole corpus at 340641e: gp_pois_regr's full
    # scope, LazyPPL failing its gates, took 3 looks and 676 s instead of 2 and 243 s)
    weighed = costs if trusted else None
    # a plan from the floors' draws: each draw there costs floor x, and the caps shrink
    floor_costs = None if weighed is None else tuple(c * f for c, f in zip(weighed, floors))
    floor_caps = tuple(cap / f for cap, f in zip(caps, floors))
    lo, hi = rule.sd_ratio_band
    log_lo, log_hi = math.log(lo), math.log(hi)

    def plan(terms: tuple[float, float], options: list[tuple[float, str]]) -> None:
        """Ask both sides for the factors of the cheapest of an interval's plans
        (``options``: the allowed error term and the reason of each); each side's reason
        names what the other plans would have asked of it."""
        # an untrusted fit's floor is advisory: one it cannot compute (MCSE not finite)
        # leaves the gates to decide the growth
        if not (trusted or all(math.isfinite(t) for t in terms)):
            return
        # planned from the floors' draws, then multiplied back
        at_floor = tuple(t / math.sqrt(f) for t, f in zip(terms, floors))
        pairs = [(tuple(g * f for g, f in zip(_pair(at_floor, allowed, grow, floor_costs,
                                                     floor_caps), floors)), why)
                 for allowed, why in options]
        best = min(range(len(pairs)), key=lambda n: _refit_cost(pairs[n][0], weighed or (1.0, 1.0), grow))
        chosen, why = pairs[best]
        for side in (0, 1):
            if not (grow[side] or chosen[side] > 1):
                continue
            rest = "; ".join(f"{w.rsplit('(planned at ', 1)[-1].rstrip(')')} would need "
                             f"{'no finite number of draws' if not math.isfinite(f[side]) else f'{f[side]:.3g}x'}"
                             for n, (f, w) in enumerate(pairs) if n != best)
            needs[side].append((chosen[side], f"{why[:-1]}; {rest})" if rest else why))

    for c in result.comparisons:
        if trusted and c.verdict != compare.INCONCLUSIVE:
            continue
        d_state, r_state = compare.interval_states(c.d_interval, c.r_interval, rule)
        a, b = c.candidate, c.baseline
        if mixed:
            for power, state, what in ((1, d_state, "mean"), (2, r_state, "SD")):
                for side, summary in ((0, a), (1, b)):
                    k = (tails[side] or {}).get(c.parameter)
                    have = summary.chains * summary.draws
                    want = tail_draws(k, power) * margin if k is not None else 0.0
                    if planned(state) and want > have:
                        needs[side].append((want / have, (
                            f"{c.parameter}: tail k-hat {k:.2f}: its {what} "
                            + (f"needs {math.ceil(want)} draws in all, has {have}"
                               if math.isfinite(want) else
                               f"is not estimable (k-hat >= {1 / power:g}: the "
                               f"{'mean' if power == 1 else 'variance'} does not exist)"))))
        if planned(d_state) and b.sd > 0:
            # half-widths in units of the baseline SD
            fav = 0.0 if not trusted else _clip(0.0, *c.d_interval)
            plans = [("favourable", fav, share * (rule.delta - abs(fav)))]
            if trusted:
                plans.append(("estimate", c.d, abs(rule.delta - abs(c.d)) / margin))
            terms = (a.mcse_mean, b.mcse_mean)
            width = rule.k * math.hypot(*terms) / b.sd
            if not trusted and a.sd > 0:
                # the floor is for an agreeing pair, whose SDs are equal: each side's
                # MCSE of the mean relative to its own SD (a poorly mixed fit's SD is
                # off, e.g. 1.44x the baseline's at bulk ESS 65)
                terms = (a.mcse_mean / a.sd * b.sd, b.mcse_mean)
            plan(terms, [(h * b.sd / rule.k,
                          f"{c.parameter}: D {c.d:+.3f} +- {width:.3f} -> +- {h:.3f} "
                          f"(planned at d = {at:+.3f}, {how})") for how, at, h in plans])
        if planned(r_state) and a.sd > 0 and b.sd > 0 and c.r > 0:
            log_r = math.log(c.r)
            log_ends = tuple(math.log(x) if x > 0 else -math.inf for x in c.r_interval)
            fav = 0.0 if not trusted else _clip(0.0, *log_ends)
            plans = [("favourable", fav, share * min(fav - log_lo, log_hi - fav))]
            if trusted:
                plans.append(("estimate", log_r,
                              min(abs(log_r - log_lo), abs(log_r - log_hi)) / margin))
            plan((a.mcse_sd / a.sd, b.mcse_sd / b.sd),
                 [(h / rule.k, f"{c.parameter}: R {c.r:.3f} needs log half-width {h:.3f} "
                               f"(planned at r = {math.exp(at):.3f}, {how})") for how, at, h in plans])

    def fold(items: list[tuple[float, str]], grows: bool) -> Projection:
        if not grows:
            return Projection(1.0, ())
        if not items:
            return Projection(MIN_FACTOR, ("no requirement found; minimum growth",))
        items = sorted(items, key=lambda t: -t[0])
        top = items[0][0]
        binding = tuple(why for f, why in items if f >= top / 2)[:5]
        return Projection(max(MIN_FACTOR, top), binding)

    result_pair = fold(needs[0], grow[0] or bool(needs[0])), fold(needs[1], grow[1] or bool(needs[1]))
    if not both and any(g and not math.isfinite(p.factor) for g, p in zip(grow, result_pair)):
        # the side that is not growing already has more error than an undecided interval
        # allows: both must grow (if that is infinite too, d or r sits on a boundary)
        return project(result, rule, (True, True), minimal, costs, caps, floors, tails)
    return result_pair
