"""SPEC §2.3 name matching between the LazyPPL draw and the PyMC model
(``workers.pipeline.compared_names``), and the rule settings reaching the rule
(issue 10, item 4). Each test names the removal it catches."""
from __future__ import annotations

import numpy as np
import pytest

from workers import compare, pipeline
from workers.errors import InvalidRequest
from workers.fit import Fit, scalar_names
from workers.settings import AuditSettings, RuleSettings, derive_seed


def _fit(language: str, shapes: dict[str, tuple], reportable=None) -> Fit:
    rng = np.random.default_rng(0)
    draws = {n: rng.normal(size=(2, 50)) for b, s in shapes.items() for n in scalar_names(b, s)}
    return Fit(language, draws, reportable=list(reportable or shapes))


LAZY = _fit("lazyppl", {"mu": (), "beta": (2, 3)})
PYMC = _fit("pymc", {"mu": (), "beta": (2, 3), "z": (4,)})


def test_default_names_are_the_lazyppl_draws_and_the_rest_of_pymc_is_listed():
    names, uncompared = pipeline.compared_names(None, LAZY, PYMC)
    assert names == ["mu"] + [f"beta[{i},{j}]" for i in (1, 2) for j in (1, 2, 3)]
    assert uncompared == ["z"]


def test_a_lazyppl_name_missing_from_pymc_is_an_error_naming_it():
    """catches: dropping the check that each compared name is reportable by PyMC."""
    lazy = _fit("lazyppl", {"mu": (), "sigma": ()})
    with pytest.raises(InvalidRequest, match="'sigma' is not a free random variable") as e:
        pipeline.compared_names(None, lazy, PYMC)
    assert e.value.details["parameter"] == "sigma"


def test_a_name_pymc_computes_but_does_not_report_is_an_error():
    """catches: matching on the draws alone (a PyMC variable that is neither a free RV nor
    a named Deterministic is not reportable, SPEC §2.3)."""
    pymc = _fit("pymc", {"mu": (), "beta": (2, 3)}, reportable=["beta"])
    with pytest.raises(InvalidRequest, match="'mu' is not a free random variable"):
        pipeline.compared_names(None, LAZY, pymc)


@pytest.mark.parametrize("pymc_shape", [(3, 2), (2, 2), (6,)])
def test_a_scalar_count_or_layout_mismatch_is_an_error_naming_it(pymc_shape):
    """catches: comparing only the scalars both sides happen to share."""
    pymc = _fit("pymc", {"mu": (), "beta": pymc_shape})
    with pytest.raises(InvalidRequest, match="'beta' has 6 scalars in the LazyPPL draw but") as e:
        pipeline.compared_names(None, LAZY, pymc)
    assert e.value.details["parameter"] == "beta"


def test_the_requested_subset_is_honoured():
    """catches: ``parameters`` ignored (every LazyPPL name compared)."""
    names, uncompared = pipeline.compared_names(["beta"], LAZY, PYMC)
    assert names == [f"beta[{i},{j}]" for i in (1, 2) for j in (1, 2, 3)]
    assert uncompared == ["mu", "z"]


def test_a_requested_name_the_lazyppl_draw_lacks_is_an_error():
    """catches: a requested name compared although one side does not report it."""
    with pytest.raises(InvalidRequest, match="'z' is not in the LazyPPL program's draw"):
        pipeline.compared_names(["z"], LAZY, PYMC)


def test_requested_names_must_be_base_names():
    """catches: scalar names such as 'beta[1,2]' accepted as a parameters entry."""
    request = pipeline.AuditRequest(name="x", pymc_source="", lazyppl_source="",
                                    scopes={"full": {}}, parameters=["beta[1,2]"])
    with pytest.raises(InvalidRequest, match="base names"):
        pipeline.validate(request)


def _comparison(shift: float, n: int = 4000) -> compare.ScopeComparison:
    rng = np.random.default_rng(1)
    cand = {"mu": rng.normal(shift, 1, (4, n))}
    base = {"mu": rng.normal(0, 1, (4, n))}
    return compare.compare_draws(cand, base, ["mu"], compare.Rule(), labels=("pymc", "reference"))


def test_pymc_disagreeing_with_the_reference_cannot_serve_as_baseline():
    """catches: the scope verdict taken from LazyPPL vs PyMC alone when PyMC fails its
    reference check (SPEC §4)."""
    agree, disagree = _comparison(0.0), _comparison(1.0)
    assert (agree.verdict, disagree.verdict) == ("agree", "disagree")
    verdict, reason = pipeline._scope_decision(agree, disagree)
    assert verdict == "inconclusive" and "cannot serve as baseline" in reason
    assert "LazyPPL vs PyMC: agree" in reason
    assert pipeline._scope_decision(agree, agree) == (agree.verdict, agree.reason)
    # a PyMC fit that disagrees with the reference never turns the scope into disagree
    assert pipeline._scope_decision(disagree, disagree)[0] == "inconclusive"


def test_every_rule_setting_reaches_the_rule():
    """catches: a rule setting (k, delta, band, a gate threshold) dropped on the way from
    the request's settings to the comparison."""
    changed = RuleSettings(k=2.5, delta=0.35, sd_ratio_band=(0.7, 1.4), rhat_max=1.05,
                           ess_bulk_min=123, ess_tail_min=77, max_divergences=2)
    rule = compare.Rule.from_settings(changed)
    assert rule == compare.Rule(k=2.5, delta=0.35, sd_ratio_band=(0.7, 1.4), rhat_max=1.05,
                                ess_bulk_min=123, ess_tail_min=77, max_divergences=2)
    assert compare.Rule.from_settings(RuleSettings()) == compare.Rule()


def test_the_seed_setting_changes_every_derived_seed_and_scopes_get_their_own():
    """catches: a fixed seed, or one seed shared by both sides or by every scope."""
    a, b = AuditSettings(seed=1), AuditSettings(seed=2)
    seeds = {(s.seed, scope, side): derive_seed(s.seed, scope, side)
             for s in (a, b) for scope in ("visible", "full") for side in ("pymc", "lazyppl")}
    assert len(set(seeds.values())) == len(seeds)
    assert derive_seed(1, "full", "pymc") == derive_seed(1, "full", "pymc")
