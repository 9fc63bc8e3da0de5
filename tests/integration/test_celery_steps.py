"""The worker steps against real PostgreSQL, run twice as a re-delivered task would:
nothing is stored twice, and the row lock serialises concurrent writers."""
import threading
import uuid

import numpy as np
import pytest
import sqlalchemy as sa

from service import steps
from service.db import audits as repo
from workers import compare, pipeline
from workers.fit import Fit
from workers.settings import AuditSettings

pytestmark = pytest.mark.integration

NAMES = ["mu", "tau"]


def _fit(language, seed):
    rng = np.random.default_rng(seed)
    return Fit(language, {"mu": rng.normal(0, 1, (4, 500)), "tau": rng.gamma(4, 1, (4, 500))},
               sampler={"seed": seed}, reportable=NAMES)


def _outcome(scope):
    lazy, pymc = _fit("lazyppl", 1), _fit("pymc", 2)
    main = compare.compare_draws(lazy.draws, pymc.draws, NAMES, compare.Rule(),
                                 labels=("lazyppl", "pymc"))
    ev = {"scope": scope, **pipeline.comparison_evidence(main, ("lazyppl", "pymc")),
          "looks": [{"look": 1}], "seconds": 1.0}
    return pipeline.ScopeOutcome(pipeline.jsonable(ev), {("pymc", 1): pymc, ("lazyppl", 1): lazy})


@pytest.fixture
def audit_id(db_sessions):
    with db_sessions.begin() as s:
        a = repo.create_audit(s, name="steps", pymc_source="p", lazyppl_source="l",
                              scopes={"visible": {"n": 1}, "full": {"n": 2}}, parameters=None,
                              settings=AuditSettings().model_dump(mode="json"))
        return a.id


def _count(db_sessions, table, audit_id):
    with db_sessions() as s:
        return s.scalar(sa.text(f"SELECT count(*) FROM {table} WHERE audit_id = :a"), {"a": audit_id})


def test_a_redelivered_scope_is_stored_once(db_sessions, audit_id):
    job = steps.claim_scope(db_sessions, audit_id, "visible")
    assert job is not None and job.data == {"n": 1}
    assert steps.save_scope(db_sessions, job, _outcome("visible")) is False  # full still open
    # the same task again (worker lost after commit, before ack): claim says nothing to do
    assert steps.claim_scope(db_sessions, audit_id, "visible") is None
    # and a racing duplicate that got past the claim writes nothing either
    steps.save_scope(db_sessions, job, _outcome("visible"))
    assert _count(db_sessions, "scope_results", audit_id) == 1
    assert _count(db_sessions, "fits", audit_id) == 2
    assert _count(db_sessions, "comparisons", audit_id) == 2


def test_last_scope_triggers_finish_once(db_sessions, audit_id):
    for scope in ("visible", "full"):
        job = steps.claim_scope(db_sessions, audit_id, scope)
        last = steps.save_scope(db_sessions, job, _outcome(scope))
    assert last is True
    assert steps.needs_finish(db_sessions, audit_id)
    steps.finish(db_sessions, audit_id)
    steps.finish(db_sessions, audit_id)  # re-delivered finish: no second status change
    with db_sessions() as s:
        a = repo.get_audit(s, audit_id)
        assert a.status == "done" and a.verdict in ("agree", "inconclusive", "disagree")
        assert set(a.evidence["scope_verdicts"]) == {"visible", "full"}
        done_events = s.scalar(sa.text("SELECT count(*) FROM events WHERE audit_id = :a AND "
                                       "to_status = 'done'"), {"a": audit_id})
    assert done_events == 1
    assert not steps.needs_finish(db_sessions, audit_id)


def test_concurrent_writers_of_one_scope_store_it_once(db_sessions, audit_id):
    job = steps.claim_scope(db_sessions, audit_id, "full")
    outcome = _outcome("full")
    errors = []

    def write():
        try:
            steps.save_scope(db_sessions, job, outcome)
        except Exception as err:  # pragma: no cover - shown by the assertion below
            errors.append(err)

    threads = [threading.Thread(target=write) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert _count(db_sessions, "scope_results", audit_id) == 1
    assert _count(db_sessions, "fits", audit_id) == 2


def test_a_user_error_stops_the_audit_with_its_reason(db_sessions, audit_id):
    from workers.errors import ProgramRuntimeError

    steps.fail(db_sessions, audit_id, ProgramRuntimeError('data field "y" is missing',
                                                          language="lazyppl"))
    assert steps.claim_scope(db_sessions, audit_id, "visible") is None
    with db_sessions() as s:
        a = repo.get_audit(s, audit_id)
    assert (a.status, a.verdict) == ("done", "error")
    assert a.reason == 'data field "y" is missing (lazyppl program)'


def test_an_unexpected_error_fails_the_audit_with_a_generic_reason(db_sessions, audit_id):
    steps.fail(db_sessions, audit_id, KeyError("internal detail"))
    with db_sessions() as s:
        a = repo.get_audit(s, audit_id)
    assert (a.status, a.verdict) == ("failed", "error")
    assert "internal detail" not in a.reason


def test_batch_fan_out_is_idempotent(db_sessions):
    from corpus.loader import list_posteriors, load
    from service.db import batches as batch_repo

    name = "eight_schools-eight_schools_noncentered"
    assert name in list_posteriors()
    with db_sessions.begin() as s:
        batch = batch_repo.create_batch(s, source="posteriordb", posteriors=[name, "no-such-posterior"],
                                        settings=AuditSettings().model_dump(mode="json"))
        batch_id = batch.id
    sent: list[tuple[uuid.UUID, str]] = []
    steps.fan_out_batch(db_sessions, batch_id, load, lambda a, s: sent.append((a, s)))
    with db_sessions.begin() as s:  # as a re-delivered run_batch would find it
        batch_repo.set_batch_status(s, batch_repo.get_batch(s, batch_id), "queued")
    steps.fan_out_batch(db_sessions, batch_id, load, lambda a, s: sent.append((a, s)))
    with db_sessions() as s:
        audits = batch_repo.batch_audits(s, batch_id)
    assert sorted(a.posterior for a in audits) == sorted([name, "no-such-posterior"])
    assert sorted(scope for _, scope in sent) == ["full", "visible"]
    broken = next(a for a in audits if a.posterior == "no-such-posterior")
    assert broken.verdict == "error" and "could not load" in broken.reason


def test_batch_fan_out_applies_the_translations_meta_settings(db_sessions):
    """A posterior whose meta.json needs the standard profile (an ODE program using
    pytensor.scan) gets it in a batch submitted with the default strict settings; the
    batch's other settings are kept."""
    from corpus.loader import load
    from service.db import batches as batch_repo

    name = "hudson_lynx_hare-lotka_volterra"
    settings = AuditSettings.model_validate({"pymc": {"draws": 500}})
    assert settings.pymc.profile == "strict"
    with db_sessions.begin() as s:
        batch = batch_repo.create_batch(s, source="posteriordb", posteriors=[name],
                                        settings=settings.model_dump(mode="json"))
        batch_id = batch.id
    steps.fan_out_batch(db_sessions, batch_id, load, lambda a, s: None)
    with db_sessions() as s:
        (audit,) = batch_repo.batch_audits(s, batch_id)
        assert audit.settings["pymc"]["profile"] == "standard"
        assert audit.settings["pymc"]["draws"] == 500


def test_batch_fan_out_sends_the_longest_stored_scopes_first(db_sessions):
    """With no history the submitter's order stands; a later batch of the same posteriors
    sends them by the seconds their scopes took before, longest first, and a posterior
    never run before ahead of all (it may be long)."""
    from corpus.loader import load
    from service.db import batches as batch_repo
    from service.db.models import Audit, ScopeResult

    # posteriors no other test audits: the test database is shared by the session
    names = ["nes1972-nes", "nes1976-nes", "nes1980-nes"]

    def fan_out(posteriors):
        with db_sessions.begin() as s:
            batch_id = batch_repo.create_batch(s, source="posteriordb", posteriors=posteriors,
                                               settings=AuditSettings().model_dump(mode="json")).id
        sent: list[tuple[uuid.UUID, str]] = []
        steps.fan_out_batch(db_sessions, batch_id, load, lambda a, s: sent.append((a, s)))
        with db_sessions() as s:
            posterior = {a.id: a.posterior for a in batch_repo.batch_audits(s, batch_id)}
        return [(posterior[a], scope) for a, scope in sent]

    first = fan_out(names[:2])
    assert [p for p, _ in first] == [names[0]] * 2 + [names[1]] * 2
    taken = {("nes1972-nes", "full"): 40.0, ("nes1972-nes", "visible"): 10.0,
             ("nes1976-nes", "visible"): 90.0, ("nes1976-nes", "full"): 20.0}
    with db_sessions.begin() as s:
        audits = {a.posterior: a.id for a in s.scalars(sa.select(Audit).where(
            Audit.posterior.in_(names[:2])))}
        for (posterior, scope), seconds in taken.items():
            s.add(ScopeResult(audit_id=audits[posterior], scope=scope, verdict="agree",
                              evidence={}, seconds=seconds))
    second = fan_out(names)
    assert second[2:] == [("nes1976-nes", "visible"), ("nes1976-nes", "full"),
                          ("nes1972-nes", "full"), ("nes1972-nes", "visible")]
    assert {p for p, _ in second[:2]} == {"nes1980-nes"}
