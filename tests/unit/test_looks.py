"""Planning the next look (workers.looks) on synthetic chains with known properties."""
import math

import numpy as np

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
    rng = np.random.default_rng(5)
    base = rng.standard_normal((4, 20_000))          # precise baseline
    cand = 0.16 + rng.standard_normal((4, 1000))       # d ≈ 0.16 ± 0.063: D straddles δ
    first = scope(cand, base)
    assert first.verdict == compare.INCONCLUSIVE and first.gates_passed
    grow = compare.sides_needing_draws(first, RULE)
    assert grow == (True, False)
    p_cand, p_base = looks.project(first, RULE, grow)
    assert p_base.factor == 1.0 and p_cand.factor > looks.MIN_FACTOR
    assert any("D" in why for why in p_cand.reasons)
    # the projection is about right: with that many draws D's half-width is within the
    # margin of the distance to δ, with a quarter of them it is not (half-widths, not the
    # noisy d, so the check does not depend on luck)
    gap = RULE.delta - abs(first.comparisons[0].d)

    def half_width(n):
        c = scope(0.16 + rng.standard_normal((4, n)), base).comparisons[0]
        return (c.d_interval[1] - c.d_interval[0]) / 2

    n = math.ceil(1000 * p_cand.factor)
    assert half_width(n) <= gap / looks.MARGIN * 1.1
    assert half_width(n // 4) > gap


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


def test_a_difference_on_the_boundary_cannot_be_decided():
    s = compare.Summary(0.2, 1.0, 0.01, 0.005, 4000, 4000, 1.0, 4, 1000, 0.5)
    b = compare.Summary(0.0, 1.0, 0.0, 0.0, 4000, 4000, 1.0, 4, 1000, 0.5)
    c = compare.compare_summaries("x", s, b, RULE)
    assert c.verdict == compare.INCONCLUSIVE
    result = compare.ScopeComparison(compare.INCONCLUSIVE, "", (), (), (c,))
    p_cand, _ = looks.project(result, RULE, (True, False))
    assert math.isinf(p_cand.factor)
    assert p_cand.to_dict()["factor"] is None


def test_both_sides_share_the_error_budget():
    s = compare.Summary(0.1, 1.0, 0.03, 0.01, 4000, 4000, 1.0, 4, 1000, 0.5)
    b = compare.Summary(0.0, 1.0, 0.03, 0.01, 4000, 4000, 1.0, 4, 1000, 0.5)
    c = compare.compare_summaries("x", s, b, RULE)
    result = compare.ScopeComparison(compare.INCONCLUSIVE, "", (), (), (c,))
    pc, pb = looks.project(result, RULE, (True, True))
    # each side's MCSE must fall to allowed/√2: allowed = (0.2 − 0.1)/1.25/4 = 0.02
    expected = 0.03 ** 2 / (0.02 ** 2 / 2)
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


def test_while_a_gate_fails_only_the_gates_are_projected():
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
    gates_only = max(looks.MARGIN * RULE.ess_bulk_min / s.ess_bulk, looks.MARGIN * RULE.ess_tail_min / s.ess_tail,
                     looks.MARGIN * (s.rhat - 1) / (RULE.rhat_max - 1), looks.MIN_FACTOR)
    assert math.isclose(p_cand.factor, gates_only, rel_tol=1e-9)
    assert all(("ESS" in why) or ("R-hat" in why) for why in p_cand.reasons)
