"""Issue 10: `ppl-audit batch posteriordb --database PATH [--pymc-from database]
[--lazyppl-from translations|none]` on a small posteriordb-shaped folder
(tests/fixtures/posteriordb_mini): one row per posterior with the reference check (real
PyMC and LazyPPL in the sandbox), each audit stored."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.cli import main as cli_main
from service.config import get_settings

pytestmark = [pytest.mark.integration]

DATABASE = Path(__file__).resolve().parent.parent / "fixtures" / "posteriordb_mini"


@pytest.fixture(autouse=True)
def local_db(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'batch.sqlite3'}"
    monkeypatch.setenv("PPL_AUDIT_DATABASE_URL", url)
    get_settings.cache_clear()
    yield url
    get_settings.cache_clear()


def _stored(url: str) -> dict:
    """{audit id: (posterior, LazyPPL source, PyMC source, {(scope, language)})} of the
    local database."""
    import sqlalchemy as sa

    from service.db.base import make_engine, make_session_factory
    from service.db.models import Audit, FitRecord

    engine = make_engine(url)
    try:
        with make_session_factory(engine)() as s:
            fits: dict[str, set] = {}
            for f in s.execute(sa.select(FitRecord.audit_id, FitRecord.scope, FitRecord.language)):
                fits.setdefault(str(f.audit_id), set()).add((f.scope, f.language))
            return {str(a.id): (a.posterior, a.lazyppl_program.source, a.pymc_program.source,
                                fits.get(str(a.id), set()))
                    for a in s.scalars(sa.select(Audit))}
    finally:
        engine.dispose()


def _batch(tmp_path, capsys, *extra):
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"pymc": {"chains": 4, "tune": 500, "draws": 500}}))
    code = cli_main(["batch", "posteriordb", "--database", str(DATABASE), "--pymc-from",
                     "database", "--settings", str(settings), "--json", *extra])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out)


@pytest.mark.slow
def test_each_posteriors_own_pymc_program_against_its_reference(tmp_path, capsys):
    report = _batch(tmp_path, capsys, "--profile", "standard")
    rows = {row["posterior"]: row for row in report["posteriors"]}
    assert sorted(rows) == ["arma-arma11", "eight_schools-eight_schools_centered",
                            "eight_schools-eight_schools_noncentered"]
    for name in ("arma-arma11", "eight_schools-eight_schools_noncentered"):
        assert rows[name]["verdict"] == "agree", rows[name]["reason"]
        assert rows[name]["reference"]["pymc_vs_reference"] == "agree"
    centered = rows["eight_schools-eight_schools_centered"]
    assert centered["verdict"] == "error" and "no PyMC implementation" in centered["reason"]
    assert report["summary"]["posteriors"]["agree"] == 2 and report["summary"]["total"] == 3
    assert report["pymc_from"] == "database" and report["lazyppl_from"] == "none"
    stored = _stored(str(get_settings().database_url))
    for name in ("arma-arma11", "eight_schools-eight_schools_noncentered"):
        posterior, lazyppl, _, fits = stored[rows[name]["audit_id"]]
        assert (posterior, lazyppl) == (name, "")  # stored as a reference audit
        # the user's reference draws are kept: the shipped snapshot cannot re-derive them
        assert ("full", "reference") in fits and ("full", "pymc") in fits


@pytest.mark.slow
def test_the_databases_pymc_program_against_our_lazyppl_translation(tmp_path, capsys):
    """`--pymc-from database --lazyppl-from translations`: a pair audit (both scopes) of
    the database's PyMC program and our LazyPPL translation, both checked against the
    database's reference; a posterior with no PyMC program there is an error row."""
    report = _batch(tmp_path, capsys, "--lazyppl-from", "translations", "--posteriors",
                    "eight_schools-eight_schools_noncentered,eight_schools-eight_schools_centered")
    rows = {row["posterior"]: row for row in report["posteriors"]}
    pair = rows["eight_schools-eight_schools_noncentered"]
    assert pair["verdict"] == "agree", pair["reason"]
    assert set(pair["scopes"]) == {"visible", "full"}
    assert pair["reference"]["pymc_vs_reference"] == "agree"
    assert pair["reference"]["lazyppl_vs_reference"] == "agree"
    assert rows["eight_schools-eight_schools_centered"]["verdict"] == "error"
    posterior, lazyppl, source, fits = _stored(str(get_settings().database_url))[pair["audit_id"]]
    program = (DATABASE / "posterior_database" / "models" / "pymc"
               / "eight_schools_noncentered.py").read_text()
    assert posterior == "eight_schools-eight_schools_noncentered" and "LazyPPL" in lazyppl
    assert ("full", "reference") in fits and ("visible", "lazyppl") in fits
    assert report["pymc_from"] == "database" and report["lazyppl_from"] == "translations"
    assert source == program  # the database's program, not our translation


@pytest.mark.slow
def test_our_pymc_translation_against_the_databases_reference_alone(tmp_path, capsys):
    """`--database PATH --lazyppl-from none`: our PyMC translation against the user's
    reference draws (no LazyPPL side); a posterior we have not translated is refused."""
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"pymc": {"chains": 4, "tune": 500, "draws": 500}}))
    code = cli_main(["batch", "posteriordb", "--database", str(DATABASE), "--lazyppl-from",
                     "none", "--posteriors", "eight_schools-eight_schools_noncentered",
                     "--settings", str(settings), "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    report = json.loads(captured.out)
    (row,) = report["posteriors"]
    assert row["kind"] == "reference" and row["verdict"] == "agree", row["reason"]
    assert report["pymc_from"] == "translations" and report["lazyppl_from"] == "none"
    posterior, lazyppl, _, fits = _stored(str(get_settings().database_url))[row["audit_id"]]
    assert lazyppl == "" and fits == {("full", "pymc"), ("full", "reference")}


def test_under_strict_the_scan_program_is_an_error_row_naming_pytensor(tmp_path, capsys):
    """No fit runs: arma11's program is refused, eight_schools_centered has none."""
    report = _batch(tmp_path, capsys, "--posteriors",
                    "arma-arma11,eight_schools-eight_schools_centered")
    rows = {row["posterior"]: row for row in report["posteriors"]}
    assert rows["arma-arma11"]["verdict"] == "error"
    assert "pytensor" in rows["arma-arma11"]["reason"]
    assert "standard" in rows["arma-arma11"]["reason"]


@pytest.mark.parametrize("argv,word", [
    (["--database", "/nonexistent"], "not a posteriordb checkout"),
    (["--database", str(DATABASE), "--posteriors", "nope"], "not in the database"),
    (["--pymc-from", "database"], "needs --database PATH"),
])
def test_batch_database_errors_exit_2(argv, word, capsys):
    """--pymc-from database needs a database; names must be in it."""
    args = ["batch", "posteriordb", *argv]
    if "--pymc-from" not in argv:
        args += ["--pymc-from", "database"]
    assert cli_main(args) == 2
    assert word in capsys.readouterr().err
