"""The reconciler and the leases against real PostgreSQL and Redis (no worker): lost
messages are re-sent, live leases and finished work are left alone, poison work ends
``failed``, and a database step rides out a cut connection."""
import datetime as dt
import secrets
import threading
import time
import uuid

import pytest
import sqlalchemy as sa

from service import steps
from service.db import audits as repo
from service.db import batches as batch_repo
from service.db import work
from service.db.base import utcnow
from service.db.models import AuditScope, Batch
from service.db_retry import DatabaseRetry
from service.reconcile import BrokerView, finish_task_id, reconcile, scope_task_id
from tests.conftest import delete_queue
from workers.settings import AuditSettings

pytestmark = pytest.mark.integration
HOUR = dt.timedelta(hours=1)


@pytest.fixture
def dispatcher(service_settings, broker_url):
    """A real Celery dispatcher on a queue of this test's own."""
    from workers.celery_app import CeleryDispatcher, create_celery

    queue = f"ppl-audit-reconcile-{secrets.token_hex(4)}"
    settings = service_settings.model_copy(
        update={"celery": service_settings.celery.model_copy(update={"queue": queue})})
    yield CeleryDispatcher(create_celery(settings))
    delete_queue(broker_url, queue)


def _audit(db_sessions, scopes=("visible", "full"), dispatched=None) -> uuid.UUID:
    with db_sessions.begin() as s:
        a = repo.create_audit(s, name="reconcile", pymc_source="p", lazyppl_source="l",
                              scopes={sc: {"n": i} for i, sc in enumerate(scopes)},
                              parameters=None, settings=AuditSettings().model_dump(mode="json"))
        if dispatched is not None:
            for sc in a.scopes:
                sc.dispatched_at = dispatched
        return a.id


def _pass(db_sessions, dispatcher, now=None, grace=30.0):
    return reconcile(db_sessions, dispatcher, dispatcher.broker_view(), now or utcnow(), grace)


def _mine(result, audit_id):
    return sorted(sc for a, sc in result.scopes if a == audit_id)


def test_a_message_lost_by_the_broker_is_sent_again_once(db_sessions, dispatcher):
    aid = _audit(db_sessions, dispatched=utcnow() - HOUR)  # sent an hour ago, not in Redis
    first = _pass(db_sessions, dispatcher)
    assert _mine(first, aid) == ["full", "visible"]
    queued = dispatcher.broker_view().queued
    assert {scope_task_id(aid, "visible"), scope_task_id(aid, "full")} <= queued
    assert _mine(_pass(db_sessions, dispatcher), aid) == []  # its message waits now


def test_a_unit_just_dispatched_is_given_time_to_reach_the_broker(db_sessions, dispatcher):
    aid = _audit(db_sessions)  # dispatched_at = now, message not (yet) in the queue
    assert _mine(_pass(db_sessions, dispatcher, grace=30), aid) == []
    later = utcnow() + dt.timedelta(seconds=31)
    assert _mine(_pass(db_sessions, dispatcher, now=later, grace=30), aid) == ["full", "visible"]


def test_a_message_in_the_queue_or_unacknowledged_is_not_sent_twice(db_sessions):
    aid = _audit(db_sessions, dispatched=utcnow() - HOUR)
    sent = []

    class Recorder:
        def scope(self, a, sc): sent.append((a, sc))
        def finish(self, a): sent.append((a, "finish"))
        def batch(self, b): sent.append((b, "batch"))

    broker = BrokerView(queued=frozenset({scope_task_id(aid, "visible")}),
                        unacked=frozenset({scope_task_id(aid, "full")}))
    reconcile(db_sessions, Recorder(), broker, utcnow(), 30)
    assert [x for x in sent if x[0] == aid] == []


def test_a_live_lease_is_left_alone_and_an_expired_one_is_redispatched(db_sessions, dispatcher):
    aid = _audit(db_sessions, scopes=("visible",), dispatched=utcnow() - HOUR)
    holder = steps.Lease("elsewhere:4242:t1", seconds=2)
    job = steps.claim_scope(db_sessions, aid, "visible", holder)
    assert isinstance(job, steps.ScopeJob)
    assert _mine(_pass(db_sessions, dispatcher), aid) == []  # lease runs 2 s more
    # a second delivery while the holder lives: busy, nothing done
    assert steps.claim_scope(db_sessions, aid, "visible", steps.Lease("other:1:t2")) is None
    time.sleep(2.2)
    assert _mine(_pass(db_sessions, dispatcher), aid) == ["visible"]
    # the re-sent task takes over and counts the vanished holder as a lost attempt
    job = steps.claim_scope(db_sessions, aid, "visible", steps.Lease("rescuer:7:t1"))
    assert isinstance(job, steps.ScopeJob)
    with db_sessions() as s:
        unit = s.scalar(sa.select(AuditScope).where(AuditScope.audit_id == aid))
        assert (unit.lease_owner, unit.attempts, unit.lost_attempts) == ("rescuer:7:t1", 2, 1)


def test_finished_work_is_never_run_again(db_sessions, dispatcher):
    from tests.integration.test_celery_steps import _outcome

    done = _audit(db_sessions, scopes=("visible",), dispatched=utcnow() - HOUR)
    job = steps.claim_scope(db_sessions, done, "visible")
    assert steps.save_scope(db_sessions, job, _outcome("visible")) is True
    steps.finish(db_sessions, done)
    failed = _audit(db_sessions, scopes=("visible",), dispatched=utcnow() - HOUR)
    steps.fail(db_sessions, failed, KeyError("bug"))
    result = _pass(db_sessions, dispatcher, now=utcnow() + HOUR)
    assert _mine(result, done) == [] and _mine(result, failed) == []
    assert done not in result.finishes and failed not in result.finishes
    assert steps.claim_scope(db_sessions, done, "visible") is None
    with db_sessions() as s:
        assert s.scalar(sa.text("SELECT count(*) FROM scope_results WHERE audit_id = :a"),
                        {"a": done}) == 1


def test_a_lost_finish_is_sent_again(db_sessions, dispatcher):
    from tests.integration.test_celery_steps import _outcome

    aid = _audit(db_sessions, scopes=("visible",))
    job = steps.claim_scope(db_sessions, aid, "visible")
    assert steps.save_scope(db_sessions, job, _outcome("visible")) is True  # finish never sent
    assert aid not in _pass(db_sessions, dispatcher).finishes  # grace: it may be on its way
    later = _pass(db_sessions, dispatcher, now=utcnow() + dt.timedelta(seconds=31))
    assert aid in later.finishes
    assert finish_task_id(aid) in dispatcher.broker_view().queued


def test_poison_work_ends_failed_after_max_lost_attempts_and_is_not_resent(db_sessions, dispatcher):
    aid = _audit(db_sessions, scopes=("visible",), dispatched=utcnow() - HOUR)
    # holders on this host whose processes are gone (pid 2**22 + n cannot exist)
    for n in range(3):
        result = steps.claim_scope(db_sessions, aid, "visible",
                                   steps.Lease(work.owner_name(None).rsplit(":", 2)[0]
                                               + f":{4194304 + n}:t", max_lost=3))
        assert isinstance(result, steps.ScopeJob)
    stopped = steps.claim_scope(db_sessions, aid, "visible", steps.Lease("w:1:t", max_lost=3))
    assert isinstance(stopped, steps.Stopped)
    with db_sessions() as s:
        a = repo.get_audit(s, aid)
        assert (a.status, a.verdict, a.error["code"]) == ("failed", "error", "lost")
        assert a.reason == steps.lost_reason(3)
    assert _mine(_pass(db_sessions, dispatcher, now=utcnow() + HOUR), aid) == []
    assert steps.claim_scope(db_sessions, aid, "visible") is None


def test_claim_decision_rules():
    now = utcnow()
    me = "h:10:t"
    assert work.claim_decision(None, None, now, me, False) == work.TAKE
    assert work.claim_decision(me, now + HOUR, now, me, False) == work.TAKE
    assert work.claim_decision("h:10:other", now + HOUR, now, me, False) == work.TAKE
    assert work.claim_decision("h:11:t", now + HOUR, now, me, False) == work.BUSY
    assert work.claim_decision("h:11:t", now + HOUR, now, me, True) == work.TAKE_LOST
    assert work.claim_decision("g:11:t", now - HOUR, now, me, False) == work.TAKE_LOST


def test_a_batch_whose_fan_out_stopped_is_resent(db_sessions, dispatcher):
    with db_sessions.begin() as s:
        b = batch_repo.create_batch(s, source="posteriordb", posteriors=["a", "b"],
                                    settings=AuditSettings().model_dump(mode="json"))
        b.status, b.lease_owner = "running", "gone:1:t"
        b.lease_expires_at = b.dispatched_at = utcnow() - HOUR
        bid = b.id
    assert bid in _pass(db_sessions, dispatcher).batches
    with db_sessions.begin() as s:  # a live fan-out is left alone
        b = s.get(Batch, bid)
        b.lease_expires_at, b.dispatched_at = utcnow() + HOUR, utcnow() - HOUR
    assert bid not in _pass(db_sessions, dispatcher).batches


def test_a_step_rides_out_a_cut_database_connection(database_url):
    """DatabaseRetry keeps a step going through 3 s of refused connections."""
    from service.db import make_engine, make_session_factory
    from tests.faults import TcpProxy

    u = sa.engine.make_url(database_url)
    proxy = TcpProxy((u.host, u.port or 5432))
    engine = make_engine(u.set(host="127.0.0.1", port=proxy.port).render_as_string(
        hide_password=False))
    sessions = make_session_factory(engine)
    try:
        aid = _audit(sessions, scopes=("visible",))
        proxy.cut()
        threading.Timer(3.0, proxy.restore).start()
        started = time.monotonic()
        job = DatabaseRetry(budget=30)(steps.claim_scope, sessions, aid, "visible")
        assert isinstance(job, steps.ScopeJob)
        assert time.monotonic() - started >= 2.5
        with pytest.raises(sa.exc.OperationalError):  # and gives up after its budget
            proxy.cut()
            DatabaseRetry(budget=1)(steps.needs_finish, sessions, aid)
    finally:
        proxy.close()
        engine.dispose()


def test_the_worker_watchdog_beats_reconciles_and_health_reports_it(
        db_sessions, dispatcher, client, service_env):
    """One pass of the reconciler a worker runs, its idle cost in statements, and what
    /api/v1/health and `ppl-audit status` then report."""
    import json
    import subprocess
    import sys

    from tests.conftest import ROOT
    from workers.watchdog import Watchdog

    dog = Watchdog(dispatcher.app, f"test-dog-{secrets.token_hex(3)}")
    statements = []
    sa.event.listen(dog.engine, "before_cursor_execute",
                    lambda *a, **k: statements.append(a[2].split()[0]))
    aid = _audit(db_sessions, scopes=("visible",), dispatched=utcnow() - HOUR)
    steps.claim_scope(db_sessions, aid, "visible", steps.Lease("gone:1:t", seconds=0.5))
    waiting = _audit(db_sessions, scopes=("visible",))  # submitted, never picked up
    time.sleep(0.6)
    first = dog.run_once()
    assert (aid, "visible") in first.scopes  # the expired lease was re-sent
    statements.clear()
    dog.run_once()
    per_pass = len(statements)
    print(f"reconciler idle pass: {per_pass} statements "
          f"({per_pass * 60 / dog.work.reconcile_seconds:.0f} per minute at the default interval)")
    assert per_pass <= 12
    health = client.get("/api/v1/health").json()
    assert health["database"] and health["broker"]
    assert health["work"]["live_workers"] >= 1
    assert health["work"]["running_units"] >= 1 and health["work"]["expired_leases"] >= 1
    assert health["work"]["oldest_running_seconds"] >= 0.6
    assert health["work"]["queued_units"] >= 1 and health["work"]["oldest_queued_seconds"] >= 0.6
    steps.fail(db_sessions, waiting, KeyError("done with it"))
    out = subprocess.run([sys.executable, "-m", "service.cli", "status", "--json"], cwd=ROOT,
                         env={**__import__("os").environ, **service_env}, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 1, out.stderr  # an expired lease is unhealthy
    assert json.loads(out.stdout)["work"]["live_workers"] >= 1
    text = subprocess.run([sys.executable, "-m", "service.cli", "status"], cwd=ROOT,
                          env={**__import__("os").environ, **service_env}, capture_output=True,
                          text=True, timeout=120).stdout
    assert "workers" in text and "expired lease" in text
    page = client.get(f"/audits/{aid}").text
    assert "last picked up by a worker" in page
    dog.stop()
    with db_sessions() as s:  # a stopped worker no longer counts as live
        assert s.scalar(sa.text("SELECT count(*) FROM worker_heartbeats WHERE name = :n"),
                        {"n": dog.name}) == 0


def test_the_broker_view_sees_queued_and_delivered_unacknowledged_messages(db_sessions, dispatcher):
    """The ids come from Redis as kombu stores them: the queue list and, once a consumer
    took a message without acknowledging it (acks_late), the ``unacked`` hash."""
    aid = uuid.uuid4()
    dispatcher.scope(aid, "visible")
    dispatcher.finish(aid)
    view = dispatcher.broker_view()
    assert {scope_task_id(aid, "visible"), finish_task_id(aid)} <= view.queued
    with dispatcher.app.connection_for_read() as conn:
        queue = conn.SimpleQueue(dispatcher.app.conf.task_default_queue)
        taken = [queue.get(timeout=5) for _ in range(2)]  # delivered, not acknowledged
        view = dispatcher.broker_view()
        assert not view.queued & {scope_task_id(aid, "visible"), finish_task_id(aid)}
        assert {scope_task_id(aid, "visible"), finish_task_id(aid)} <= view.unacked
        for message in taken:
            message.ack()
        queue.close()
    view = dispatcher.broker_view()
    assert not view.holds(scope_task_id(aid, "visible"))
