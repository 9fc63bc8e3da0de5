"""SPEC §4 through the real pipeline (real PyMC and GHC in the sandbox, the small matrix
model of tests/fixtures/matrix, cheap settings): a PyMC fit that disagrees with the
reference cannot serve as baseline, and the corpus batch row says so; the wall budget
ends an undecided scope as budget spent (issue 10, item 4)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from service.local import batch_entry
from workers import pipeline
from workers.fit import Fit
from workers.settings import AuditSettings

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "matrix"
DATA = json.loads((FIX / "data.json").read_text())
CHEAP = {"pymc": {"chains": 2, "tune": 300, "draws": 400},
         "lazyppl": {"chains": 2, "warmup": 2000, "draws": 200, "thin": 10},
         "rule": {"ess_bulk_min": 50, "ess_tail_min": 50, "rhat_max": 1.05, "delta": 0.6,
                  "sd_ratio_band": [0.6, 1.6]},
         "budget": {"max_looks": 1}}


def _scope(settings: dict, reference: Fit | None = None) -> dict:
    out = pipeline.run_scope((FIX / "model.py").read_text(), (FIX / "Model.hs").read_text(),
                             "full", DATA, ["mu"], AuditSettings.model_validate(settings),
                             reference)
    return out.evidence


def _reference(mu_mean: float) -> Fit:
    """Reference draws of mu (10 chains x 1000, like posteriordb's) centred on ``mu_mean``;
    the exact posterior is N(mean(y) * 800/801, 1/sqrt(8.0125))."""
    rng = np.random.default_rng(3)
    sd = 1 / np.sqrt(len(DATA["y"]) + 1 / 100)
    return Fit("reference", {"mu": rng.normal(mu_mean, sd, (10, 1000))})


def test_a_pymc_fit_off_the_reference_cannot_serve_as_baseline_and_the_batch_row_says_so():
    """catches: the scope verdict taken from LazyPPL vs PyMC when PyMC disagrees with the
    reference, and the batch row hiding which check failed."""
    ev = _scope(CHEAP, _reference(np.mean(DATA["y"]) + 1.0))
    assert ev["lazyppl_vs_pymc"] == "agree", ev["reason"]
    assert ev["reference"]["pymc_vs_reference"]["verdict"] == "disagree"
    assert ev["verdict"] == "inconclusive" and "cannot serve as baseline" in ev["reason"]
    audit = pipeline.finish_audit({"name": "matrix"}, {"full": ev}, AuditSettings())
    row = batch_entry(audit, 1.0, False)
    assert row["verdict"] == "inconclusive" and "cannot serve as baseline" in row["reason"]
    assert row["reference"] == {"pymc_vs_reference": "disagree",
                                "lazyppl_vs_reference": "disagree", "lazyppl_vs_pymc": "agree"}


def test_the_wall_budget_ends_an_undecided_scope_as_budget_spent():
    """catches: further looks taken past ``budget.wall_seconds`` (max_looks alone would
    allow four): too few draws for the default ESS gates, one second of budget."""
    ev = _scope({**CHEAP, "rule": {}, "lazyppl": {**CHEAP["lazyppl"], "draws": 60},
                 "budget": {"max_looks": 4, "wall_seconds": 1}})
    assert ev["verdict"] == "inconclusive"
    assert len(ev["looks"]) == 1 and ev["looks"][0]["next_draws"]["lazyppl"] > 60
    assert "budget spent" in ev["reason"] and "wall_seconds" in ev["reason"], ev["reason"]
