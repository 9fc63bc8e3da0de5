"""Operator caps (issue 13): a request's settings above a cap are a 422 naming the
setting and the cap, through the real app against PostgreSQL and Redis; nothing is
stored or queued, nothing is clamped. The operator can tighten or raise each cap."""
import pytest

from tests.integration.test_api import pair

pytestmark = pytest.mark.integration


@pytest.fixture
def unchanged(row_counts, queue_length):
    before, queued = row_counts(), queue_length()
    yield
    after = row_counts()
    after.pop("api_tokens"), before.pop("api_tokens")
    assert after == before, "a refused request stored rows"
    assert queue_length() == queued, "a refused request queued a task"


@pytest.fixture
def app_with_limits(service_settings):
    """``app_with_limits(**caps)`` -> TestClient of an app whose caps are changed."""
    from fastapi.testclient import TestClient

    from service.api import create_app

    made = []

    def make(**caps):
        limits = service_settings.limits.model_copy(update=caps)
        app = create_app(service_settings.model_copy(update={"limits": limits}))
        client = TestClient(app)
        made.append((app, client))
        return client

    yield make
    for app, client in made:
        client.close()
        app.state.engine.dispose()


OVER = [
    # the findings: each was accepted with 202 on main
    ({"budget": {"memory_mb": 65536}}, "settings.budget.memory_mb: 65536", "cap of 8192",
     "FIT_MEMORY_MB"),
    ({"budget": {"wall_seconds": 1e308}}, "settings.budget.wall_seconds: 1e+308", "cap of 1800",
     "SCOPE_WALL_SECONDS"),
    ({"budget": {"growth": 10, "max_looks": 6}, "pymc": {"draws": 1000}},
     "settings.pymc.draws: 100000000", "cap of 32000", "FINAL_DRAWS"),
    ({"budget": {"max_looks": 10}}, "settings.budget.max_looks: 10", "cap of 6", "LOOKS"),
    ({"pymc": {"retry_target_accepts": [0.99] * 5000}},
     "settings.pymc.retry_target_accepts: 5000", "cap of 4", "RETRIES"),
    ({"pymc": {"chains": 16}}, "settings.pymc.chains: 16", "cap of 8", "CHAINS"),
    ({"lazyppl": {"chains": 12}}, "settings.lazyppl.chains: 12", "cap of 8", "CHAINS"),
    ({"lazyppl": {"thin": 10000}}, "settings.lazyppl.thin: 80004000", "cap of 2000000",
     "LAZYPPL_STEPS"),
    ({"pymc": {"tune": 20000}}, "settings.pymc.tune: 20000", "cap of 5000", "TUNE"),
]


@pytest.mark.parametrize("settings, names, cap, env", OVER)
def test_a_setting_above_a_cap_is_422_naming_it_and_the_cap(
        client, auth_headers, unchanged, settings, names, cap, env):
    r = client.post("/api/v1/audits", json=pair(settings=settings), headers=auth_headers)
    assert r.status_code == 422, r.text
    message = r.json()["message"]
    assert names in message and cap in message and f"PPL_AUDIT_LIMITS__{env}" in message, message


def test_every_exceeded_cap_is_named_at_once(client, auth_headers, unchanged):
    r = client.post("/api/v1/audits", json=pair(settings={
        "budget": {"memory_mb": 65536, "max_looks": 10}, "pymc": {"chains": 16}}),
        headers=auth_headers)
    message = r.json()["message"]
    assert r.status_code == 422
    for name in ("memory_mb", "max_looks", "pymc.chains"):
        assert name in message, message


def test_the_audit_wall_budget_counts_every_scope(client, auth_headers, unchanged):
    data = pair()["scopes"]["visible"]
    scopes = {f"s{i}": data for i in range(8)}
    r = client.post("/api/v1/audits", json=pair(scopes=scopes,
                                                settings={"budget": {"wall_seconds": 1000}}),
                    headers=auth_headers)
    assert r.status_code == 422, r.text
    assert "settings.budget.wall_seconds: 8000" in r.json()["message"]
    assert "cap of 7200" in r.json()["message"]


@pytest.mark.parametrize("value", [1.0, 1.5, 0.0, -0.2])
def test_retry_targets_must_lie_strictly_between_0_and_1(client, auth_headers, unchanged, value):
    r = client.post("/api/v1/audits", json=pair(settings={"pymc": {"retry_target_accepts": [value]}}),
                    headers=auth_headers)
    assert r.status_code == 422, r.text
    assert "settings.pymc.retry_target_accepts.0" in r.json()["message"]


def test_a_batch_above_a_cap_is_422(client, auth_headers, unchanged):
    r = client.post("/api/v1/batches", json={"source": "posteriordb", "posteriors": "all",
                                             "settings": {"budget": {"memory_mb": 65536}}},
                    headers=auth_headers)
    assert r.status_code == 422, r.text
    assert "settings.budget.memory_mb: 65536" in r.json()["message"]


def test_the_operator_sets_scopes_and_parameters_caps(app_with_limits, auth_headers, unchanged):
    c = app_with_limits(scopes=1, parameters=2)
    data = pair()["scopes"]["visible"]
    r = c.post("/api/v1/audits", json=pair(scopes={"a": data, "b": data}), headers=auth_headers)
    assert r.status_code == 422 and "scopes: 2 is above the operator's cap of 1" in r.json()["message"]
    r = c.post("/api/v1/audits", json=pair(parameters=["mu", "tau", "theta"]), headers=auth_headers)
    assert r.status_code == 422
    assert "parameters: 3 is above the operator's cap of 2" in r.json()["message"]


def test_the_operator_can_raise_a_cap(app_with_limits, auth_headers, queue_length):
    c = app_with_limits(fit_memory_mb=65536)
    queued = queue_length()
    r = c.post("/api/v1/audits", json=pair(name="raised cap",
                                           settings={"budget": {"memory_mb": 65536}}),
               headers=auth_headers)
    assert r.status_code == 202, r.text
    assert queue_length() == queued + 1


def test_caps_come_from_the_environment(monkeypatch):
    from service.config import Settings

    monkeypatch.setenv("PPL_AUDIT_LIMITS__FIT_MEMORY_MB", "2048")
    monkeypatch.setenv("PPL_AUDIT_LIMITS__CHAINS", "2")
    s = Settings(environment="development")
    assert s.limits.fit_memory_mb == 2048 and s.limits.chains == 2


def test_the_default_settings_are_within_the_default_caps():
    from service.config import LimitSettings
    from service.limits import check
    from workers.settings import AuditSettings

    assert check(AuditSettings(), LimitSettings(), scopes=8, parameters=100) is None


def test_each_exceeded_cap_is_a_field_error(client, auth_headers, unchanged):
    r = client.post("/api/v1/audits", json=pair(settings={"budget": {"memory_mb": 65536}}),
                    headers=auth_headers)
    errors = r.json()["errors"]
    assert r.status_code == 422 and len(errors) == 1
    assert errors[0]["loc"] == ["body", "settings", "budget", "memory_mb"]
    assert errors[0]["type"] == "over_cap" and "cap of 8192" in errors[0]["msg"]
