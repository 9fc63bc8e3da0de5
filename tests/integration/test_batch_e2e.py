"""A posteriordb batch of three small posteriors, end to end, locally (issue 4 acceptance)."""
import pytest
from rich.console import Console

from service.config import get_settings
from service.local import run_batch
from workers.settings import AuditSettings

pytestmark = [pytest.mark.integration, pytest.mark.slow]

POSTERIORS = ["eight_schools-eight_schools_noncentered", "kidiq-kidscore_momhs",
              "mesquite-logmesquite_logvolume"]


@pytest.fixture()
def local_db(tmp_path, monkeypatch):
    monkeypatch.setenv("PPL_AUDIT_DATABASE_URL", f"sqlite:///{tmp_path / 'batch.sqlite3'}")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def test_batch_of_three_reports_and_resumes(local_db):
    console = Console(stderr=True)
    report = run_batch(POSTERIORS, AuditSettings(), console=console)
    rows = {e["posterior"]: e for e in report["posteriors"]}
    assert list(rows) == POSTERIORS
    for name, e in rows.items():
        assert e["verdict"] == "agree", f"{name}: {e['reason']}"
        assert set(e["scopes"]) == {"visible", "full"}
        assert e["reference"] == {"pymc_vs_reference": "agree", "lazyppl_vs_reference": "agree",
                                  "lazyppl_vs_pymc": "agree"}
        assert e["audit_id"] and not e["reused"] and e["seconds"] > 0
    s = report["summary"]
    assert s["total"] == 3 and s["posteriors"]["agree"] == 3
    assert s["scopes"]["agree"] == 6
    # eight schools: 2 + 8 scalars in full, 2 + 7 in visible (⌈0.8 · 8⌉ schools); each
    # regression: beta[1], beta[2] and sigma in both scopes
    assert s["abs_d"]["count"] == 10 + 9 + 2 * 3 + 2 * 3
    assert s["abs_d"]["max"] < 0.2 and s["abs_d"]["above_1"] == 0

    again = run_batch(POSTERIORS, AuditSettings(), console=console)
    assert all(e["reused"] for e in again["posteriors"])
    assert again["summary"] == report["summary"]
