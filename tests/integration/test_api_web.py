"""Server-rendered pages through the app (fast, no browser): content, plots, filters,
live refresh. The Chromium tests in tests/e2e render them from a real worker's results."""
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from service import steps
from service.db import audits as repo
from service.plots import Row, band_verdict, forest_svg
from workers import compare, pipeline
from workers.fit import Fit
from workers.settings import AuditSettings

pytestmark = pytest.mark.integration
NAMES = ["mu", "tau", "theta[1]", "theta[2]"]


def _fit(language, seed, scale=1.0):
    rng = np.random.default_rng(seed)
    return Fit(language, {n: rng.normal(1.0, scale, (4, 1000)) for n in NAMES}, reportable=NAMES)


@pytest.fixture(scope="module")
def finished_audit(db_sessions):
    """A stored audit whose LazyPPL SDs are √2 too wide (a classic variance-for-SD slip)."""
    with db_sessions.begin() as s:
        a = repo.create_audit(s, name="web page audit", pymc_source="def model(data): pass",
                              lazyppl_source="module Model (model) where",
                              scopes={"visible": {"n": 1}}, parameters=None,
                              settings=AuditSettings().model_dump(mode="json"))
        audit_id = a.id
    job = steps.claim_scope(db_sessions, audit_id, "visible")
    lazy, pymc = _fit("lazyppl", 1, scale=2 ** 0.5), _fit("pymc", 2)
    main = compare.compare_draws(lazy.draws, pymc.draws, NAMES, compare.Rule(),
                                 labels=("lazyppl", "pymc"))
    ev = pipeline.jsonable({"scope": "visible", **pipeline.comparison_evidence(main, ("lazyppl", "pymc")),
                            "looks": [{"look": 1, "verdict": main.verdict}], "seeds": {"pymc": 1, "lazyppl": 2}})
    steps.save_scope(db_sessions, job, pipeline.ScopeOutcome(ev, {("pymc", 1): pymc, ("lazyppl", 1): lazy}))
    steps.finish(db_sessions, audit_id)
    return str(audit_id)


def test_audit_page_shows_verdict_plots_rows_hints_and_provenance(client, finished_audit):
    html = client.get(f"/audits/{finished_audit}").text
    assert "web page audit" in html and 'class="badge big v-disagree"' in html
    assert html.count('class="forest"') == 2
    for name in NAMES:
        assert f'<td class="mono">{name}' in html
    assert "variance used where an SD was meant" in html
    assert "Provenance" in html and "sha256" in html and "seeds pymc 1, lazyppl 2" in html
    assert f"/api/v1/audits/{finished_audit}/fits/visible/lazyppl.nc" in html
    assert 'http-equiv="refresh"' not in html  # finished: no live refresh


def test_list_page_filters_and_badges(client, finished_audit):
    html = client.get("/", params={"verdict": "disagree"}).text
    assert "web page audit" in html and 'class="badge v-disagree"' in html
    assert "web page audit" not in client.get("/", params={"verdict": "agree"}).text
    assert client.get("/", params={"verdict": "bogus"}).status_code == 422


def test_queued_audit_pages_refresh_themselves(client, db_sessions):
    with db_sessions.begin() as s:
        a = repo.create_audit(s, name="waiting", pymc_source="p2", lazyppl_source="l2",
                              scopes={"s": {}}, parameters=None, settings={})
    html = client.get(f"/audits/{a.id}").text
    assert 'http-equiv="refresh"' in html and "waiting for a worker" in html


def test_audit_page_shows_the_pymc_profile(client, db_sessions, finished_audit):
    """Issue 10: the profile the PyMC program was verified against is on the page."""
    assert 'profile <span class="profile">strict</span>' in client.get(
        f"/audits/{finished_audit}").text
    settings = AuditSettings.model_validate({"pymc": {"profile": "standard"}})
    with db_sessions.begin() as s:
        a = repo.create_audit(s, name="standard", pymc_source="p3", lazyppl_source="l3",
                              scopes={"s": {}}, parameters=None,
                              settings=settings.model_dump(mode="json"))
    assert 'profile <span class="profile">standard</span>' in client.get(
        f"/audits/{a.id}").text


def test_netcdf_download_reads_back_with_arviz(client, finished_audit, tmp_path):
    import arviz as az

    r = client.get(f"/api/v1/audits/{finished_audit}/fits/visible/pymc.nc")
    assert r.status_code == 200 and r.headers["content-type"] == "application/x-netcdf"
    path = tmp_path / "pymc.nc"
    path.write_bytes(r.content)
    idata = az.from_netcdf(path)
    assert idata.posterior["theta"].shape == (4, 1000, 2)
    assert idata.posterior["mu"].shape == (4, 1000)
    assert client.get(f"/api/v1/audits/{finished_audit}/fits/full/pymc.nc").status_code == 404


def test_forest_svg_is_well_formed_and_log_axis_is_symmetric():
    svg = forest_svg([Row("a", 1.25, 1.1, 1.4, "inconclusive"), Row("b", 0.8, 0.7, 0.9, "agree")],
                     band=(0.8, 1.25), log=True, reference=1.0, title="r")
    root = ET.fromstring(svg)
    circles = root.findall("{http://www.w3.org/2000/svg}circle")
    assert len(circles) == 2
    ref = next(l for l in root.findall("{http://www.w3.org/2000/svg}line")
               if l.get("stroke-dasharray"))
    x1, x08, x125 = float(ref.get("x1")), float(circles[1].get("cx")), float(circles[0].get("cx"))
    assert abs((x125 - x1) - (x1 - x08)) < 0.2  # 1.25 and 0.8 = 1/1.25 equidistant from 1
    assert band_verdict([0.9, 1.1], (0.8, 1.25)) == "agree"
    assert band_verdict([1.3, 1.5], (0.8, 1.25)) == "disagree"
    assert band_verdict([1.1, 1.5], (0.8, 1.25)) == "inconclusive"
