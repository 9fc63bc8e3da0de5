"""Reference audits (issue 10): one PyMC program against posteriordb's reference draws.

No LazyPPL side. The SPEC §4 rule with the reference as the baseline: for each scalar θ,
d = (m_PyMC − m_ref) / s_ref and r = s_PyMC / s_ref, their Monte Carlo intervals from both
sides' MCSEs (the reference's own, computed from its draws as ArviZ does), the same
gates (the reference's posteriordb divergence count counts against it). The data is the
one the reference was computed on (scope ``full``); a program inconclusive only for lack
of draws is refitted with more (``budget``), as in an audit. The evidence has the shape
of an audit's, with ``kind: "reference"`` and the fits ``pymc`` and ``reference``.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from workers import compare, pipeline
from workers.errors import AuditError, InvalidRequest
from workers.fit import Fit, base_name
from workers.pipeline import (Progress, _OwnSession, _extendable, _fit_pymc, _limits, _quiet,
                              comparison_evidence, data_hash, error_audit, finish_audit,
                              fit_meta,
                              jsonable, sha256_text)
from workers.settings import AuditSettings, derive_seed

SCOPE = "full"
LABELS = ("pymc", "reference")


@dataclass
class ReferenceAuditRequest:
    """``reference`` holds posteriordb's draws of posterior ``posterior``; ``data`` the
    data they were computed on."""

    name: str
    pymc_source: str
    posterior: str
    reference: Fit
    data: dict
    parameters: list[str] | None = None
    settings: AuditSettings = field(default_factory=AuditSettings)


def compared_names(parameters: list[str] | None, reference: Fit, pymc: Fit
                   ) -> tuple[list[str], list[str]]:
    """Scalar names to compare and the PyMC base names left uncompared (SPEC §2.3, with
    the reference's draws in the place of the LazyPPL draw)."""
    return pipeline.compared_names(parameters, reference, pymc,
                                   other_draw="posteriordb's reference draws",
                                   other_short="the reference")


def validate(request: ReferenceAuditRequest) -> None:
    from workers.pymc_runner import verify
    from workers.pymc_runner.profile import get as get_profile

    if not isinstance(request.data, dict):
        raise InvalidRequest("the data of scope 'full' must be a JSON object of data fields")
    for p in request.parameters or []:
        if base_name(p) != p:
            raise InvalidRequest(f"parameters lists base names such as 'theta', not {p!r}")
    verify(request.pymc_source, get_profile(request.settings.pymc.profile))


def run_reference_scope(request: ReferenceAuditRequest, progress: Progress = _quiet,
                        pymc_session=None) -> tuple[dict, dict[int, Fit]]:
    """Fit the PyMC program on the reference's data and compare; more looks while the
    answer is inconclusive for lack of PyMC draws and the budget lasts (every fit in one
    PyMC session: imported and compiled once)."""
    with _OwnSession(pymc_session, request.settings) as session:
        return _run_reference_scope(session, request, progress)


def _run_reference_scope(session, request: ReferenceAuditRequest, progress: Progress
                         ) -> tuple[dict, dict[int, Fit]]:
    s, ref = request.settings, request.reference
    rule = compare.Rule.from_settings(s.rule)
    started = time.monotonic()
    deadline = started + s.budget.wall_seconds
    seed = derive_seed(s.seed, SCOPE, "pymc")
    ev: dict = {"scope": SCOPE, "kind": "reference", "data_sha256": data_hash(request.data),
                "seeds": {"pymc": seed}, "looks": []}
    fits: dict[int, Fit] = {}
    draws = s.pymc.draws
    try:
        for look in range(1, s.budget.max_looks + 1):
            t0 = time.monotonic()
            progress("fit", scope=SCOPE, language="pymc", look=look, draws=draws)
            pymc = _fit_pymc(session, request.pymc_source, request.data, s, draws, seed,
                             _limits(s, deadline))
            fits[look] = pymc
            names, uncompared = compared_names(request.parameters, ref, pymc)
            progress("compare", scope=SCOPE, look=look)
            main = compare.compare_draws(pymc.draws, ref.draws, names, rule,
                                         candidate_divergences=pymc.divergences,
                                         baseline_divergences=ref.divergences, labels=LABELS)
            ev["looks"].append({"look": look, "pymc_draws": draws, "verdict": main.verdict,
                                "reason": main.reason,
                                "seconds": round(time.monotonic() - t0, 3)})
            ev.update(comparison_evidence(main, LABELS))
            ev.update({"compared": names, "uncompared_pymc": uncompared,
                       "fits": {"pymc": fit_meta(pymc), "reference": fit_meta(ref)}})
            if not _extendable(main) or not compare.sides_needing_draws(main, rule)[0]:
                break  # decided, or only the reference (fixed) would need more draws
            if look == s.budget.max_looks:
                ev["reason"] = f"{main.reason}; budget spent: {look} looks (max_looks)"
                break
            if time.monotonic() + s.budget.growth * (time.monotonic() - t0) > deadline:
                ev["reason"] = f"{main.reason}; budget spent: another look would pass wall_seconds"
                break
            draws = math.ceil(draws * s.budget.growth)
    except AuditError as err:
        ev.update(pipeline.stopped_scope(err))
    ev["seconds"] = round(time.monotonic() - started, 3)
    progress("scope_done", scope=SCOPE, verdict=ev["verdict"])
    return jsonable(ev), fits


def run_reference_audit(request: ReferenceAuditRequest, progress: Progress = _quiet
                        ) -> tuple[dict, dict[tuple[str, str, int], Fit]]:
    """The whole reference audit in this process (the program runs sandboxed). Returns
    the evidence and the PyMC fits keyed (scope, "pymc", look)."""
    meta = {"name": request.name, "kind": "reference", "reference": request.posterior,
            "pymc_sha256": sha256_text(request.pymc_source),
            "data_sha256": {SCOPE: data_hash(request.data)},
            "reference_versions": request.reference.versions}
    try:
        validate(request)
    except AuditError as err:
        return error_audit(meta, err, request.settings), {}
    ev, fits = run_reference_scope(request, progress)
    evidence = finish_audit(meta, {SCOPE: ev}, request.settings)
    return evidence, {(SCOPE, "pymc", look): f for look, f in fits.items()}
