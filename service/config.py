"""The service's one settings object (SPEC §6).

Values come from environment variables prefixed ``PPL_AUDIT_`` (nested groups use
``__``, e.g. ``PPL_AUDIT_CELERY__TASK_TIME_LIMIT=1800``) and an optional ``.env`` file
in the working directory. Only the app factory, the Celery app and the CLI call
:func:`get_settings`; everything below them takes plain values.
"""
from __future__ import annotations

import os
import secrets as _secrets
from functools import lru_cache
from pathlib import Path

import platformdirs
from pydantic import BaseModel, Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

#: The development pepper: public, so used only when ``PPL_AUDIT_ENVIRONMENT=development``
#: is set explicitly.
DEFAULT_SECRET = "ppl-audit-development-secret-change-me"


def _data_dir() -> Path:
    return Path(platformdirs.user_data_dir("ppl-audit", appauthor=False))


def default_database_url() -> str:
    """A SQLite file in the user's data directory (the local CLI's embedded database)."""
    return f"sqlite:///{_data_dir() / 'ppl-audit.sqlite3'}"


def install_secret(path: Path | None = None) -> str:
    """This installation's own pepper for the local SQLite mode: made once (random, file
    mode 0600, next to the SQLite file) and read back afterwards."""
    path = path or _data_dir() / "token-pepper"
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    value = _secrets.token_urlsafe(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it first
        return path.read_text().strip()
    with os.fdopen(fd, "w") as fh:
        fh.write(value + "\n")
    return value


class LimitSettings(BaseModel):
    """The operator's caps on what one request may ask for (``PPL_AUDIT_LIMITS__…``).

    A request above a cap is a 422 naming the setting and the cap; nothing is clamped.
    Defaults suit one worker on a 2-core, 24 GiB machine (see service/README.md). Only
    the API applies them; the local CLI is trusted and not bound by them.
    """

    scope_wall_seconds: float = Field(1800, gt=0, description="budget.wall_seconds, per scope")
    audit_wall_seconds: float = Field(
        7200, gt=0, description="budget.wall_seconds × number of scopes, per audit")
    fit_memory_mb: int = Field(8192, ge=256, description="budget.memory_mb, per fit")
    fit_cpu_seconds: float = Field(
        3630, gt=0, description="CPU seconds per fit, which the worker sets to "
        "2 × budget.wall_seconds + 30")
    chains: int = Field(8, ge=1, description="pymc.chains and lazyppl.chains")
    tune: int = Field(5000, ge=50, description="pymc.tune")
    final_draws: int = Field(
        32000, ge=50, description="draws per chain after all looks (draws grown by growth, "
        "rounded up, max_looks - 1 times), each side")
    lazyppl_steps: int = Field(
        2_000_000, ge=1, description="Metropolis steps per chain after all looks: "
        "warmup + final draws × thin")
    looks: int = Field(6, ge=1, description="budget.max_looks")
    retries: int = Field(4, ge=0, description="entries of pymc.retry_target_accepts (a fit "
                         "may add one diagonal-mass-matrix retry of the last, and backend auto "
                         "its fallbacks; the wall and CPU limits bound every attempt)")
    scopes: int = Field(8, ge=1, description="scopes per audit")
    parameters: int = Field(100, ge=1, description="entries of the request's parameters list")
    scalars: int = Field(2_000, ge=1, description="scalars of one stored fit the service "
                         "serves (the harness and runners refuse more than 2,000 too)")
    output_mb: int = Field(
        256, ge=1, description="draws of one fit (chains × draws × scalars × 8 bytes): "
        "at submission with one scalar at the final draws, and before any download")
    token_open_audits: int = Field(
        20, ge=1, description="audits one token may have queued or running at once "
        "(those a batch fans out count against token_open_batches instead); beyond: 429")
    token_open_batches: int = Field(
        2, ge=1, description="batches one token may have queued or running at once; beyond: 429")
    quota_retry_after_seconds: int = Field(
        60, ge=1, description="Retry-After of the 429 answered beyond a token's quota")



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
    pymc_standby: bool = Field(
        True, description="keep one pre-started PyMC session (PyMC imported, numba warmed, "
        "no program) per pool process for the next scope; ~550 MB resident each")

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
    cancel_check_seconds: float = Field(1.0, gt=0, description="how often a fitting scope "
                                        "reads its audit's status: a cancel kills its fits "
                                        "within about this long")
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

    environment: str = Field(
        "production", description="development | production | test; the public development "
        "pepper is accepted only when this is set to development explicitly")
    database_url: str = Field(default_factory=default_database_url)
    broker_url: str = "redis://127.0.0.1:6379/0"
    result_backend: str | None = Field(
        None, description="Celery result backend; none by default (results live in the database)"
    )
    secret: str | None = Field(
        None, description="pepper for API token hashes (HMAC-SHA256); unset: read from "
        "secret_file if given, else the public development pepper if "
        "environment=development, this installation's own pepper for a SQLite database "
        "(the local CLI), otherwise refused")
    secret_file: Path | None = Field(
        None, description="file holding the pepper (made, mode 0600, if missing); "
        "scripts/serve.sh uses one in the user data directory")
    max_body_bytes: int = Field(5 * 1024 * 1024, ge=1024, description="largest request body")
    reads_require_token: bool = False
    celery: CelerySettings = Field(default_factory=CelerySettings)
    work: WorkSettings = Field(default_factory=WorkSettings)
    limits: LimitSettings = Field(default_factory=LimitSettings)
    max_parsing_requests: int = Field(
        4, ge=1, description="authenticated writes whose bodies are read and handled at "
        "the same time; more wait up to parsing_wait_seconds, then 503")
    parsing_wait_seconds: float = Field(10, gt=0)

    @model_validator(mode="after")
    def _no_default_secret_outside_development(self) -> "Settings":
        if self.secret is None:
            if self.secret_file is not None:
                self.secret = install_secret(Path(self.secret_file))
            elif self.environment == "development":
                self.secret = DEFAULT_SECRET
            elif self.database_url.startswith("sqlite"):
                self.secret = install_secret()
        if self.secret is None or (self.environment != "development"
                                   and self.secret == DEFAULT_SECRET):
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
