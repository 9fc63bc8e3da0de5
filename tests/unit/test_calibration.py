"""Pure parts of the calibration study (benchmarks/calibration.py): no fits here."""
from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("calibration", ROOT / "benchmarks" / "calibration.py")
cal = importlib.util.module_from_spec(_spec)
sys.modules["calibration"] = cal  # dataclasses look their module up while the file runs
_spec.loader.exec_module(cal)


def test_clopper_pearson_upper_for_zero_successes_is_the_closed_form():
    # P(X = 0 | p) = (1 - p)^n = 0.05  =>  p = 1 - 0.05^(1/n): the "rule of three" region
    for n in (10, 40, 100):
        assert cal.clopper_pearson_upper(0, n) == pytest.approx(1 - 0.05 ** (1 / n), rel=1e-9)
    assert cal.clopper_pearson_upper(0, 40) == pytest.approx(0.0722, abs=1e-4)


def test_clopper_pearson_upper_inverts_the_binomial_tail():
    from scipy.stats import binom

    for x, n in ((1, 40), (3, 40), (20, 40), (39, 40)):
        p = cal.clopper_pearson_upper(x, n)
        assert x / n < p < 1
        # at the bound, seeing x or fewer has probability exactly 5 %
        assert binom.cdf(x, n, p) == pytest.approx(0.05, abs=1e-9)
    assert cal.clopper_pearson_upper(40, 40) == 1.0
    with pytest.raises(ValueError):
        cal.clopper_pearson_upper(5, 4)


def test_conjugate_posterior_matches_a_grid_integration():
    y = cal.normal_data()["y"]
    mean, sd = cal.conjugate_posterior(y, cal.M0, cal.S0, cal.SIGMA)
    grid = np.linspace(mean - 12 * sd, mean + 12 * sd, 200_001)
    logp = (-0.5 * ((grid - cal.M0) / cal.S0) ** 2
            - 0.5 * (((np.asarray(y)[:, None] - grid[None, :]) / cal.SIGMA) ** 2).sum(axis=0))
    w = np.exp(logp - logp.max())
    w /= w.sum()
    grid_mean = float((w * grid).sum())
    assert grid_mean == pytest.approx(mean, abs=1e-8)
    assert math.sqrt(float((w * (grid - grid_mean) ** 2).sum())) == pytest.approx(sd, rel=1e-6)


@pytest.mark.parametrize("d", [0.3, -0.5, 1.0])
def test_a_shift_moves_the_mean_by_exactly_d_baseline_sds(d):
    y = cal.normal_data()["y"]
    truth = cal.effect_truth(y, cal.shift_for(d, y), 1.0)
    assert truth["d"] == pytest.approx(d, abs=1e-12)
    assert truth["r"] == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("r", [1.4, 0.7])
def test_a_scale_multiplies_the_sd_by_exactly_r_and_keeps_the_mean(r):
    y = cal.normal_data()["y"]
    truth = cal.effect_truth(y, 0.0, r)
    assert truth["r"] == pytest.approx(r, abs=1e-12)
    assert truth["d"] == pytest.approx(0.0, abs=1e-12)
    # only scaling the noise (not the prior) would move the mean: the pair's d = 0 needs both
    base_mean, base_sd = cal.conjugate_posterior(y, cal.M0, cal.S0, cal.SIGMA)
    moved, _ = cal.conjugate_posterior(y, cal.M0, cal.S0, cal.SIGMA * r)
    assert abs(moved - base_mean) / base_sd > 0.01


def test_effect_pairs_state_the_analytic_truth_and_the_source_carries_the_shift():
    builders = cal.pairs()
    for name, d, r in (("effect_d03", 0.3, 1.0), ("effect_d05", -0.5, 1.0), ("effect_d10", 1.0, 1.0),
                       ("effect_r14", 0.0, 1.4), ("effect_r07", 0.0, 0.7)):
        pair = builders[name]()
        assert pair.kind == "effect" and pair.parameters == ["mu", "nu"]
        assert pair.true_d == pytest.approx(d, abs=1e-9) and pair.true_r == pytest.approx(r, abs=1e-12)
        shift = cal.shift_for(d, pair.data["y"])
        assert f"shift = {float(shift)!r} :: Double" in pair.lazyppl_source
        assert f"scale = {float(r)!r} :: Double" in pair.lazyppl_source
        assert "{" not in pair.lazyppl_source  # every template field filled


def _runs(verdicts, seconds=(5.0,)):
    return [{"seed": i, "verdict": v, "seconds": seconds[i % len(seconds)], "looks": 1}
            for i, v in enumerate(verdicts)]


def test_pair_record_counts_verdicts_and_bounds_the_correct_pairs_rates():
    row = cal.pair_record("x", "correct", 0.0, 1.0, _runs(["agree"] * 38 + ["inconclusive"] * 2,
                                                          seconds=(4.0, 6.0)))
    assert (row["seeds"], row["agree"], row["inconclusive"], row["disagree"]) == (40, 38, 2, 0)
    assert row["seconds_median"] == 5.0
    assert row["disagree_rate_upper95"] == pytest.approx(cal.clopper_pearson_upper(0, 40), abs=1e-4)
    assert row["inconclusive_rate_upper95"] == pytest.approx(cal.clopper_pearson_upper(2, 40), abs=1e-4)
    effect = cal.pair_record("y", "effect", 0.5, 1.0, _runs(["disagree"] * 3))
    assert "disagree_rate_upper95" not in effect and effect["disagree"] == 3


def test_report_has_the_shape_issue_14_asks_for_and_is_strict_json():
    rows = [cal.pair_record("a", "correct", 0.0, 1.0, _runs(["agree"] * 3)),
            cal.pair_record("b", "effect", 1.0, 1.0, _runs(["disagree", "inconclusive"]))]
    rows[0]["load"], rows[1]["load"] = {"start": 1.0, "end": 2.5}, {"start": 2.0, "end": 1.5}
    machine = cal.machine_info(rows, True)
    assert (machine["load_min"], machine["load_max"], machine["cores"]) == (1.0, 2.5, cal.os.cpu_count())
    rep = json.loads(json.dumps(cal.report(rows, "abc123", machine, {"rule": {}}), allow_nan=False))
    assert {"pairs", "commit", "machine"} <= set(rep)
    for p in rep["pairs"]:
        assert {"name", "kind", "true_d", "true_r", "seeds", "agree", "inconclusive", "disagree",
                "seconds_median"} <= set(p)
        assert p["kind"] in ("correct", "effect")
        assert p["agree"] + p["inconclusive"] + p["disagree"] + p["error"] == p["seeds"]
    table = cal.markdown(rep).splitlines()
    assert len([line for line in table if line.startswith("| a ") or line.startswith("| b ")]) == 2
    assert "load average (1 min) 1.00–2.50" in table[-1]
