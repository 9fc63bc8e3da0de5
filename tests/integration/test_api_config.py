"""Service settings: environment variables, nested groups, and no default secret in
production."""
import pytest
from pydantic import ValidationError

from service.config import DEFAULT_SECRET, Settings


def test_environment_variables_and_nested_groups(monkeypatch):
    monkeypatch.setenv("PPL_AUDIT_DATABASE_URL", "postgresql+psycopg://u@h:5432/db")
    monkeypatch.setenv("PPL_AUDIT_CELERY__TASK_TIME_LIMIT", "100")
    monkeypatch.setenv("PPL_AUDIT_ENVIRONMENT", "development")
    s = Settings()
    assert s.database_url == "postgresql+psycopg://u@h:5432/db"
    assert s.celery.task_time_limit == 100 and s.celery.soft_time_limit == 90
    assert s.celery.effective_visibility_timeout > 100
    assert s.broker_url == "redis://127.0.0.1:6379/0"


def test_default_database_is_a_sqlite_file_in_the_user_data_dir(monkeypatch, tmp_path):
    monkeypatch.delenv("PPL_AUDIT_DATABASE_URL", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert Settings().database_url.startswith("sqlite:///")
    assert Settings().database_url.endswith("ppl-audit.sqlite3")


def test_default_secret_is_refused_outside_development():
    service_db = "postgresql+psycopg://u@h:5432/db"
    assert Settings(environment="development", database_url=service_db).secret == DEFAULT_SECRET
    with pytest.raises(ValidationError, match="PPL_AUDIT_SECRET must be set"):
        Settings(environment="production", database_url=service_db)
    with pytest.raises(ValidationError, match="PPL_AUDIT_SECRET must be set"):
        Settings(environment="production", database_url=service_db, secret=DEFAULT_SECRET)
    assert Settings(environment="production", database_url=service_db,
                    secret="s" * 32).environment == "production"


def test_visibility_timeout_must_exceed_the_hard_limit():
    with pytest.raises(ValidationError, match="must exceed"):
        Settings(celery={"task_time_limit": 100, "visibility_timeout": 50})
