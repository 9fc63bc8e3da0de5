"""End to end with real PyMC and the real LazyPPL bridge (issue 5 acceptance)."""
from pathlib import Path
import json
import math

import pytest

from workers import compare
from workers.pipeline import AuditRequest, run_audit
from workers.settings import AuditSettings

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "eight_schools"


def _request(lazyppl_file="Model.hs", settings=None, **kw):
    return AuditRequest(
        name="eight schools",
        pymc_source=(FIX / "model.py").read_text(),
        lazyppl_source=(FIX / lazyppl_file).read_text(),
        scopes={"visible": json.loads((FIX / "visible.json").read_text()),
                "full": json.loads((FIX / "full.json").read_text())},
        settings=settings or AuditSettings(), **kw)


@pytest.fixture(scope="module")
def agreeing():
    return run_audit(_request())


def test_spec_pair_agrees_in_both_scopes(agreeing):
    evidence, _ = agreeing
    assert evidence["scope_verdicts"] == {"visible": "agree", "full": "agree"}, evidence["reason"]
    assert evidence["verdict"] == "agree"
    full = evidence["scopes"]["full"]
    assert full["compared"] == ["mu", "tau"] + [f"theta[{i}]" for i in range(1, 9)]
    assert full["uncompared_pymc"] == ["theta_trans"]
    assert len(evidence["scopes"]["visible"]["compared"]) == 2 + 6


def test_every_number_is_rederivable_from_the_stored_draws(agreeing):
    evidence, fits = agreeing
    rule = compare.Rule()
    look = evidence["scopes"]["full"]["looks"][-1]["look"]
    lazy, pymc = fits[("full", "lazyppl", look)], fits[("full", "pymc", look)]
    for row in evidence["scopes"]["full"]["comparisons"]:
        name = row["parameter"]
        again = compare.compare_summaries(name, compare.summarize(lazy.draws[name]),
                                          compare.summarize(pymc.draws[name]), rule)
        assert again.d == pytest.approx(row["d"], abs=1e-12)
        assert list(again.r_interval) == pytest.approx(row["R"], abs=1e-12)
        assert again.verdict == row["verdict"]


def test_full_cauchy_on_tau_disagrees_and_names_tau():
    evidence, _ = run_audit(_request("ModelFullCauchy.hs"))
    assert evidence["verdict"] == "disagree", evidence["reason"]
    bad = {row["parameter"] for sc in evidence["scopes"].values()
           for row in sc["comparisons"] if row["verdict"] == "disagree"}
    assert "tau" in bad
    assert "tau" in evidence["reason"]
    tau_rows = [row for sc in evidence["scopes"].values() for row in sc["comparisons"]
                if row["parameter"] == "tau" and row["verdict"] == "disagree"]
    assert any("half" in h for row in tau_rows for h in row["hints"])


def test_tiny_budget_is_inconclusive_and_says_why():
    tiny = AuditSettings.model_validate({
        "pymc": {"tune": 100, "draws": 60, "chains": 2},
        "lazyppl": {"warmup": 200, "draws": 60, "thin": 1, "chains": 2},
        "budget": {"max_looks": 1},
    })
    evidence, _ = run_audit(_request(settings=tiny))
    assert evidence["verdict"] == "inconclusive"
    for scope in evidence["scopes"].values():
        assert scope["verdict"] == "inconclusive"
        assert "failed its gates" in scope["reason"] and "ESS of" in scope["reason"]
        assert len(scope["looks"]) == 1  # max_looks = 1: no second look was taken


def test_another_look_refits_the_fits_the_projection_names():
    """LazyPPL is run far too short (fails its gates), PyMC is not: the first look
    diagnoses slow mixing, projects the draws that would decide the scope (issue 14:
    LazyPPL's for its gates and intervals; PyMC's too where its own Monte Carlo error
    alone keeps an interval undecided) and the second look refits exactly the projected
    sides with those draws, keeping any other fit."""
    short = AuditSettings.model_validate({
        "lazyppl": {"warmup": 2000, "draws": 200, "thin": 4},
        "budget": {"max_looks": 2},
    })
    request = _request(settings=short)
    request = AuditRequest(**{**request.__dict__, "scopes": {"full": request.scopes["full"]}})
    evidence, fits = run_audit(request)
    looks = evidence["scopes"]["full"]["looks"]
    assert "lazyppl failed its gates" in looks[0]["reason"] and "pymc failed" not in looks[0]["reason"]
    assert looks[0]["refitted"] == ["pymc", "lazyppl"]
    assert looks[0]["diagnosis"]["lazyppl"]["kind"] == "slow_mixing"
    projection = looks[0]["projection"]
    assert "lazyppl" in projection
    start = {"pymc": 1000, "lazyppl": 200}
    wanted = looks[0]["next_draws"]
    for side in ("pymc", "lazyppl"):
        if side in projection:
            # the binding requirements, largest first: gates with margin, undecided intervals
            assert projection[side]["reasons"]
            assert wanted[side] == math.ceil(start[side] * projection[side]["factor"]) > start[side]
        else:
            assert wanted[side] == start[side]
            assert fits[("full", side, 2)] is fits[("full", side, 1)]
    assert len(looks) == 2 and looks[1]["refitted"] == [s for s in ("pymc", "lazyppl") if s in projection]
    assert (looks[1]["pymc_draws"], looks[1]["lazyppl_draws"]) == (wanted["pymc"], wanted["lazyppl"])
    assert fits[("full", "lazyppl", 2)].n_draws == wanted["lazyppl"]
    # the second look continued LazyPPL's chains (issue 11): look 1's draws, then what a
    # refit of the new draws (same seed, same budget draws) samples after them
    assert looks[1]["lazyppl_continued_from"] == start["lazyppl"]
    later = fits[("full", "lazyppl", 2)]
    assert later.sampler["continued_from"] == start["lazyppl"]
    from haskell_bridge import fit_lazyppl
    from sandbox import Limits

    refit = fit_lazyppl(request.lazyppl_source, request.scopes["full"], chains=4, warmup=2000,
                        draws=wanted["lazyppl"], thin=4, kernel="default",
                        seed=evidence["scopes"]["full"]["seeds"]["lazyppl"],
                        budget_draws=start["lazyppl"],
                        limits=Limits(cpu_seconds=300, memory_mb=2048, wall_seconds=300))
    for name, values in refit.draws.items():
        assert (later.draws[name] == values).all(), name
        assert (later.draws[name][:, :start["lazyppl"]]
                == fits[("full", "lazyppl", 1)].draws[name]).all(), name


def test_without_bubblewrap_the_audit_ends_error_and_nothing_runs(monkeypatch, tmp_path):
    """Fail closed: no OS sandbox, no untrusted program; the verdict says why."""
    monkeypatch.setenv("PPL_AUDIT_BWRAP", str(tmp_path / "no-such-bwrap"))
    evidence, fits = run_audit(_request())
    assert evidence["verdict"] == "error" and not fits
    for scope in evidence["scopes"].values():
        assert scope["verdict"] == "error" and "bubblewrap" in scope["reason"]


def test_evidence_records_the_sandbox(agreeing):
    evidence, _ = agreeing
    assert evidence["sandbox"] == "bwrap"
    for side in evidence["scopes"]["full"]["fits"].values():
        assert side["stats"].get("sandbox", side["stats"].get("process", {}).get("sandbox")) == "bwrap"
