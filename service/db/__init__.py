"""Persistence: SQLAlchemy 2 models and one repository module per aggregate
(``audits``, ``batches``, ``tokens``). Schema changes go through ``migrations/``."""
from service.db.base import Base, make_engine, make_session_factory  # noqa: F401
from service.db import models  # noqa: F401  (registers tables on Base.metadata)
