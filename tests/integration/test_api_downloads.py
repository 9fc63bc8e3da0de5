"""Nothing derived from an unchecked name is allocated on download (issue 13).

Fits are stored directly in the test database as an attacker's program would have left
them (names reported by a LazyPPL program, stored even when its scope ended in error),
then downloaded anonymously through the real app. A name must be a SPEC §2.3 name with
dense 1-based indices consistent with the others of its base; the number of scalars and
the bytes of draws are capped before anything is decoded or folded.
"""
import tracemalloc
import uuid

import numpy as np
import pytest

from service.db import audits as repo
from service.db.draws import encode_draws
from service.db.models import FitRecord
from workers.settings import AuditSettings

pytestmark = pytest.mark.integration


def stored_fit(db_sessions, names, chains=2, draws=200, constant=False) -> str:
    """Audit id of a new audit whose ``visible`` LazyPPL fit reports ``names``."""
    rng = np.random.default_rng(1)
    with db_sessions.begin() as s:
        audit = repo.create_audit(s, name=f"download {uuid.uuid4().hex[:6]}",
                                  pymc_source="def model(data): pass",
                                  lazyppl_source="module Model (model) where",
                                  scopes={"visible": {"n": 1}}, parameters=None,
                                  settings=AuditSettings().model_dump(mode="json"))
        s.add(FitRecord(audit_id=audit.id, scope="visible", language="lazyppl", look=1,
                        chains=chains, draws_per_chain=draws,
                        draws=encode_draws({n: np.zeros((chains, draws)) if constant
                                           else rng.normal(size=(chains, draws)) for n in names}),
                        summary={"names": list(names)}))
        return str(audit.id)


def download(client, audit_id):
    tracemalloc.start()
    try:
        r = client.get(f"/api/v1/audits/{audit_id}/fits/visible/lazyppl.nc")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return r, peak / 2**20


def test_a_huge_index_in_a_name_is_refused_without_allocating(client, db_sessions):
    # on main: a 2 × 200 × 200000 float64 array (640 MB) was allocated for 400 stored draws
    audit_id = stored_fit(db_sessions, ["alpha[200000]"])
    r, peak_mb = download(client, audit_id)
    assert r.status_code == 422, r.status_code
    assert "alpha[200000]" in r.json()["message"] and "dense" in r.json()["message"]
    assert peak_mb < 50, f"{peak_mb:.0f} MB allocated"


@pytest.mark.parametrize("names, why", [
    (["theta[1]", "theta[3]"], "dense"),
    (["theta[2]"], "dense"),
    (["theta[1]", "theta[1,1]"], "dimensions"),
    (["theta", "theta[1]"], "both"),
    (["theta[0]"], "not a SPEC"),
    (["theta[01]"], "not a SPEC"),
    (["theta[1]\n"], "not a SPEC"),
    (["the ta"], "not a SPEC"),
    (["beta[1,1]", "beta[2,2]"], "dense"),
])
def test_names_that_are_not_dense_spec_names_are_refused(client, db_sessions, names, why):
    r, _ = download(client, stored_fit(db_sessions, names))
    assert r.status_code == 422, r.text
    assert why in r.json()["message"], r.json()["message"]


def test_dense_matrices_and_vectors_still_download(client, db_sessions, tmp_path):
    import arviz as az

    names = ["mu", *[f"beta[{i},{j}]" for i in (1, 2) for j in (1, 2, 3)], "theta[1]", "theta[2]"]
    r, _ = download(client, stored_fit(db_sessions, names))
    assert r.status_code == 200, r.text
    path = tmp_path / "fit.nc"
    path.write_bytes(r.content)
    post = az.from_netcdf(path).posterior
    assert post["beta"].shape == (2, 200, 2, 3) and post["theta"].shape == (2, 200, 2)
    assert not np.isnan(post["beta"].values).any()


@pytest.fixture
def capped_client(service_settings):
    from fastapi.testclient import TestClient

    from service.api import create_app

    limits = service_settings.limits.model_copy(update={"scalars": 10, "output_mb": 1})
    app = create_app(service_settings.model_copy(update={"limits": limits}))
    with TestClient(app) as c:
        yield c
    app.state.engine.dispose()


def test_the_scalar_cap_bounds_a_download(capped_client, db_sessions):
    r, _ = download(capped_client, stored_fit(db_sessions, [f"x[{i}]" for i in range(1, 12)]))
    assert r.status_code == 422
    assert "11 scalars" in r.json()["message"] and "cap of 10" in r.json()["message"]


def test_the_output_cap_is_checked_before_decoding(capped_client, db_sessions):
    # 4 chains × 5000 draws × 8 scalars × 8 bytes = 1.28 MB > 1 MB; stored as constants
    # they compress to a few kB, so decoding them would show in the peak
    audit_id = stored_fit(db_sessions, [f"x[{i}]" for i in range(1, 9)], chains=4, draws=5000,
                          constant=True)
    r, peak_mb = download(capped_client, audit_id)
    assert r.status_code == 422
    assert "1 MB" in r.json()["message"], r.json()["message"]
    assert peak_mb < 1, f"{peak_mb:.2f} MB allocated"
