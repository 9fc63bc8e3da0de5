"""What a user sees (issue 10, item 5): on an audit page, a density overlay for each
parameter that disagrees or is inconclusive, drawn on the server from the stored draws
(and posteriordb's reference draws on a posterior's ``full`` scope)."""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from service import steps
from service.db import audits as repo
from workers import compare, pipeline
from workers.fit import Fit
from workers.settings import AuditSettings

pytestmark = pytest.mark.integration
SVG = re.compile(r'<svg[^>]*class="density".*?</svg>', re.S)
NS = "{http://www.w3.org/2000/svg}"
EIGHT = "eight_schools-eight_schools_noncentered"


def _stored_audit(db_sessions, scope: str, lazy: dict, pymc: dict, posterior=None) -> str:
    names = list(lazy)
    with db_sessions.begin() as s:
        a = repo.create_audit(s, name="densities", pymc_source="def model(data): pass",
                              lazyppl_source="module Model (model) where",
                              scopes={scope: {"n": 1}}, parameters=None, posterior=posterior,
                              settings=AuditSettings().model_dump(mode="json"))
        audit_id = a.id
    job = steps.claim_scope(db_sessions, audit_id, scope)
    lf, pf = Fit("lazyppl", lazy, reportable=names), Fit("pymc", pymc, reportable=names)
    main = compare.compare_draws(lf.draws, pf.draws, names, compare.Rule(),
                                 labels=("lazyppl", "pymc"))
    ev = pipeline.jsonable({"scope": scope, **pipeline.comparison_evidence(main, ("lazyppl", "pymc")),
                            "looks": [{"look": 1, "verdict": main.verdict}]})
    steps.save_scope(db_sessions, job, pipeline.ScopeOutcome(ev, {("pymc", 1): pf, ("lazyppl", 1): lf}))
    steps.finish(db_sessions, audit_id)
    return str(audit_id)


def _curves(svg: str) -> dict[str, float]:
    """{side label: x (pixels) of the curve's highest point}."""
    root = ET.fromstring(svg)
    out = {}
    for line in root.iter(f"{NS}polyline"):
        pts = [tuple(map(float, p.split(","))) for p in line.get("points").split()]
        out[line.find(f"{NS}title").text] = min(pts, key=lambda p: p[1])[0]
    return out


def test_only_parameters_that_do_not_agree_get_an_overlay_from_the_stored_draws(client, db_sessions):
    """catches: no overlays, overlays for agreeing parameters, or curves not drawn from
    the stored draws (the shifted side must peak to the right)."""
    rng = np.random.default_rng(5)
    pymc = {"a": rng.normal(0, 1, (4, 1000)), "b": rng.normal(0, 1, (4, 1000))}
    lazy = {"a": rng.normal(0, 1, (4, 1000)), "b": rng.normal(1.5, 1, (4, 1000))}
    audit_id = _stored_audit(db_sessions, "visible", lazy, pymc)
    html = client.get(f"/audits/{audit_id}").text
    svgs = SVG.findall(html)
    assert len(svgs) == 1 and ">b <tspan" in svgs[0] and "(disagree)" in svgs[0]
    peaks = _curves(svgs[0])
    assert set(peaks) == {"LazyPPL", "PyMC"}
    assert peaks["LazyPPL"] > peaks["PyMC"] + 50  # 1.5 SD to the right on a ~340 px axis
    assert "Densities of the parameters that do not agree" in html


def test_a_posteriors_full_scope_adds_the_reference_curve(client, db_sessions):
    """catches: the reference draws left out of the overlay when the audit has them."""
    from corpus.loader import load_reference

    ref = load_reference(EIGHT).draws
    pymc = {"mu": ref["mu"][:4], "tau": ref["tau"][:4]}
    lazy = {"mu": ref["mu"][4:8], "tau": 2.0 * ref["tau"][4:8]}  # tau twice too wide
    audit_id = _stored_audit(db_sessions, "full", lazy, pymc, posterior=EIGHT)
    svgs = SVG.findall(client.get(f"/audits/{audit_id}").text)
    tau = [s for s in svgs if ">tau <tspan" in s]
    assert len(tau) == 1 and not any(">mu <tspan" in s for s in svgs)
    assert set(_curves(tau[0])) == {"LazyPPL", "PyMC", "posteriordb reference"}
