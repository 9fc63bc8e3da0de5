"""Issue 10, reference audits: one PyMC program against posteriordb's reference draws,
no LazyPPL side (real PyMC in the sandbox, the shipped posteriordb snapshot)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from corpus.loader import load_data, load_reference
from service.cli import main as cli_main
from workers.errors import InvalidRequest
from workers.fit import Fit
from workers.reference_audit import (ReferenceAuditRequest, compared_names,
                                     run_reference_audit)
from workers.settings import AuditSettings

pytestmark = [pytest.mark.integration]

POSTERIOR = "eight_schools-eight_schools_noncentered"
SPEC_PROGRAM = Path(__file__).resolve().parent.parent / "fixtures" / "eight_schools" / "model.py"
FULL_CAUCHY = SPEC_PROGRAM.read_text().replace('pm.HalfCauchy("tau", 5.0)',
                                               'pm.Cauchy("tau", 0.0, 5.0)')
# cheap: the reference has 10 000 draws; 4 × 500 PyMC draws decide eight schools
CHEAP = {"pymc": {"chains": 4, "tune": 500, "draws": 500}}


def _request(source: str, **kw) -> ReferenceAuditRequest:
    return ReferenceAuditRequest(name="eight schools", pymc_source=source, posterior=POSTERIOR,
                                 reference=load_reference(POSTERIOR), data=load_data(POSTERIOR),
                                 settings=AuditSettings.model_validate(CHEAP), **kw)


@pytest.mark.slow
def test_spec_program_agrees_with_the_reference():
    evidence, fits = run_reference_audit(_request(SPEC_PROGRAM.read_text()))
    assert evidence["verdict"] == "agree", evidence["reason"]
    assert evidence["kind"] == "reference" and evidence["reference"] == POSTERIOR
    full = evidence["scopes"]["full"]
    assert sorted(full["compared"]) == sorted(["mu", "tau"] + [f"theta[{i}]" for i in range(1, 9)])
    assert full["uncompared_pymc"] == ["theta_trans"]
    assert full["fits"]["reference"]["sampler"]["source"] == "posteriordb"
    # the rule had the reference as baseline: d in reference SDs, rows re-derivable
    from workers import compare
    ref = load_reference(POSTERIOR)
    pymc = fits[("full", "pymc", full["looks"][-1]["look"])]
    for row in full["comparisons"]:
        again = compare.compare_summaries(row["parameter"],
                                          compare.summarize(pymc.draws[row["parameter"]]),
                                          compare.summarize(ref.draws[row["parameter"]]),
                                          compare.Rule())
        assert again.d == pytest.approx(row["d"], abs=1e-12)


@pytest.mark.slow
def test_full_cauchy_tau_disagrees_naming_tau_through_the_cli(capsys, tmp_path, monkeypatch):
    """`ppl-audit audit --pymc model.py --reference POSTERIOR --json`: exit 0, verdict;
    stored like a reference audit submitted to the API (no LazyPPL program)."""
    import tempfile

    import sqlalchemy as sa

    from service.config import get_settings
    from service.db.base import make_engine, make_session_factory
    from service.db.models import Audit, Comparison

    url = f"sqlite:///{tmp_path / 'cli.sqlite3'}"
    monkeypatch.setenv("PPL_AUDIT_DATABASE_URL", url)
    get_settings.cache_clear()

    with tempfile.TemporaryDirectory() as tmp:
        program, settings = Path(tmp, "model.py"), Path(tmp, "settings.json")
        program.write_text(FULL_CAUCHY)
        settings.write_text(json.dumps(CHEAP))
        code = cli_main(["audit", "--pymc", str(program), "--reference", POSTERIOR,
                         "--settings", str(settings), "--json"])
    assert code == 0
    evidence = json.loads(capsys.readouterr().out)
    assert evidence["verdict"] == "disagree", evidence["reason"]
    bad = [r["parameter"] for r in evidence["scopes"]["full"]["comparisons"]
           if r["verdict"] == "disagree"]
    assert bad == ["tau"]
    get_settings.cache_clear()
    engine = make_engine(url)
    with make_session_factory(engine)() as s:
        audit = s.scalars(sa.select(Audit)).one()
        stored = (str(audit.id), audit.posterior, audit.lazyppl_program.source, audit.verdict)
        rows = s.execute(sa.select(Comparison.pair, Comparison.parameter)
                         .where(Comparison.verdict == "disagree")).all()
    engine.dispose()
    assert stored == (evidence["id"], POSTERIOR, "", "disagree")
    assert [(r.pair, r.parameter) for r in rows] == [("pymc_vs_reference", "tau")]


@pytest.mark.parametrize("argv,word", [
    (["--scope", "visible=x.json"], "the only scope"),
    (["--reference", "no-such-posterior"], "no-such-posterior"),
])
def test_reference_audit_cli_errors_exit_2(argv, word, capsys):
    base = ["audit", "--pymc", str(SPEC_PROGRAM)]
    if "--reference" not in argv:
        base += ["--reference", POSTERIOR]
    assert cli_main(base + argv) == 2
    assert word in capsys.readouterr().err


def test_a_refused_program_is_an_error_audit_before_anything_runs():
    source = SPEC_PROGRAM.read_text().replace("return m", "pm.Potential('p', 0.0)\n    return m")
    evidence, fits = run_reference_audit(_request(source))
    assert evidence["verdict"] == "error" and fits == {}
    assert "pm.Potential" in evidence["reason"]


def _fit(names, reportable, language="pymc"):
    draws = {n: np.zeros((2, 10)) for n in names}
    return Fit(language, draws, reportable=reportable)


def test_compared_names_follow_the_reference():
    ref = _fit(["mu", "theta[1]", "theta[2]"], ["mu", "theta"], "reference")
    ok = _fit(["mu", "theta[1]", "theta[2]", "z"], ["mu", "theta", "z"])
    assert compared_names(None, ref, ok) == (["mu", "theta[1]", "theta[2]"], ["z"])
    assert compared_names(["mu"], ref, ok) == (["mu"], ["theta", "z"])
    with pytest.raises(InvalidRequest, match="not in posteriordb's reference"):
        compared_names(["z"], ref, ok)
    with pytest.raises(InvalidRequest, match="'theta'.*not a free random variable"):
        compared_names(None, ref, _fit(["mu"], ["mu"]))
    with pytest.raises(InvalidRequest, match="2 scalars in the reference but 3"):
        compared_names(None, ref, _fit(["mu", "theta[1]", "theta[2]", "theta[3]"],
                                       ["mu", "theta"]))
