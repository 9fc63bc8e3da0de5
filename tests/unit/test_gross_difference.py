"""The gross-difference rule (issue 14 item 3) on synthetic chains with known properties.

A scope whose candidate fails its gates may still say ``disagree`` when every chain of
the candidate, on its own, lies wholly outside the δ band around the baseline's mean (and
is not demonstrably narrower than the baseline), or is wholly wider than the SD band.
A correct pair that mixes poorly must never get there.
"""
import math

import numpy as np
import pytest

from workers import compare

RULE = compare.Rule(gross_difference=True)  # opt-in (SPEC §4 default: off)


def ar1(rng, chains, n, rho, mean=0.0, sd=1.0, start=None):
    """(chains, n) AR(1) draws with marginal N(mean, sd²) and lag-1 correlation rho;
    ``start`` (in marginal SDs) puts every chain there instead of a stationary draw."""
    x = np.empty((chains, n))
    x[:, 0] = rng.standard_normal(chains) if start is None else start
    noise = rng.standard_normal((chains, n)) * math.sqrt(1 - rho * rho)
    for t in range(1, n):
        x[:, t] = rho * x[:, t - 1] + noise[:, t]
    return mean + sd * x


def scope(cand, base, **kw):
    return compare.compare_draws({"x": cand}, {"x": base}, ["x"], RULE, **kw)


def thirteen_sds_behind_rhat_1_5(seed=1):
    rng = np.random.default_rng(seed)
    base = rng.standard_normal((4, 1000))
    offsets = np.array([-1.5, -0.5, 0.5, 1.5])[:, None]   # between-chain variance 1.25: R-hat ~ 1.5
    cand = ar1(rng, 4, 1000, 0.8, mean=13.0) + offsets
    return cand, base


def test_a_13_sd_difference_behind_rhat_1_5_disagrees_with_the_gate_failure_recorded():
    cand, base = thirteen_sds_behind_rhat_1_5()
    s = compare.summarize(cand)
    assert 1.4 < s.rhat < 1.7 and s.ess_bulk < 400
    result = scope(cand, base)
    assert result.verdict == compare.DISAGREE
    assert result.candidate_gates and any("R-hat of x" in g for g in result.candidate_gates)
    assert "despite failed gates" in result.reason and "R-hat of x" in result.reason
    (check,) = result.gross
    assert check.failing == "candidate" and check.margin > 10 and check.min_chain_ess >= 50


def test_the_same_fits_with_the_rule_switched_off_stay_inconclusive():
    cand, base = thirteen_sds_behind_rhat_1_5()
    off = compare.compare_draws({"x": cand}, {"x": base}, ["x"], compare.Rule(gross_difference=False))
    assert off.verdict == compare.INCONCLUSIVE and off.gross == ()


def test_a_baseline_that_fails_its_gates_is_checked_the_same_way():
    cand, base = thirteen_sds_behind_rhat_1_5()
    result = scope(-base, -cand)  # the poorly mixed fit is now the baseline, 13 SDs below
    assert result.baseline_gates and not result.candidate_gates
    assert result.verdict == compare.DISAGREE
    assert result.gross[0].failing == "baseline" and result.gross[0].margin > 10


def test_every_chain_wider_than_the_band_disagrees():
    rng = np.random.default_rng(2)
    base = rng.standard_normal((4, 1000))
    cand = ar1(rng, 4, 1000, 0.8, sd=2.0) + np.array([-3, -1, 1, 3])[:, None]  # R-hat fails, SD x2
    result = scope(cand, base)
    assert result.candidate_gates and result.verdict == compare.DISAGREE
    assert "times as wide" in result.reason


@pytest.mark.parametrize("seed", range(15))
def test_a_correct_candidate_that_mixes_slowly_never_disagrees(seed):
    rng = np.random.default_rng(100 + seed)
    base = rng.standard_normal((4, 1000))
    for rho in (0.9, 0.98, 0.999):
        cand = ar1(rng, 4, 1000, rho)          # stationary, correct marginal, slow
        result = scope(cand, base)
        assert result.candidate_gates
        assert result.verdict != compare.DISAGREE, (rho, result.reason)


@pytest.mark.parametrize("seed", range(10))
def test_chains_sharing_a_transient_from_one_far_start_never_disagree(seed):
    # every chain starts 5 SDs out and relaxes slowly: all four chain means sit on the
    # same side, but each chain's split halves differ, so its own ESS is small
    rng = np.random.default_rng(200 + seed)
    base = rng.standard_normal((4, 1000))
    cand = ar1(rng, 4, 1000, 0.995, start=5.0)
    result = scope(cand, base)
    assert result.verdict != compare.DISAGREE, result.reason


@pytest.mark.parametrize("seed", range(10))
def test_chains_stuck_together_in_part_of_the_posterior_never_disagree(seed):
    # a funnel's neck, or the larger of two modes: every chain mixes well locally (high
    # single-chain ESS) in a region narrower than the posterior and away from its mean
    rng = np.random.default_rng(300 + seed)
    base = rng.standard_normal((4, 1000))
    cand = ar1(rng, 4, 1000, 0.8, mean=-1.5, sd=0.2) + rng.normal(0, 0.1, (4, 1))
    assert compare.summarize(cand).rhat > 1.01  # it fails its gates (the chains sit apart)
    result = scope(cand, base)
    check = result.gross[0]
    assert check.margin > RULE.delta and check.min_chain_ess >= 50  # the mean test alone would fire
    assert result.verdict != compare.DISAGREE, result.reason


def test_chains_in_two_modes_on_either_side_never_disagree():
    rng = np.random.default_rng(4)
    base = np.concatenate([rng.normal(-2, 0.5, (2, 1000)), rng.normal(2, 0.5, (2, 1000))], axis=1)
    base = rng.permuted(base, axis=1)  # a baseline that mixes between both modes
    cand = np.concatenate([ar1(rng, 2, 1000, 0.5, mean=-2, sd=0.5), ar1(rng, 2, 1000, 0.5, mean=2, sd=0.5)])
    result = scope(cand, base)
    assert result.candidate_gates and not result.baseline_gates
    assert math.isnan(result.gross[0].margin) and result.verdict != compare.DISAGREE


def test_no_check_when_both_fits_fail_or_a_fit_diverged():
    cand, base = thirteen_sds_behind_rhat_1_5()
    assert scope(cand, cand + 13).gross == ()                    # both fail their gates
    assert scope(cand, base).gross                               # (only the candidate fails)
    result = scope(base, cand, baseline_divergences=3)           # baseline: R-hat and divergences
    assert result.gross == () and result.verdict == compare.INCONCLUSIVE


def test_chains_with_too_few_effective_draws_are_not_trusted():
    rng = np.random.default_rng(5)
    base = rng.standard_normal((4, 1000))
    cand = ar1(rng, 4, 1000, 0.995, mean=13.0)   # far away, but single-chain ESS ~ 3-10
    result = scope(cand, base)
    assert result.gross[0].min_chain_ess < compare.GROSS_MIN_CHAIN_ESS
    assert result.verdict == compare.INCONCLUSIVE


def test_the_gross_difference_rule_is_off_by_default_as_spec_section_4_says():
    """SPEC §4: a fit that fails a gate never makes the scope disagree, unless the
    operator or the request opts in (rule.gross_difference)."""
    from workers.settings import AuditSettings

    assert compare.Rule().gross_difference is False
    assert compare.Rule.from_settings(AuditSettings().rule).gross_difference is False
