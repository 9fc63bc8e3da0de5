"""schemathesis against /openapi.json: generated requests (with a valid token, so the
write paths are exercised past auth) never produce a 5xx. Its queue is its own and is
deleted afterwards, so the generated audits never reach a worker."""
import secrets

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

pytestmark = pytest.mark.integration

# FastAPI publishes OpenAPI 3.1; schemathesis 3.x supports it behind this switch
schemathesis.experimental.OPEN_API_3_1.enable()


@pytest.fixture(scope="module")
def fuzz_app(service_settings, broker_url):
    from service.api import create_app
    from tests.conftest import delete_queue

    queue = f"ppl-audit-fuzz-{secrets.token_hex(4)}"
    app = create_app(service_settings.model_copy(update={
        "celery": service_settings.celery.model_copy(update={"queue": queue})}))
    yield app
    app.state.engine.dispose()
    delete_queue(broker_url, queue)


@pytest.fixture(scope="module")
def api_schema(fuzz_app):
    return schemathesis.from_asgi("/openapi.json", fuzz_app)


schema = schemathesis.from_pytest_fixture("api_schema")


@schema.parametrize()
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                 HealthCheck.function_scoped_fixture])
def test_no_server_errors(case, auth_headers):
    response = case.call_asgi(headers=auth_headers)
    case.validate_response(response, checks=(schemathesis.checks.not_a_server_error,))
