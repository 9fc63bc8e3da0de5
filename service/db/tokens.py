"""Repository of API tokens. A token is shown once at creation; only
HMAC-SHA256(secret, token) is stored, so a leaked table reveals no usable token."""
from __future__ import annotations

import hashlib
import hmac
import secrets

import sqlalchemy as sa
from sqlalchemy.orm import Session

from service.db.base import utcnow
from service.db.models import ApiToken

TOKEN_PREFIX = "ppla_"


def hash_token(token: str, secret: str) -> str:
    return hmac.new(secret.encode(), token.encode(), hashlib.sha256).hexdigest()


def create_token(session: Session, name: str, secret: str) -> tuple[ApiToken, str]:
    """A new token row and the plaintext token (returned here only, never stored)."""
    plaintext = TOKEN_PREFIX + secrets.token_urlsafe(32)
    row = ApiToken(name=name, token_hash=hash_token(plaintext, secret))
    session.add(row)
    session.flush()
    return row, plaintext


def authenticate(session: Session, token: str, secret: str) -> ApiToken | None:
    """The live token row matching ``token``, or None (unknown or revoked)."""
    if not token:
        return None
    row = session.scalar(sa.select(ApiToken).where(
        ApiToken.token_hash == hash_token(token, secret), ApiToken.revoked_at.is_(None)))
    if row is not None:
        row.last_used_at = utcnow()
    return row


def revoke_token(session: Session, name: str) -> int:
    """Revoke every live token called ``name``; returns how many."""
    rows = session.scalars(sa.select(ApiToken).where(
        ApiToken.name == name, ApiToken.revoked_at.is_(None))).all()
    for row in rows:
        row.revoked_at = utcnow()
    return len(rows)


def list_tokens(session: Session) -> list[ApiToken]:
    return list(session.scalars(sa.select(ApiToken).order_by(ApiToken.id)))
