"""SPEC §4 rule: hand-computed boundary cases and laws as Hypothesis properties."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workers.compare import (
    AGREE, DISAGREE, INCONCLUSIVE, Rule, Summary, abs_d_distribution, batch_summary,
    compare_draws, compare_summaries, intervals, pair_verdict, scope_verdict, summarize,
)

RULE = Rule()


def S(mean=0.0, sd=1.0, mcse_mean=0.0, mcse_sd=0.0, frac_positive=0.5):
    return Summary(mean, sd, mcse_mean, mcse_sd, 4000, 4000, 1.0, 4, 1000, frac_positive)


BASE = S()


@pytest.mark.parametrize("cand, verdict", [
    (S(mean=0.2), AGREE),                       # D = [0.2, 0.2] touches +δ from inside
    (S(mean=-0.2), AGREE),                      # touches −δ from inside
    (S(mean=0.2000001), DISAGREE),              # just outside, zero MC error
    (S(mean=-0.2000001), DISAGREE),
    (S(mean=0.1, mcse_mean=0.025), AGREE),      # D = 0.1 ± 4·0.025 = [0, 0.2]
    (S(mean=0.1, mcse_mean=0.0251), INCONCLUSIVE),
    (S(mean=0.3, mcse_mean=0.025), INCONCLUSIVE),   # D = [0.2, 0.4] touches δ: not wholly outside
    (S(mean=0.3, mcse_mean=0.0249), DISAGREE),
    (S(sd=0.8), AGREE),                         # R = [0.8, 0.8] touches the band's lower end
    (S(sd=1.25), AGREE),
    (S(sd=0.7999999), DISAGREE),
    (S(sd=1.2500001), DISAGREE),
])
def test_boundaries(cand, verdict):
    assert compare_summaries("x", cand, BASE, RULE).verdict == verdict


def test_sd_ratio_interval_by_hand():
    cand = S(sd=1.0, mcse_sd=0.01)
    base = S(sd=1.0, mcse_sd=0.02)
    d, D, r, R = intervals(cand, base, 4.0)
    spread = 4 * math.sqrt(0.01**2 + 0.02**2)
    assert r == 1.0 and R == pytest.approx((math.exp(-spread), math.exp(spread)))
    assert d == 0.0 and D == (0.0, 0.0)


def test_zero_baseline_sd_is_inconclusive():
    assert compare_summaries("x", S(), S(sd=0.0), RULE).verdict == INCONCLUSIVE


summaries = st.builds(
    S,
    mean=st.floats(-5, 5),
    sd=st.floats(0.05, 5),
    mcse_mean=st.floats(0, 0.5),
    mcse_sd=st.floats(0, 0.5),
)


@given(summaries, summaries)
def test_swapping_negates_d_and_inverts_r(a, b):
    d, _, r, _ = intervals(a, b, 4.0)
    d2, _, r2, _ = intervals(b, a, 4.0)
    assert r2 == pytest.approx(1 / r)
    assert d2 == pytest.approx(-d / r, abs=1e-12)   # d is in units of the baseline SD
    assert np.sign(d2) == -np.sign(d)


@given(summaries, summaries, st.floats(1, 3), st.floats(0.05, 1))
def test_stricter_rule_never_turns_a_non_agreement_into_agree(a, b, k_factor, delta_factor):
    loose = Rule()
    strict = Rule(k=loose.k * k_factor, delta=loose.delta * delta_factor)
    if compare_summaries("x", a, b, loose).verdict != AGREE:
        assert compare_summaries("x", a, b, strict).verdict != AGREE


@given(summaries, summaries, st.floats(1, 3))
def test_wider_margin_never_turns_agree_into_disagree(a, b, factor):
    if compare_summaries("x", a, b, RULE).verdict == AGREE:
        wide = Rule(delta=RULE.delta * factor, sd_ratio_band=(0.8 / factor, 1.25 * factor))
        assert compare_summaries("x", a, b, wide).verdict == AGREE


@given(st.lists(st.text(min_size=1, max_size=20), min_size=1, max_size=3))
def test_failed_gate_never_yields_disagree(gates):
    bad = compare_summaries("x", S(mean=5), BASE, RULE)
    assert bad.verdict == DISAGREE
    assert scope_verdict(tuple(gates), (), (bad,))[0] == INCONCLUSIVE
    assert scope_verdict((), tuple(gates), (bad,))[0] == INCONCLUSIVE


def test_only_ess_and_rhat_shortfalls_are_curable_by_more_draws():
    from workers.compare import curable_by_more_draws, gate_failures
    short = Summary(0, 1, 0.1, 0.1, 100, 90, 1.02, 4, 100, 0.5)
    failures = gate_failures({"mu": short}, 0, RULE)
    assert len(failures) == 3 and curable_by_more_draws(failures, max_rhat=1.02)
    assert not curable_by_more_draws(gate_failures({"mu": short}, 2, RULE))
    assert not curable_by_more_draws([])
    # chains in separate modes (R-hat 1.47, as an HMM's label switching) are not cured
    stuck = Summary(0, 1, 0.1, 0.1, 8, 29, 1.47, 4, 1000, 0.5)
    assert not curable_by_more_draws(gate_failures({"mu": stuck}, 0, RULE), max_rhat=1.47)


def test_the_fit_with_the_larger_monte_carlo_error_is_the_one_run_longer():
    from workers.compare import ScopeComparison, sides_needing_draws

    def scope(cand, base, cand_gates=(), base_gates=()):
        row = compare_summaries("mu", cand, base, RULE)
        return ScopeComparison(row.verdict, "", tuple(cand_gates), tuple(base_gates), (row,))

    noisy, precise = S(mean=0.1, mcse_mean=0.05, mcse_sd=0.01), S(mcse_mean=0.005, mcse_sd=0.001)
    assert scope(noisy, precise).verdict == INCONCLUSIVE
    assert sides_needing_draws(scope(noisy, precise), RULE) == (True, False)
    assert sides_needing_draws(scope(precise, noisy), RULE) == (False, True)
    # equal errors: both; a failed gate decides by itself
    assert sides_needing_draws(scope(noisy, noisy), RULE) == (True, True)
    assert sides_needing_draws(scope(precise, noisy, cand_gates=["bulk ESS of mu 90 < 400"]), RULE) == (True, False)
    # the SD's relative error counts too: precise mean, noisy SD on the baseline
    sd_noisy = S(mcse_mean=0.001, mcse_sd=0.2)
    assert scope(precise, sd_noisy).verdict == INCONCLUSIVE
    assert sides_needing_draws(scope(precise, sd_noisy), RULE) == (False, True)


def test_pair_verdict():
    assert pair_verdict({"a": AGREE, "b": AGREE}) == AGREE
    assert pair_verdict({"a": AGREE, "b": INCONCLUSIVE}) == INCONCLUSIVE
    assert pair_verdict({"a": INCONCLUSIVE, "b": DISAGREE}) == DISAGREE
    assert pair_verdict({}) == INCONCLUSIVE


def test_summaries_come_from_arviz_and_more_draws_narrow_the_interval():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(4, 4000))
    short, long = summarize(x[:, :500]), summarize(x)
    assert long.mcse_mean < short.mcse_mean and long.mcse_sd < short.mcse_sd
    assert 0.95 < long.sd < 1.05 and long.rhat < 1.01 and long.ess_bulk > 10000


@pytest.mark.slow
def test_same_distribution_agrees_and_shifted_one_disagrees():
    rng = np.random.default_rng(7)
    base = {"mu": rng.normal(size=(4, 2000))}
    same = {"mu": rng.normal(size=(4, 2000))}
    shifted = {"mu": rng.normal(0.6, 1.0, size=(4, 2000))}
    assert compare_draws(same, base, ["mu"], RULE).verdict == AGREE
    result = compare_draws(shifted, base, ["mu"], RULE)
    assert result.verdict == DISAGREE and "mu" in result.reason


def test_hints_name_half_vs_full_and_sqrt2():
    half = S(mean=0.8, sd=0.6, frac_positive=1.0)
    full = S(mean=0.0, sd=1.0, frac_positive=0.5)
    hints = compare_summaries("tau", full, half, RULE).hints
    assert any("half" in h for h in hints)
    wide = compare_summaries("s", S(sd=math.sqrt(2)), BASE, RULE)
    assert wide.verdict == DISAGREE and any("√2" in h for h in wide.hints)


def test_batch_summary_on_fixed_audits():
    def scope(v, ds):
        return {"verdict": v, "comparisons": [{"d": d} for d in ds]}
    audits = [
        {"verdict": AGREE, "scopes": {"visible": scope(AGREE, [0.1, -0.05]), "full": scope(AGREE, [0.02])}},
        {"verdict": INCONCLUSIVE, "scopes": {"visible": scope(AGREE, [0.3]), "full": scope(INCONCLUSIVE, [-1.5])}},
        {"verdict": DISAGREE, "scopes": {"visible": scope(DISAGREE, [2.0]), "full": scope(DISAGREE, [4.0])}},
    ]
    out = batch_summary(audits)
    assert out["posteriors"] == {AGREE: 1, INCONCLUSIVE: 1, DISAGREE: 1, "error": 0}
    assert out["scopes"] == {AGREE: 3, INCONCLUSIVE: 1, DISAGREE: 2, "error": 0}
    assert out["abs_d"] == abs_d_distribution([0.1, 0.05, 0.02, 0.3, 1.5, 2.0, 4.0])
    assert out["abs_d"]["median"] == 0.3 and out["abs_d"]["max"] == 4.0 and out["abs_d"]["above_1"] == 3
