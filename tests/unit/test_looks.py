"""Planning the next look (workers.looks) on synthetic chains with known properties."""
import math

import numpy as np
import pytest

from workers import compare, looks

RULE = compare.Rule()


def ar1(rng, chains, n, rho, mean=0.0, sd=1.0):
    """(chains, n) stationary AR(1) draws with marginal N(mean, sd²) and lag-1 correlation rho."""
    x = np.empty((chains, n))
    x[:, 0] = rng.standard_normal(chains)
    noise = rng.standard_normal((chains, n)) * math.sqrt(1 - rho * rho)
    for t in range(1, n):
        x[:, t] = rho * x[:, t - 1] + noise[:, t]
    return mean + sd * x


def gates(draws):
    return compare.gate_failures({"x": compare.summarize(draws)}, 0, RULE)


def test_overlapping_slow_chains_are_slow_mixing():
    x = ar1(np.random.default_rng(1), 4, 1000, 0.995)
    assert gates(x)  # fails on ESS (and R-hat): the look question arises
    d = looks.diagnose({"x": x}, ["x"], gates(x))
    assert d.kind == looks.SLOW_MIXING


def test_chains_in_two_places_with_good_ess_are_separated_modes():
    rng = np.random.default_rng(2)
    x = np.concatenate([ar1(rng, 2, 1000, 0.5, mean=0.0), ar1(rng, 2, 1000, 0.5, mean=3.0)])
    d = looks.diagnose({"x": x}, ["x"], gates(x))
    assert d.kind == looks.SEPARATED_MODES and d.parameter == "x"
    assert d.separation > 20 and d.min_chain_ess > 200


def test_apart_but_each_chain_too_slow_to_tell_is_slow_mixing():
    # chain means differ (R-hat high) but every chain has ESS < USEFUL_CHAIN_ESS, so
    # their MCSEs cannot be trusted: extend, do not stop
    x = ar1(np.random.default_rng(3), 4, 1000, 0.999)
    assert compare.summarize(x).rhat > 1.1
    d = looks.diagnose({"x": x}, ["x"], gates(x))
    assert d.kind == looks.SLOW_MIXING


def test_iid_chains_are_converged():
    x = np.random.default_rng(4).standard_normal((4, 1000))
    assert looks.diagnose({"x": x}, ["x"], gates(x)).kind == looks.CONVERGED


def scope(cand, base):
    return compare.compare_draws({"x": cand}, {"x": base}, ["x"], RULE)


def test_projected_draws_decide_an_undecided_mean():
    """An estimate near the middle of the band: planned at the estimate."""
    rng = np.random.default_rng(5)
    base = rng.standard_normal((4, 20_000))          # precise baseline
    cand = 0.05 + rng.standard_normal((4, 125))        # d ≈ 0.05 ± 0.18: D straddles δ
    first = scope(cand, base)
    assert first.verdict == compare.INCONCLUSIVE and first.gates_passed
    c = first.comparisons[0]
    assert compare.interval_states(c.d_interval, c.r_interval, RULE)[0] == "open"
    assert abs(c.d) < RULE.delta / 2
    grow = compare.sides_needing_draws(first, RULE)
    assert grow == (True, False)
    p_cand, p_base = looks.project(first, RULE, grow)
    assert p_base.factor == 1.0 and p_cand.factor > looks.MIN_FACTOR
    assert any("D" in why and "estimate" in why.split(";")[0] for why in p_cand.reasons)
    # the projection is about right: with that many draws D's half-width is within the
    # margin of the distance to δ, with a quarter of them it is not (half-widths, not the
    # noisy d, so the check does not depend on luck)
    gap = RULE.delta - abs(c.d)

    def half_width(n):
        c = scope(0.05 + rng.standard_normal((4, n)), base).comparisons[0]
        return (c.d_interval[1] - c.d_interval[0]) / 2

    n = math.ceil(125 * p_cand.factor)
    assert half_width(n) <= gap / looks.MARGIN * 1.1
    assert half_width(n // 4) > gap


def summary(mean=0.0, sd=1.0, mcse_mean=0.01, mcse_sd=0.01, ess=4000.0, rhat=1.0):
    return compare.Summary(mean, sd, mcse_mean, mcse_sd, ess, ess, rhat, 4, 1000, 0.5)


def one(cand, base):
    c = compare.compare_summaries("x", cand, base, RULE)
    return c, compare.ScopeComparison(c.verdict, "", (), (), (c,))


def test_an_estimate_near_a_band_edge_by_chance_is_planned_at_r_1():
    """catches: the plan taken at a noisy estimate. Calibration seed 20261204 of hier6 (a
    correct pair), look 2, tau: r = 1.192 with relative MCSEs of the SD 0.067 (LazyPPL)
    and 0.029 (PyMC), R = [0.89, 1.60]; planned at r = 1.192 (0.047 from the band's edge
    in log) it asked 99.5x the LazyPPL draws, over the cap, and the audit stopped."""
    cand = summary(sd=1.192, mcse_sd=0.067 * 1.192)
    base = summary(sd=1.0, mcse_sd=0.029)
    c, result = one(cand, base)
    assert c.verdict == compare.INCONCLUSIVE and result.gates_passed
    assert c.r_interval[0] < 1 < c.r_interval[1]
    grow = compare.sides_needing_draws(result, RULE)
    assert grow == (True, False)
    p_cand, p_base = looks.project(result, RULE, grow)
    # planned at r = 1: log half-width FAVOURABLE_SHARE * log 1.25 for the combined error;
    # the baseline's error alone is more than that allows, so both grow and share it
    allowed = looks.FAVOURABLE_SHARE * math.log(1.25) / RULE.k
    assert 0.029 > allowed / math.sqrt(2)
    assert math.isclose(p_cand.factor, 0.067 ** 2 / (allowed ** 2 / 2), rel_tol=1e-9)
    assert math.isclose(p_base.factor, 0.029 ** 2 / (allowed ** 2 / 2), rel_tol=1e-9)
    assert p_cand.factor < 12 and p_base.factor < 3
    assert "planned at r = 1.000, favourable" in p_cand.reasons[0]
    # the plan at the estimate is recorded next to it: what the old policy asked (99.5x)
    at_estimate = 0.067 ** 2 / ((math.log(1.25 / 1.192) / looks.MARGIN / RULE.k) ** 2 / 2)
    assert 99 < at_estimate < 100
    assert f"{at_estimate:.3g}x" in p_cand.reasons[0]


def test_the_favourable_point_is_the_intervals_end_nearest_to_it():
    # D = [0.1, 0.3] does not reach 0: planned at d = 0.1 (half-width share * 0.1) or at
    # the estimate d = 0.2 (on the boundary: no finite number), the cheaper is 0.1
    cand = summary(mean=0.2, mcse_mean=0.025)
    c, result = one(cand, summary(mcse_mean=0.0))
    assert c.verdict == compare.INCONCLUSIVE
    assert math.isclose(c.d_interval[0], 0.1)
    p_cand, _ = looks.project(result, RULE, (True, False))
    allowed = looks.FAVOURABLE_SHARE * (RULE.delta - 0.1) / RULE.k
    assert math.isclose(p_cand.factor, 0.025 ** 2 / allowed ** 2, rel_tol=1e-9)
    assert "planned at d = +0.100, favourable" in p_cand.reasons[0]
    assert "no finite number of draws" in p_cand.reasons[0]


def test_projected_draws_pass_the_ess_gate_with_margin():
    rng = np.random.default_rng(6)
    base = rng.standard_normal((4, 20_000))
    cand = ar1(rng, 4, 1000, 0.95)                    # bulk ESS ≈ 100
    first = scope(cand, base)
    assert any("bulk ESS" in g for g in first.candidate_gates)
    p_cand, _ = looks.project(first, RULE, (True, False))
    ess = compare.summarize(cand).ess_bulk
    assert p_cand.factor >= looks.MARGIN * RULE.ess_bulk_min / ess
    grown = ar1(rng, 4, math.ceil(1000 * p_cand.factor), 0.95)
    assert compare.summarize(grown).ess_bulk >= RULE.ess_bulk_min


def test_an_interval_whose_favourable_end_is_on_the_boundary_is_planned_at_the_estimate():
    # D = [0.2, 0.3]: its end nearest to 0 sits on δ, so no number of draws decides it
    # there; at the estimate d = 0.25 the interval must shrink to +-0.05/MARGIN
    s = compare.Summary(0.25, 1.0, 0.0125, 0.005, 4000, 4000, 1.0, 4, 1000, 0.5)
    b = compare.Summary(0.0, 1.0, 0.0, 0.0, 4000, 4000, 1.0, 4, 1000, 0.5)
    c = compare.compare_summaries("x", s, b, RULE)
    assert c.verdict == compare.INCONCLUSIVE and math.isclose(c.d_interval[0], 0.2)
    result = compare.ScopeComparison(compare.INCONCLUSIVE, "", (), (), (c,))
    p_cand, _ = looks.project(result, RULE, (True, False))
    assert math.isclose(p_cand.factor, 0.0125 ** 2 / (0.05 / looks.MARGIN / RULE.k) ** 2, rel_tol=1e-9)
    assert "estimate; d = +0.200, favourable would need no finite number of draws" in p_cand.reasons[0]
    assert looks.Projection(math.inf, ()).to_dict()["factor"] is None


def test_both_sides_share_the_error_budget():
    s = compare.Summary(0.05, 1.0, 0.03, 0.01, 4000, 4000, 1.0, 4, 1000, 0.5)
    b = compare.Summary(0.0, 1.0, 0.03, 0.01, 4000, 4000, 1.0, 4, 1000, 0.5)
    c = compare.compare_summaries("x", s, b, RULE)
    result = compare.ScopeComparison(compare.INCONCLUSIVE, "", (), (), (c,))
    pc, pb = looks.project(result, RULE, (True, True))
    # each side's MCSE must fall to allowed/√2: allowed = (0.2 − 0.05)/1.25/4 = 0.03
    # (planned at the estimate; at d = 0 it would be 0.5·0.2/4 = 0.025, dearer)
    expected = 0.03 ** 2 / (0.03 ** 2 / 2)
    assert math.isclose(pc.factor, expected, rel_tol=1e-9) and math.isclose(pb.factor, expected, rel_tol=1e-9)


def test_a_side_too_noisy_for_the_interval_is_grown_too():
    # only the candidate was asked to grow, but the baseline's MCSE alone is wider than
    # the undecided D allows: the projection grows both instead of giving up
    s = compare.Summary(0.1, 1.0, 0.01, 0.01, 4000, 4000, 1.0, 4, 1000, 0.5)
    b = compare.Summary(0.0, 1.0, 0.03, 0.01, 4000, 4000, 1.0, 4, 1000, 0.5)
    c = compare.compare_summaries("x", s, b, RULE)
    assert c.verdict == compare.INCONCLUSIVE
    result = compare.ScopeComparison(compare.INCONCLUSIVE, "", (), (), (c,))
    pc, pb = looks.project(result, RULE, (True, False))
    assert math.isfinite(pc.factor) and math.isfinite(pb.factor) and pb.factor > 1


def test_while_a_gate_fails_the_intervals_are_planned_at_d_0_r_1_only():
    """catches: a poorly mixed fit's r (here ~1.5 at bulk ESS ~30) taken at face value,
    projecting a huge factor to shrink R past the band (calibration study: 139x, over the
    draw cap, stopped correct hierarchical audits at their first look)."""
    rng = np.random.default_rng(8)
    base = rng.standard_normal((4, 20_000))
    cand = 1.5 * ar1(rng, 4, 1000, 0.97)                   # slow, and wide by chance
    first = scope(cand, base)
    assert first.candidate_gates and first.verdict == compare.INCONCLUSIVE
    c = first.comparisons[0]
    assert compare.interval_states(c.d_interval, c.r_interval, RULE)[1] != "in"
    p_cand, _ = looks.project(first, RULE, (True, False))
    s = compare.summarize(cand)
    b = compare.summarize(base)
    gates_only = max(looks.MARGIN * RULE.ess_bulk_min / s.ess_bulk, looks.MARGIN * RULE.ess_tail_min / s.ess_tail,
                     looks.MARGIN * (s.rhat - 1) / (RULE.rhat_max - 1), looks.MIN_FACTOR)
    # the floor: D and R shrunk to half their room at d = 0, r = 1, the baseline fixed
    share = looks.FAVOURABLE_SHARE
    floor_d = (s.mcse_mean / s.sd * b.sd) ** 2 / ((share * RULE.delta * b.sd / RULE.k) ** 2 - b.mcse_mean ** 2)
    floor_r = (s.mcse_sd / s.sd) ** 2 / ((share * math.log(1.25) / RULE.k) ** 2 - (b.mcse_sd / b.sd) ** 2)
    assert math.isclose(p_cand.factor, max(gates_only, floor_d, floor_r), rel_tol=1e-9)
    assert not any("estimate" in why for why in p_cand.reasons)
    assert p_cand.factor < 100  # under the 100,000-draw cap (the old plan: 139x)


def test_a_failing_fit_is_asked_for_what_the_intervals_need_not_just_the_gates():
    """catches: looks that chase the gates in small steps (x1.9, x1.5, x1.4 on calibration
    seed 20261218 of hier6) and run out of looks when the gates pass with the intervals
    still too wide to decide even an exactly agreeing pair."""
    # candidate: bulk ESS 300 < 400 and R-hat 1.012; relative MCSE of its SD 0.06,
    # the baseline's 0.015 (it passes its gates and is not grown)
    cand = compare.Summary(0.0, 1.0, 0.03, 0.06, 300, 450, 1.012, 4, 1000, 0.5)
    base = compare.Summary(0.0, 1.0, 0.015, 0.015, 2500, 2500, 1.0, 4, 1000, 0.5)
    c = compare.compare_summaries("x", cand, base, RULE)
    assert compare.interval_states(c.d_interval, c.r_interval, RULE) != ("in", "in")
    gates = tuple(compare.gate_failures({"x": cand}, 0, RULE))
    assert gates
    result = compare.ScopeComparison(compare.INCONCLUSIVE, "", gates, (), (c,))
    grow = compare.sides_needing_draws(result, RULE)
    assert grow == (True, False)
    p_cand, p_base = looks.project(result, RULE, grow)
    gates_only = max(looks.MARGIN * 400 / 300, looks.MARGIN * 0.012 / 0.01)
    floor_r = 0.06 ** 2 / ((looks.FAVOURABLE_SHARE * math.log(1.25) / RULE.k) ** 2 - 0.015 ** 2)
    assert floor_r > 3 * gates_only
    assert math.isclose(p_cand.factor, floor_r, rel_tol=1e-9) and p_base.factor == 1.0
    assert "planned at r = 1.000, favourable" in p_cand.reasons[0]


# ------------------------------------------------- the draw cap (workers.pipeline._plan_look)

def plan_with(monkeypatch, factor: float, draws: int, seconds_left: float = 900.0, fit_seconds: float = 1.0,
              side: str = "lazyppl", pymc_attempts: list[dict] | None = None,
              minimal_factor: float | None = None):
    """_plan_look on converged iid fits, with the projection of ``side`` forced to
    ``factor`` (its fit of ``draws`` per chain took ``fit_seconds``; the other side has
    1,000 draws, is not grown and took 1 s). ``pymc_attempts``: the PyMC fit's attempts;
    ``minimal_factor``: the minimal projection's factor (default ``factor``)."""
    from workers import pipeline
    from workers.fit import Fit

    rng = np.random.default_rng(9)
    grown = side == "lazyppl"
    lazy = Fit("lazyppl", {"x": rng.standard_normal((4, 200))},
               timings={"total": fit_seconds if grown else 1.0})
    pymc = Fit("pymc", {"x": rng.standard_normal((4, 200))},
               timings={"total": 1.0 if grown else fit_seconds},
               stats={"attempts": pymc_attempts} if pymc_attempts is not None else {})
    main = compare.compare_draws(lazy.draws, pymc.draws, ["x"], RULE)
    forced, kept = looks.Projection(factor, ("x: forced",)), looks.Projection(1.0, ())
    least = looks.Projection(factor if minimal_factor is None else minimal_factor, ("x: least",))

    def project(result, rule, grow, minimal=False, costs=(1.0, 1.0), caps=(math.inf, math.inf), **_):
        p = least if minimal else forced
        return (p, kept) if grown else (kept, p)

    monkeypatch.setattr(looks, "project", project)
    monkeypatch.setattr(compare, "sides_needing_draws", lambda result, rule: (grown, not grown))
    return pipeline._plan_look(main, None, ["x"], lazy, pymc, RULE,
                               {"pymc": 1000 if grown else draws, "lazyppl": draws if grown else 1000},
                               seconds_left)


def test_a_projection_a_little_over_the_cap_asks_for_the_cap(monkeypatch):
    """catches: a projection just over the cap (e.g. 116,998 LazyPPL draws per chain,
    calibration seed 20261201 of hier6) stopping the scope although the wall budget pays
    for a look at the cap, which may still decide."""
    from workers.pipeline import MAX_DRAWS

    evidence, stop, nxt = plan_with(monkeypatch, 117.0, 1000, fit_seconds=2.0)
    assert stop is None
    assert nxt["lazyppl"] == MAX_DRAWS["lazyppl"] and nxt["pymc"] == 1000
    assert evidence["capped"] == {"lazyppl": 117_000}
    assert evidence["projected_seconds"] == 200.0  # the cap's cost, not the projection's


def test_the_cap_is_not_asked_when_the_budget_cannot_pay_or_the_projection_is_far_over(monkeypatch):
    from workers.pipeline import CAP_STRETCH, MAX_DRAWS

    cap = MAX_DRAWS["lazyppl"]
    _, stop, nxt = plan_with(monkeypatch, 117.0, 1000, seconds_left=150.0, fit_seconds=2.0)
    assert stop.startswith("budget spent") and nxt["lazyppl"] == 1000
    _, stop, _ = plan_with(monkeypatch, CAP_STRETCH * 100 + 1, 1000)
    assert "above the 100000 a look may ask for" in stop
    # a side already at the cap cannot grow: stop
    _, stop, _ = plan_with(monkeypatch, 1.5, cap)
    assert "(this look had them)" in stop


def hier6_seed_20261204_look_1():
    """Calibration seed 20261204 of hier6, look 1, on mu: LazyPPL fails its gates (bulk ESS
    65), PyMC does not. Returns (result, sides needing draws)."""
    cand = compare.Summary(1.534, 0.751, 0.121, 0.154, 65, 63, 1.048, 4, 1000, 0.99)
    base = compare.Summary(1.502, 0.521, 0.0129, 0.0120, 1717, 1346, 1.001, 4, 1000, 0.99)
    c = compare.compare_summaries("mu", cand, base, RULE)
    gates = tuple(compare.gate_failures({"mu": cand}, 0, RULE))
    result = compare.ScopeComparison(compare.INCONCLUSIVE, "", gates, (), (c,))
    return result, compare.sides_needing_draws(result, RULE)


def test_a_fixed_side_that_nearly_fills_the_allowance_makes_both_grow():
    """catches: calibration seed 20261204 of hier6, look 1: the PyMC fit's MCSE of mu's
    mean (0.0129, SD 0.521) took 98 % of the floor's allowance for D, so growing LazyPPL
    alone projected 4,429x its draws, over the cap, and the audit stopped."""
    result, grow = hier6_seed_20261204_look_1()
    assert grow == (True, False)
    p_cand, p_base = looks.project(result, RULE, grow)
    allowed = looks.FAVOURABLE_SHARE * RULE.delta * 0.521 / RULE.k
    assert 0.0129 ** 2 > allowed ** 2 / 2
    # both share the allowances (D's and, likewise, R's); LazyPPL's MCSE of the mean taken
    # at PyMC's SD (an agreeing pair's SDs are equal)
    allowed_r = looks.FAVOURABLE_SHARE * math.log(1.25) / RULE.k
    d_cand, d_base = ((0.121 / 0.751 * 0.521) ** 2, 0.0129 ** 2)
    r_cand, r_base = ((0.154 / 0.751) ** 2, (0.0120 / 0.521) ** 2)
    assert math.isclose(p_cand.factor, max(d_cand / (allowed ** 2 / 2), r_cand / (allowed_r ** 2 / 2)), rel_tol=1e-9)
    assert math.isclose(p_base.factor, max(d_base / (allowed ** 2 / 2), r_base / (allowed_r ** 2 / 2)), rel_tol=1e-9)
    assert p_cand.factor < 4 * 100 and p_base.factor < 3  # within CAP_STRETCH of the cap


def test_a_pymc_fit_that_needed_a_divergence_retry_grows_at_most_fourfold(monkeypatch):
    """catches: eight_schools_centered (corpus, 2026-12-02) projecting many times its PyMC
    draws after a look whose first attempt diverged; the longer fit diverged again and the
    scope spent 323 s to end where a bounded look ends."""
    from workers.pipeline import DIVERGING_GROWTH

    retried = [{"target_accept": 0.9, "number": 0, "divergences": 3},
               {"target_accept": 0.99, "number": 1, "divergences": 0}]
    evidence, stop, nxt = plan_with(monkeypatch, 9.3, 1000, side="pymc", pymc_attempts=retried)
    assert stop is None and nxt["pymc"] == 1000 * DIVERGING_GROWTH and nxt["lazyppl"] == 1000
    assert evidence["diverging_growth"] == {"projected": 9300, "asked": 4000}
    # within the bound, or without divergent attempts, the projection is asked as it is
    evidence, _, nxt = plan_with(monkeypatch, 3.0, 1000, side="pymc", pymc_attempts=retried)
    assert nxt["pymc"] == 3000 and "diverging_growth" not in evidence
    clean = [{"target_accept": 0.9, "number": 0, "divergences": 0}]
    evidence, _, nxt = plan_with(monkeypatch, 9.3, 1000, side="pymc", pymc_attempts=clean)
    assert nxt["pymc"] == 9300 and "diverging_growth" not in evidence


def test_a_bounded_look_stops_when_even_the_least_draws_cost_more_than_the_time_left(monkeypatch):
    """catches: one_comp (corpus, 2026-12-03): PyMC diverged, so each look grew it 4x while
    even the fewest draws that could decide were 18-80x; the scope looked on until the
    budget-bound look and spent 424 s to end inconclusive. A bounded look whose least
    draws, unbounded, cost more than the whole time left cannot lead to a decision."""
    retried = [{"target_accept": 0.9, "number": 0, "divergences": 3},
               {"target_accept": 0.99, "number": 1, "divergences": 0}]
    # planned 40x, bounded to 4x (40 s); the least is 30x a 10 s fit = 300 s > 250 s left
    evidence, stop, nxt = plan_with(monkeypatch, 40.0, 1000, seconds_left=250.0, fit_seconds=10.0,
                                    side="pymc", pymc_attempts=retried, minimal_factor=30.0)
    assert stop.startswith("budget spent: even the fewest draws that could decide (30000 pymc "
                           "per chain) need about 300 s"), stop
    assert evidence["short_of_least"] == {"draws": {"pymc": 30_000}, "seconds": 300.0}
    assert nxt["pymc"] == 1000
    # the least fits in the time left: the bounded look goes ahead
    evidence, stop, nxt = plan_with(monkeypatch, 40.0, 1000, seconds_left=350.0, fit_seconds=10.0,
                                    side="pymc", pymc_attempts=retried, minimal_factor=30.0)
    assert stop is None and nxt["pymc"] == 4000 and "short_of_least" not in evidence
    # the bounded look already reaches the least: no stop, however little time is left
    # beyond the look itself
    evidence, stop, nxt = plan_with(monkeypatch, 40.0, 1000, seconds_left=60.0, fit_seconds=10.0,
                                    side="pymc", pymc_attempts=retried, minimal_factor=3.0)
    assert stop is None and nxt["pymc"] == 4000
    # an unbounded look is never stopped by this rule (the budget-bound look handles it)
    evidence, stop, nxt = plan_with(monkeypatch, 40.0, 1000, seconds_left=250.0, fit_seconds=10.0,
                                    minimal_factor=30.0)
    assert "short_of_least" not in evidence
    assert stop.endswith("(even the fewest draws that could decide need 300 s)")


def test_an_over_budget_look_whose_least_draws_fit_takes_what_the_budget_pays(monkeypatch):
    """catches: a scope stopped for the budget although the fewest draws that could decide
    (no margins) fit in the time left: the planned look (margins, half the band) is a
    plan, not the least that could decide, and the budget was left unspent."""
    from workers.pipeline import BUDGET_USE

    # planned 40x a 10 s fit = 400 s; 300 s left; the least that could decide is 10x (100 s)
    evidence, stop, nxt = plan_with(monkeypatch, 40.0, 1000, seconds_left=300.0, fit_seconds=10.0,
                                    minimal_factor=10.0)
    assert stop is None
    assert nxt["lazyppl"] == math.floor(BUDGET_USE * 300.0 / (10.0 / 1000)) and nxt["pymc"] == 1000
    bound = evidence["budget_bound"]
    assert bound["planned_seconds"] == 400.0 and bound["minimal_seconds"] == 100.0
    assert bound["minimal_draws"]["lazyppl"] == 10_000 and bound["asked"] == nxt
    assert evidence["projected_seconds"] == round(nxt["lazyppl"] * 10.0 / 1000, 1) <= 300.0
    # the least is asked even where BUDGET_USE of the time left would not reach it
    _, stop, nxt = plan_with(monkeypatch, 40.0, 1000, seconds_left=110.0, fit_seconds=10.0,
                             minimal_factor=10.0)
    assert stop is None and nxt["lazyppl"] == 10_000
    # within the budget, the planned look is asked as it is
    evidence, _, nxt = plan_with(monkeypatch, 40.0, 1000, seconds_left=500.0, fit_seconds=10.0,
                                 minimal_factor=10.0)
    assert nxt["lazyppl"] == 40_000 and "budget_bound" not in evidence


def test_an_over_budget_look_stops_when_even_the_least_draws_do_not_fit(monkeypatch):
    evidence, stop, nxt = plan_with(monkeypatch, 40.0, 1000, seconds_left=90.0, fit_seconds=10.0,
                                    minimal_factor=10.0)
    assert stop == ("budget spent: deciding needs about 400 s more of fitting, more than the "
                    "90 s left of wall_seconds (even the fewest draws that could decide need 100 s)")
    assert nxt["lazyppl"] == 1000 and evidence["budget_bound"]["minimal_seconds"] == 100.0


def test_the_minimal_projection_drops_the_margins():
    """project(minimal=True): gates just met (no MARGIN) and intervals aimed at the whole
    distance to the boundary (no MARGIN at the estimate, share 1 instead of
    FAVOURABLE_SHARE at the favourable point); draws scale as 1/half-width²."""
    # an ESS gate (bulk 200 of 400): planned at MARGIN x 400, minimal at 400
    cand = compare.Summary(0.0, 1.0, 0.05, 0.04, 200, 500, 1.0, 4, 1000, 0.5)
    base = compare.Summary(0.0, 1.0, 0.001, 0.001, 4000, 4000, 1.0, 4, 1000, 0.5)
    c = compare.compare_summaries("x", cand, base, RULE)
    gates = tuple(compare.gate_failures({"x": cand}, 0, RULE))
    gated = compare.ScopeComparison(compare.INCONCLUSIVE, "", gates, (), (c,))
    planned, _ = looks.project(gated, RULE, (True, False))
    least, _ = looks.project(gated, RULE, (True, False), minimal=True)
    assert least.factor < planned.factor and least.factor >= 2.0  # 400 / 200 at least
    # an open D interval of trusted fits at d = 0: planned at the estimate, half-width
    # delta / MARGIN; minimal, half-width delta
    cand = compare.Summary(0.0, 1.0, 0.06, 0.02, 4000, 4000, 1.0, 4, 1000, 0.5)
    base = compare.Summary(0.0, 1.0, 0.001, 0.001, 40000, 40000, 1.0, 4, 1000, 0.5)
    c = compare.compare_summaries("x", cand, base, RULE)
    open_d = compare.ScopeComparison(compare.INCONCLUSIVE, "", (), (), (c,))
    planned, _ = looks.project(open_d, RULE, (True, False))
    least, _ = looks.project(open_d, RULE, (True, False), minimal=True)
    # (not exactly MARGIN²: the baseline's fixed error takes its share of either half-width)
    assert math.isclose(planned.factor / least.factor, looks.MARGIN ** 2, rel_tol=0.01)
    assert "favourable" in least.reasons[0] and "estimate" in planned.reasons[0]


# --- splitting an interval's error allowance between two growing sides (looks.split) ---

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_terms = st.floats(min_value=1e-4, max_value=1.0)
_costs = st.floats(min_value=1e-2, max_value=1e3)


@settings(max_examples=300, deadline=None)
@given(a0=_terms, a1=_terms, c0=_costs, c1=_costs, share=st.floats(min_value=0.05, max_value=0.95))
def test_the_split_meets_the_allowance_at_no_more_cost_than_any_other_split(a0, a1, c0, c1, share):
    """Law: the factors shrink the interval to the allowance (no further, unless a side is
    held at 1), and no other split of the allowance, the old equal halves included, is
    cheaper in fitting seconds."""
    allowed = 0.5 * math.hypot(a0, a1)  # the interval must halve: both terms matter
    f0, f1 = looks.split((a0, a1), allowed, (c0, c1))
    assert f0 >= 1 and f1 >= 1
    assert a0 ** 2 / f0 + a1 ** 2 / f1 <= allowed ** 2 * (1 + 1e-9)
    room = allowed ** 2
    # any other split: side 0 gets `share` of the squared allowance
    g0, g1 = max(1.0, a0 ** 2 / (share * room)), max(1.0, a1 ** 2 / ((1 - share) * room))
    assert c0 * f0 + c1 * f1 <= (c0 * g0 + c1 * g1) * (1 + 1e-9)


def test_the_cheaper_or_noisier_side_takes_more_of_the_growth():
    # equal errors and costs: both grow alike, to twice the draws (the old halves, too)
    assert looks.split((0.03, 0.03), 0.03) == (2.0, 2.0)
    # PyMC's draws 10x dearer: LazyPPL grows ~3.2x as much (f ∝ 1/√c)
    f_lazy, f_pymc = looks.split((0.03, 0.03), 0.03, costs=(1.0, 10.0))
    assert math.isclose(f_lazy / f_pymc, math.sqrt(10), rel_tol=1e-9)
    assert f_pymc < 2.0 < f_lazy
    # hmm_drive_1 visible (session 12): relative SD MCSEs 0.019 (LazyPPL) and 0.065 (PyMC's
    # heavy-tailed phi), half-width allowance 0.0279, a PyMC refit 10x dearer. Equal
    # halves asked PyMC for 10.9x (LazyPPL's share left unused); the split asks 5.9x
    # and LazyPPL 5.5x, 59 % of the fitting seconds
    old = (max(1.0, 0.019 ** 2 / (0.0279 ** 2 / 2)), 0.065 ** 2 / (0.0279 ** 2 / 2))
    new = looks.split((0.019, 0.065), 0.0279, costs=(10.0, 100.0))
    assert 10.8 < old[1] < 10.9 and 5.8 < new[1] < 6.0 and 5.4 < new[0] < 5.6
    assert 10 * new[0] + 100 * new[1] < 0.6 * (10 * old[0] + 100 * old[1])


def test_a_side_whose_share_is_under_one_keeps_its_draws_and_a_capped_side_is_held():
    # LazyPPL's error is tiny: it keeps its draws; PyMC takes what is left of the allowance
    f0, f1 = looks.split((0.001, 0.065), 0.0279, costs=(10.0, 100.0))
    assert f0 == 1.0 and math.isclose(f1, 0.065 ** 2 / (0.0279 ** 2 - 0.001 ** 2), rel_tol=1e-12)
    # the cheap side would be asked past its cap: it is held there, the other takes the rest
    f0, f1 = looks.split((0.019, 0.065), 0.0279, costs=(10.0, 100.0), caps=(3.0, 50.0))
    assert f0 == 3.0 and math.isclose(f1, 0.065 ** 2 / (0.0279 ** 2 - 0.019 ** 2 / 3), rel_tol=1e-12)
    # nothing left for the other side: no number of draws decides
    assert looks.split((0.05, 0.01), 0.0279, caps=(2.0, 50.0))[1] == math.inf
    # costs that are not positive numbers count as equal; errors that are not finite decide nothing
    assert looks.split((0.03, 0.03), 0.03, costs=(0.0, math.nan)) == (2.0, 2.0)
    assert looks.split((math.nan, 0.03), 0.03) == (math.inf, math.inf)


def test_the_projection_splits_by_what_each_side_costs():
    """Both sides' relative SD errors 0.05 (a tie: both grow), R planned at r = 1: with
    equal costs both grow alike; with PyMC's refit 20x dearer, PyMC grows less than before
    and LazyPPL more, and the look costs less."""
    c, result = one(summary(mcse_sd=0.05), summary(mcse_sd=0.05))
    assert c.verdict == compare.INCONCLUSIVE
    assert compare.sides_needing_draws(result, RULE) == (True, True)
    same = looks.project(result, RULE, (True, True))
    assert math.isclose(same[0].factor, same[1].factor)
    lazy, pymc = looks.project(result, RULE, (True, True), costs=(1.0, 20.0))
    assert pymc.factor < same[1].factor < lazy.factor
    assert 1.0 * lazy.factor + 20.0 * pymc.factor < 21.0 * same[0].factor


def _counted_fits(rng, lazy_seconds: float, pymc_seconds: float):
    """A LazyPPL and a PyMC fit that pass their gates (4 x 1,000 independent draws) with
    means 0.15 SD apart, so d's interval straddles delta = 0.2 and both sides must grow,
    with the work each sampler reports: 4 chains of 30,000 LazyPPL evaluations; NUTS at
    7 leapfrog steps per draw over 1,000 tuning and 500 kept draws."""
    from workers.fit import Fit

    lazy = Fit("lazyppl", {"x": rng.standard_normal((4, 1000))},
               stats={"chains": [{"evaluations": 30_000} for _ in range(4)]},
               timings={"total": lazy_seconds})
    pymc = Fit("pymc", {"x": 0.15 + rng.standard_normal((4, 1000))},
               sampler={"tune": 1000, "draws": 500}, stats={"n_steps": [7.0] * 4},
               timings={"total": pymc_seconds})
    return lazy, pymc


def test_the_look_passes_each_sides_counted_work_and_caps(monkeypatch):
    from workers import pipeline

    seen = []
    real = looks.project

    def spy(result, rule, grow, minimal=False, costs=(1.0, 1.0), caps=(math.inf, math.inf), **kw):
        seen.append((costs, caps))
        return real(result, rule, grow, minimal, costs, caps, **kw)

    monkeypatch.setattr(looks, "project", spy)
    lazy, pymc = _counted_fits(np.random.default_rng(3), 1.5, 20.0)
    main = compare.compare_draws(lazy.draws, pymc.draws, ["x"], RULE)
    assert main.verdict == compare.INCONCLUSIVE
    evidence, _, _ = pipeline._plan_look(main, None, ["x"], lazy, pymc, RULE,
                                         {"pymc": 500, "lazyppl": 2000}, 1e4)
    work = (120_000.0, float(round(4 * 7 * 1500 * pipeline.PYMC_STEP_IN_EVALUATIONS)))
    assert seen and all(s == (work, (50.0, 100.0)) for s in seen)
    # recorded, so the split can be re-derived from the evidence; seconds only for the budget
    assert evidence["refit_work"] == {"lazyppl": 120_000, "pymc": round(work[1])}
    assert evidence["refit_seconds"] == {"lazyppl": 1.5, "pymc": 20.0}


def test_the_next_look_follows_from_the_draws_not_from_how_long_they_took():
    """Same seeds, same draws: a look's plan must not change with the machine's load. Since
    session 14 the split was weighed by measured seconds, so look 2's draws varied from run
    to run (an integration test met a PyMC divergence at some draw counts and not others)."""
    from workers import pipeline

    plans = []
    for lazy_s, pymc_s in ((1.5, 20.0), (20.0, 1.5), (3.0, 3.0)):
        lazy, pymc = _counted_fits(np.random.default_rng(3), lazy_s, pymc_s)
        main = compare.compare_draws(lazy.draws, pymc.draws, ["x"], RULE)
        assert main.verdict == compare.INCONCLUSIVE and main.gates_passed
        evidence, stop, nxt = pipeline._plan_look(main, None, ["x"], lazy, pymc, RULE,
                                                  {"pymc": 500, "lazyppl": 2000}, 1e4)
        assert stop is None
        plans.append((nxt, evidence["projection"]))
    assert plans[0] == plans[1] == plans[2]
    assert plans[0][0]["lazyppl"] > 2000 and plans[0][0]["pymc"] > 500


def test_refit_work_counts_what_the_samplers_report():
    from workers import pipeline
    from workers.fit import Fit

    lazy, pymc = _counted_fits(np.random.default_rng(0), 1.0, 1.0)
    assert pipeline._refit_work(lazy) == 120_000
    assert pipeline._refit_work(pymc) == pytest.approx(4 * 7 * 1500 * pipeline.PYMC_STEP_IN_EVALUATIONS)
    # not reported (a backend without n_steps, a malformed count): not a number, and the
    # look falls back to equal halves instead of guessing
    assert math.isnan(pipeline._refit_work(Fit("pymc", {}, sampler={"tune": 10, "draws": 10})))
    assert math.isnan(pipeline._refit_work(Fit("lazyppl", {}, stats={"chains": [{"evaluations": "x"}]})))
    assert math.isnan(pipeline._refit_work(Fit("pymc", {}, sampler={"tune": 10, "draws": 10},
                                               stats={"n_steps": [3.0, None]})))


def test_without_counted_work_the_look_gives_each_side_half(monkeypatch):
    from workers import pipeline
    from workers.fit import Fit

    seen = []
    real = looks.project

    def spy(result, rule, grow, minimal=False, costs=(1.0, 1.0), caps=(math.inf, math.inf), **kw):
        seen.append(costs)
        return real(result, rule, grow, minimal, costs, caps, **kw)

    monkeypatch.setattr(looks, "project", spy)
    rng = np.random.default_rng(3)
    lazy = Fit("lazyppl", {"x": rng.standard_normal((4, 60))}, timings={"total": 1.5})
    pymc = Fit("pymc", {"x": rng.standard_normal((4, 60))}, timings={"total": 20.0})
    main = compare.compare_draws(lazy.draws, pymc.draws, ["x"], RULE)
    evidence, _, _ = pipeline._plan_look(main, None, ["x"], lazy, pymc, RULE,
                                         {"pymc": 500, "lazyppl": 2000}, 1e4)
    assert seen and all(c is None for c in seen)
    assert evidence["refit_work"] == {"lazyppl": None, "pymc": None}


def test_a_cheap_side_not_asked_to_grow_is_grown_when_that_relieves_a_dear_one():
    """hmm_drive_1 visible (session 12): PyMC's heavy-tailed phi had a relative SD MCSE of
    0.065 against LazyPPL's 0.019, and a PyMC refit cost ~15x a LazyPPL one. Only PyMC was
    asked to grow (its error is the larger): 10.1x. With the costs known, LazyPPL grows
    too and PyMC's growth falls to ~6x, for 60 % of the fitting seconds."""
    # r = 1.15: R = [0.88, 1.51] straddles the band's upper edge; planned at r = 1
    c, result = one(summary(sd=1.15, mcse_sd=0.019 * 1.15), summary(mcse_sd=0.065))
    assert c.verdict == compare.INCONCLUSIVE
    grow = compare.sides_needing_draws(result, RULE)
    assert grow == (False, True)
    allowed = looks.FAVOURABLE_SHARE * math.log(1.25) / RULE.k
    alone_lazy, alone_pymc = looks.project(result, RULE, grow)
    assert alone_lazy.factor == 1.0
    assert math.isclose(alone_pymc.factor, 0.065 ** 2 / (allowed ** 2 - 0.019 ** 2), rel_tol=1e-9)
    costs = (1.0, 15.0)
    lazy, pymc = looks.project(result, RULE, grow, costs=costs)
    assert lazy.factor > 1 and pymc.factor < 0.65 * alone_pymc.factor
    assert costs[0] * lazy.factor + costs[1] * pymc.factor < 0.65 * costs[1] * alone_pymc.factor
    assert lazy.reasons and "(planned at r = 1.000, favourable" in lazy.reasons[0]
    # the combined error meets the allowance
    assert 0.019 ** 2 / lazy.factor + 0.065 ** 2 / pymc.factor <= allowed ** 2 * (1 + 1e-9)
    # were LazyPPL the dear side, growing it too would not pay: PyMC alone, as before
    lazy, pymc = looks.project(result, RULE, grow, costs=(15.0, 1.0))
    assert lazy.factor == 1.0 and math.isclose(pymc.factor, alone_pymc.factor, rel_tol=1e-9)


def test_with_costs_the_band_edge_case_is_split_at_the_least_cost():
    """The band-edge case above (both grow: PyMC's error takes more than half the
    allowance), trusted fits, equal costs: f_i = a_i (a_0 + a_1) / allowed², below the
    equal halves' 11.5x for LazyPPL."""
    cand = summary(sd=1.192, mcse_sd=0.067 * 1.192)
    base = summary(sd=1.0, mcse_sd=0.029)
    c, result = one(cand, base)
    allowed = looks.FAVOURABLE_SHARE * math.log(1.25) / RULE.k
    p_cand, p_base = looks.project(result, RULE, (True, False), costs=(1.0, 1.0))
    assert math.isclose(p_cand.factor, 0.067 * (0.067 + 0.029) / allowed ** 2, rel_tol=1e-9)
    assert math.isclose(p_base.factor, 0.029 * (0.067 + 0.029) / allowed ** 2, rel_tol=1e-9)
    assert p_cand.factor < 0.067 ** 2 / (allowed ** 2 / 2)


def test_while_a_fit_fails_its_gates_costs_do_not_change_the_plan():
    """catches: the whole corpus at 340641e: gp_pois_regr's full scope (LazyPPL failing its
    gates at look 1) took 3 looks and 676 s instead of 2 and 243 s once the split by cost
    applied to untrusted errors. A failing fit's MCSE is not trusted: the plan is the
    floor with equal halves (or the other side fixed), whatever the costs."""
    result, grow = hier6_seed_20261204_look_1()
    plain = looks.project(result, RULE, grow)
    for costs in ((1.0, 1.0), (1.0, 50.0), (50.0, 1.0)):
        weighed = looks.project(result, RULE, grow, costs=costs)
        assert [p.factor for p in weighed] == [p.factor for p in plain]


def test_a_lazyppl_refit_is_not_charged_its_first_compile():
    """The budget check prices a LazyPPL refit by its sandboxed run: the binary is cached
    after the first fit, whose total included a cold GHC compile."""
    from workers import pipeline
    from workers.fit import Fit

    first = Fit("lazyppl", {}, timings={"compile": 9.0, "run": 1.0, "total": 10.2})
    assert pipeline._fit_seconds(first) == pytest.approx(1.2)
    assert pipeline._fit_seconds(Fit("lazyppl", {}, timings={"total": 3.0})) == 3.0


def test_a_pymc_refit_is_charged_every_attempt_of_the_fit():
    """catches: one_comp, full scope (session 24): the budget priced a PyMC refit by its
    chosen attempt (23 s per 1,000 draws) while the fit ran two (44 s; a refit starts again
    at the first target_accept), so whether the least draws (34,108 per chain) fitted in
    the time left was decided by the machine's load (861 s against 831 s left in one run,
    under it in another, which then spent 310 s on a look that could not decide)."""
    from workers import pipeline
    from workers.fit import Fit

    attempts = [{"target_accept": 0.9, "number": 0, "divergences": 41,
                 "timings": {"compile": 9.0, "sample": 20.0}},
                {"target_accept": 0.95, "number": 1, "divergences": 8, "timings": {"sample": 22.0}},
                {"target_accept": 0.99, "number": 2, "divergences": 0,
                 "timings": {"sample": 23.0, "cpu": "x"}}]
    session = {"fit": 0, "compiled": True}
    fit = Fit("pymc", {}, timings={"sample": 23.0, "process": 80.0},
              stats={"session": session, "attempts": attempts})
    assert pipeline._fit_seconds(fit) == pytest.approx(65.5)
    attempts[1]["timings"]["sample"] = float("inf")  # not a number of seconds: none
    assert pipeline._fit_seconds(fit) == pytest.approx(43.5)
    one = Fit("pymc", {}, timings={"sample": 23.0}, stats={"session": session})
    assert pipeline._fit_seconds(one) == pytest.approx(23.5)


def test_a_later_look_skips_the_target_accepts_whose_attempts_diverged():
    """issue 11: a nutpie fit's draws do not depend on how many are asked for, so an
    attempt that diverged at one look diverges again with more draws; the next look's
    refit starts at the fit's last target_accept when every attempt before it diverged,
    and the budget prices only what it runs again. Not after a fallback (for that fit
    only), another backend, or an attempt before the last that passed."""
    from workers import pipeline
    from workers.fit import Fit

    def fit(attempts, backend="nutpie", **sampler):
        return Fit("pymc", {}, sampler={"backend": backend, **sampler},
                   stats={"session": {"fit": 0}, "attempts": [
                       {"target_accept": a, "number": n, "mass_matrix": m, "divergences": d,
                        "timings": {"sample": 10.0 * (n + 1)}}
                       for n, (a, m, d) in enumerate(attempts)]})

    schedule = [0.9, 0.95, 0.99]
    retried = fit([(0.9, "low_rank", 63), (0.95, "low_rank", 2), (0.99, "low_rank", 0)])
    assert pipeline._retry_start(retried, schedule) == 2
    assert pipeline._fit_seconds(retried) == pytest.approx(30.5)  # the 0.99 attempt alone
    assert pipeline._retry_start(fit([(0.95, "low_rank", 0)]), schedule) == 1  # stays there
    assert pipeline._retry_start(fit([(0.9, "low_rank", 0)]), schedule) == 0
    assert pipeline._retry_start(None, schedule) == 0
    # a fit that skipped them still counts as one that needed a divergence retry (the
    # 4x growth cap of a diverging PyMC fit applies as before)
    skipped = fit([(0.95, "low_rank", 0)])
    assert not pipeline._diverged(skipped)
    skipped.stats["skipped_target_accepts"] = [0.9]
    assert pipeline._diverged(skipped)
    for other in (fit([(0.9, "low_rank", 5), (0.95, "low_rank", 0)], backend="numpyro"),
                  fit([(0.9, "low_rank", 5), (0.95, "diag", 0)]),
                  fit([(0.9, "low_rank", 5), (0.95, "low_rank", 1)],
                      fallbacks=[{"mass_matrix": "diag"}])):
        assert pipeline._retry_start(other, schedule) == 0
        assert pipeline._fit_seconds(other) == pytest.approx(30.5)  # every attempt again
    # an attempt before the last that passed (a chain collapse's retry): all again
    assert pipeline._retry_start(fit([(0.9, "low_rank", 0), (0.9, "low_rank", 0)]), schedule) == 0
    # a target_accept outside the schedule (other settings): from the start
    assert pipeline._retry_start(fit([(0.8, "low_rank", 3), (0.85, "low_rank", 0)]), schedule) == 0



def test_a_floor_plans_the_other_side_from_the_floors_draws():
    """PyMC grows 4x for its own check against a reference (a floor): the comparison with
    LazyPPL is planned from PyMC's error at 4x its draws (half), so LazyPPL grows less
    than without the floor; the plan is the split of the same interval with PyMC's terms
    and cost taken at the floor, multiplied back."""
    c, result = one(summary(mcse_sd=0.08), summary(mcse_sd=0.05))
    assert c.verdict == compare.INCONCLUSIVE
    costs = (1.0, 2.0)
    plain = looks.project(result, RULE, (True, True), costs=costs)
    lazy, pymc = looks.project(result, RULE, (True, True), costs=costs, floors=(1.0, 4.0))
    assert lazy.factor < plain[0].factor and pymc.factor >= 4.0
    c_f, at_floor = one(summary(mcse_sd=0.08), summary(mcse_sd=0.05 / 2))
    assert c_f.verdict == compare.INCONCLUSIVE
    lazy_f, pymc_f = looks.project(at_floor, RULE, (True, True), costs=(1.0, 8.0))
    assert math.isclose(lazy.factor, lazy_f.factor, rel_tol=1e-9)
    # PyMC's share from the floor's draws is under 1 (it keeps them): the floor itself
    assert pymc.factor == 4.0 and pymc_f.factor == looks.MIN_FACTOR
    # no floor (1, or one that cannot be computed): the plan of old
    for none in ((1.0, 1.0), (1.0, math.inf), (1.0, math.nan)):
        assert looks.project(result, RULE, (True, True), costs=costs, floors=none) == plain
    with pytest.raises(ValueError):
        looks.project(result, RULE, (True, False), floors=(1.0, 4.0))


def test_pymc_growth_for_the_reference_relieves_lazyppl(monkeypatch):
    """catches: LazyPPL grown to shrink a D interval as if PyMC kept its draws, while
    PyMC grows anyway for its own undecided check against posteriordb's reference (the
    note of sessions 14-16: `ref_open` was applied after the split, as a maximum)."""
    from workers import pipeline

    rng = np.random.default_rng(3)
    lazy, pymc = _counted_fits(rng, 1.5, 20.0)
    pymc.stats["n_steps"] = [70.0] * 4  # PyMC's draws dear: LazyPPL takes most of the growth
    main = compare.compare_draws(lazy.draws, pymc.draws, ["x"], RULE)
    assert main.verdict == compare.INCONCLUSIVE and main.gates_passed
    reference = {"x": 0.15 + 0.18 + rng.standard_normal((10, 1000))}
    vs_ref = compare.compare_draws(pymc.draws, reference, ["x"], RULE)
    assert vs_ref.verdict == compare.INCONCLUSIVE
    draws = {"pymc": 500, "lazyppl": 2000}
    alone, stop, _ = pipeline._plan_look(main, None, ["x"], lazy, pymc, RULE, draws, 1e4)
    with_ref, stop_ref, _ = pipeline._plan_look(main, vs_ref, ["x"], lazy, pymc, RULE, draws, 1e4)
    assert stop is None and stop_ref is None
    assert with_ref["next_draws"]["pymc"] > alone["next_draws"]["pymc"]
    assert with_ref["next_draws"]["lazyppl"] < alone["next_draws"]["lazyppl"]


# --- a look's record of its PyMC fit (workers.pipeline.pymc_fit_record) ---

def test_a_looks_pymc_record_sums_the_phases_over_the_fits_attempts():
    """catches: one_comp's look records (session 24) read import 0 s and compile 0 s
    although the look compiled: a divergence retry was the chosen attempt, and the fit's
    own timings are the chosen attempt's (the first attempt's compile is charged to it
    alone). The record sums each phase over the attempts; what the child wrote that is not
    a finite non-negative number counts as none."""
    from workers.fit import Fit
    from workers.pipeline import pymc_fit_record

    attempts = [{"target_accept": 0.9, "number": 0, "divergences": 41,
                 "timings": {"import": 2.5, "prewarm": 0.0, "build": 1.25, "compile": 13.5,
                             "sample": 20.0}},
                {"target_accept": 0.95, "number": 1, "divergences": 0,
                 "timings": {"import": 0.0, "build": 0.0, "compile": 0.0, "sample": 30.0,
                             "prewarm": "soon"}},
                {"target_accept": 0.99, "skipped": "wall-clock budget spent"}]
    chosen = {"import": 0.0, "prewarm": 0.0, "build": 0.0, "compile": 0.0, "sample": 30.0,
              "process": 71.5}
    fit = Fit("pymc", {"x": np.zeros((4, 10))}, timings=chosen,
              stats={"attempts": attempts, "session": {"fit": 0, "compiled": True}})
    assert pymc_fit_record(fit) == {"compiled": True, "session_fit": 0, "attempts": 2,
                                    "import": 2.5, "prewarm": 0.0, "build": 1.25,
                                    "compile": 13.5, "sample": 50.0, "process": 71.5}
    for bad in (float("nan"), -1.0, True, "13.5", None):
        attempts[0]["timings"]["compile"] = bad
        assert pymc_fit_record(fit)["compile"] == 0.0
    # a fit without attempts (none reported): its own timings
    bare = Fit("pymc", {"x": np.zeros((4, 10))}, timings=chosen, stats={})
    assert pymc_fit_record(bare) == {"compiled": False, "session_fit": None, "attempts": 1,
                                     **{k: chosen[k] for k in chosen}}


# Heavy tails (docs/RULE.md, "Heavy tails"): an undecided mean or SD asks for the draws that
# make it a reliable estimate under the parameter's tail; an SD without a variance, none.

def test_tail_khat_tells_an_infinite_variance_tail_from_light_and_moderate_ones():
    rng = np.random.default_rng(11)
    assert looks.tail_khat(rng.standard_normal((4, 1000))) < 0.2
    assert 0.2 < looks.tail_khat(rng.standard_t(3, (4, 4000))) < 0.45
    assert looks.tail_khat(rng.standard_cauchy((4, 1000))) > 0.7
    # a Metropolis chain's repeats (every state held 10 draws) do not hide the tail
    assert looks.tail_khat(np.repeat(rng.standard_cauchy(1000), 10)) > 0.7
    # no tail to fit: constant, two-valued, fewer than 100 distinct values
    for x in (np.ones((4, 1000)), rng.integers(0, 2, (4, 1000)), rng.standard_cauchy(50)):
        assert math.isnan(looks.tail_khat(x))


def test_tail_draws_follow_the_sample_size_threshold():
    # S with power * k < 1 - 1/log10(S)
    for k, power in ((0.3, 2), (0.39, 2), (0.7, 1)):
        need = looks.tail_draws(k, power)
        assert math.isclose(power * k, 1 - 1 / math.log10(need), rel_tol=1e-9)
    assert looks.tail_draws(0.5, 2) == looks.tail_draws(1.0, 1) == math.inf
    assert looks.tail_draws(-0.1, 2) == looks.tail_draws(math.nan, 2) == 0.0
    assert looks.tail_draws(0.2, 2) < 100 < 1e6 < looks.tail_draws(0.42, 2)


def test_an_open_sd_ratio_asks_for_the_draws_its_tail_needs():
    """R open, tail k-hat 0.39 (one_comp's K_m in posteriordb's reference draws): the SD
    needs 35,112 draws in all, times the margin, of each side; 4 x 1,000 now."""
    cand = summary(sd=1.1, mcse_sd=0.03)
    base = summary(sd=1.0, mcse_sd=0.03)
    c, result = one(cand, base)
    assert c.verdict == compare.INCONCLUSIVE and compare.interval_states(
        c.d_interval, c.r_interval, RULE) == ("in", "open")
    without = looks.project(result, RULE, (True, True))
    p_cand, p_base = looks.project(result, RULE, (True, True), tails=({"x": 0.39}, {"x": 0.39}))
    want = looks.tail_draws(0.39, 2) * looks.MARGIN / 4000
    assert max(without[0].factor, without[1].factor) < want
    assert math.isclose(p_cand.factor, want) and math.isclose(p_base.factor, want)
    assert "x: tail k-hat 0.39: its SD needs" in p_cand.reasons[0]
    # a side not asked to grow grows for it; a side with no tail given does not
    p_cand, p_base = looks.project(result, RULE, (True, False), tails=({"x": 0.39}, None))
    assert math.isclose(p_cand.factor, want) and p_base.factor < want
    # a light tail asks nothing more
    assert looks.project(result, RULE, (True, True), tails=({"x": 0.1}, {"x": 0.1})) == without
    # nor while a fit's chains disagree (R-hat fails: its far draws may be a transient's)
    c_rhat, _ = one(summary(sd=1.1, mcse_sd=0.03, rhat=1.05), base)
    failing = compare.ScopeComparison(c_rhat.verdict, "", ("R-hat of x 1.050 > 1.01",), (), (c_rhat,))
    assert looks.project(failing, RULE, (True, True), tails=({"x": 0.39}, {"x": 0.39})) == \
        looks.project(failing, RULE, (True, True))
    # but a fit short only of ESS (one_comp's full scope: PyMC's tail ESS of V_m 394) asks
    c_ess, _ = one(summary(sd=1.1, mcse_sd=0.03, ess=394.0), base)
    short = compare.ScopeComparison(c_ess.verdict, "", ("tail ESS of x 394 < 400",), (), (c_ess,))
    p_cand, p_base = looks.project(short, RULE, (True, False), tails=({"x": 0.39}, {"x": 0.39}))
    assert math.isclose(p_cand.factor, want) and math.isclose(p_base.factor, want)
    assert looks.project(short, RULE, (True, False), tails=({"x": 0.5}, {"x": 0.5}))[0].factor == math.inf


def _pair(rng, y_lazy, y_pymc, x_shift=0.0, n=4000):
    """A LazyPPL and a PyMC fit with parameters ``y`` (as given) and ``x`` (normal)."""
    from workers.fit import Fit

    lazy = Fit("lazyppl", {"y": y_lazy, "x": rng.standard_normal((4, n))},
               stats={"chains": [{"evaluations": 30_000} for _ in range(4)]}, timings={"total": 2.0})
    pymc = Fit("pymc", {"y": y_pymc, "x": x_shift + rng.standard_normal((4, n))},
               sampler={"tune": 1000, "draws": n}, stats={"n_steps": [7.0] * 4}, timings={"total": 2.0})
    return lazy, pymc


def test_a_scope_undecided_on_a_parameter_without_a_variance_stops():
    from workers import pipeline

    rng = np.random.default_rng(5)
    lazy, pymc = _pair(rng, rng.standard_cauchy((4, 4000)), rng.standard_cauchy((4, 4000)))
    main = compare.compare_draws(lazy.draws, pymc.draws, ["x", "y"], RULE)
    assert main.gates_passed and main.verdict == compare.INCONCLUSIVE
    assert [c.parameter for c in main.comparisons if c.verdict == compare.INCONCLUSIVE] == ["y"]
    evidence, stop, nxt = pipeline._plan_look(main, None, ["x", "y"], lazy, pymc, RULE,
                                              {"pymc": 4000, "lazyppl": 4000}, 1e4)
    assert stop is not None and stop.startswith("no number of")
    assert "y: tail k-hat" in stop and "the variance does not exist" in stop
    assert nxt == {"pymc": 4000, "lazyppl": 4000}
    assert set(evidence["tail_khat"]) == {"y"} and evidence["tail_khat"]["y"] > 0.7
    # the pooled k-hat in the evidence is re-derived from the stored draws
    pooled = np.concatenate([lazy.draws["y"].ravel(), pymc.draws["y"].ravel()])
    assert evidence["tail_khat"]["y"] == round(looks.tail_khat(pooled), 3)


def test_light_tails_plan_as_before():
    """A normal parameter undecided on its mean: the tails add nothing to the plan."""
    from workers import pipeline

    rng = np.random.default_rng(7)
    lazy, pymc = _pair(rng, rng.standard_normal((4, 500)), rng.standard_normal((4, 500)),
                       x_shift=0.15, n=500)
    main = compare.compare_draws(lazy.draws, pymc.draws, ["x", "y"], RULE)
    assert main.gates_passed and main.verdict == compare.INCONCLUSIVE
    evidence, stop, nxt = pipeline._plan_look(main, None, ["x", "y"], lazy, pymc, RULE,
                                              {"pymc": 500, "lazyppl": 500}, 1e4)
    assert stop is None and max(nxt.values()) > 500
    assert evidence["tail_khat"] and max(evidence["tail_khat"].values()) < 0.25
    reasons = [r for p in evidence["projection"].values() for r in p["reasons"]]
    assert reasons and not any("tail k-hat" in r for r in reasons)
