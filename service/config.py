"""The service's one settings object (SPEC §6).

Values come from environment variables prefixed ``PPL_AUDIT_`` (nested groups use
``__``, e.g. ``PPL_AUDIT_CELERY__TASK_TIME_LIMIT=1800``) and an optional ``.env`` file
in the working directory. Only the app factory, the Celery app and the CLI call
:func:`get_settings`; everything below them takes plain values.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import platformdirs
from pydantic import BaseModel, Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

#: The development pepper. Refused when ``environment`` is anything but development.
DEFAULT_SECRET = "ppl-audit-development-secret-change-me"


def default_database_url() -> str:
    """A SQLite file in the user's data directory (the local CLI's embedded database)."""
    data_dir = Path(platformdirs.user_data_dir("ppl-audit", appauthor=False))
    return f"sqlite:///{data_dir / 'ppl-audit.sqlite3'}"


class CelerySettings(BaseModel):
    """Job limits. Seconds of wall time per task; the soft limit is 0.9 × the hard one."""

    task_time_limit: int = Field(3600, ge=10, description="hard limit per task, seconds")
    visibility_timeout: int | None = Field(
        None,
        description="Redis visibility timeout, seconds; must exceed task_time_limit "
        "(default: task_time_limit + 600). A task unacknowledged this long after a lost "
        "worker is redelivered.",
    )
    max_retries: int = Field(5, ge=0, description="retries of infrastructure errors")
    queue: str = "ppl-audit"

    @property
    def soft_time_limit(self) -> int:
        return int(self.task_time_limit * 0.9)

    @property
    def scope_wall_seconds(self) -> float:
        """The most wall time a scope's fits may take in one task: the soft limit less
        max(30 s, 0.1 × the hard limit), so the sandbox kills the fits (their compile
        time comes on top of this) and the scope is stored before the soft limit, whose
        exception cannot interrupt fits waited on in threads. 2880 s at the default."""
        return self.soft_time_limit - max(30.0, 0.1 * self.task_time_limit)

    @property
    def effective_visibility_timeout(self) -> int:
        return self.visibility_timeout or self.task_time_limit + 600

    @model_validator(mode="after")
    def _visibility_above_hard_limit(self) -> "CelerySettings":
        if self.visibility_timeout is not None and self.visibility_timeout <= self.task_time_limit:
            raise ValueError(
                "celery.visibility_timeout must exceed celery.task_time_limit, otherwise "
                "a running task is redelivered to a second worker"
            )
        return self


class WorkSettings(BaseModel):
    """Leases and the reconciler (service/README.md, "Guarantees"). Seconds."""

    lease_seconds: float = Field(90, gt=0, description="a claimed unit's lease; renewed while "
                                 "it runs, re-dispatched by the reconciler once expired")
    heartbeat_seconds: float = Field(15, gt=0, description="lease renewal interval")
    reconcile_seconds: float = Field(30, gt=0, description="reconciler interval in each worker")
    dispatch_grace_seconds: float = Field(30, ge=0, description="a dispatched unit whose message "
                                          "is not in the broker after this long is re-sent")
    max_lost_attempts: int = Field(3, ge=1, description="claims whose holder vanished (killed, "
                                   "hard time limit) before the unit ends failed")
    db_retry_seconds: float = Field(300, ge=0, description="how long a step retries a lost "
                                    "database connection before giving up")

    @model_validator(mode="after")
    def _heartbeat_below_lease(self) -> "WorkSettings":
        if self.heartbeat_seconds * 2 > self.lease_seconds:
            raise ValueError("work.heartbeat_seconds must be at most half of work.lease_seconds")
        return self


class Settings(BaseSettings):
    """Service configuration; see README's configuration table."""

    model_config = SettingsConfigDict(
        env_prefix="PPL_AUDIT_",
        env_nested_delimiter="__",
        env_file=".env",
        extra="ignore",
    )

    environment: str = Field("development", description="development | production | test")
    database_url: str = Field(default_factory=default_database_url)
    broker_url: str = "redis://127.0.0.1:6379/0"
    result_backend: str | None = Field(
        None, description="Celery result backend; none by default (results live in the database)"
    )
    secret: str = Field(DEFAULT_SECRET, description="pepper for API token hashes (HMAC-SHA256)")
    max_body_bytes: int = Field(5 * 1024 * 1024, ge=1024, description="largest request body")
    reads_require_token: bool = False
    celery: CelerySettings = Field(default_factory=CelerySettings)
    work: WorkSettings = Field(default_factory=WorkSettings)

    @model_validator(mode="after")
    def _no_default_secret_outside_development(self) -> "Settings":
        if self.environment != "development" and self.secret == DEFAULT_SECRET:
            raise ValueError(
                f"PPL_AUDIT_SECRET must be set when PPL_AUDIT_ENVIRONMENT={self.environment!r}; "
                "the default secret is for development only"
            )
        if len(self.secret) < 16:
            raise ValueError("PPL_AUDIT_SECRET must be at least 16 characters")
        return self


@lru_cache
def get_settings() -> Settings:
    """The process-wide settings, read once."""
    return Settings()
