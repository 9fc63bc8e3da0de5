"""Issue 10: `ppl-audit batch posteriordb --database PATH --pymc-from database` on a small
posteriordb-shaped folder (tests/fixtures/posteriordb_mini): one row per posterior with
the reference check (real PyMC in the sandbox)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.cli import main as cli_main

pytestmark = [pytest.mark.integration]

DATABASE = Path(__file__).resolve().parent.parent / "fixtures" / "posteriordb_mini"


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
    assert report["pymc_from"] == "database"


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
    (["--pymc-from", "database"], "go together"),
])
def test_batch_database_errors_exit_2(argv, word, capsys):
    args = ["batch", "posteriordb", *argv]
    if "--pymc-from" not in argv:
        args += ["--pymc-from", "database"]
    assert cli_main(args) == 2
    assert word in capsys.readouterr().err
