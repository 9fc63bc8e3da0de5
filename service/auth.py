"""Bearer-token authentication: writes always need a token, reads when configured."""
from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from service.db import tokens as token_repo
from service.db.models import ApiToken

bearer = HTTPBearer(auto_error=False, description="API token from `ppl-audit token create NAME`")


def get_session(request: Request):
    """One session per request; the route commits what it writes."""
    with request.app.state.sessions() as session:
        yield session


SessionDep = Annotated[Session, Depends(get_session)]


def _check(request: Request, session: Session, creds: HTTPAuthorizationCredentials | None) -> ApiToken:
    if creds is None or creds.scheme.lower() != "bearer" or not creds.credentials:
        raise HTTPException(401, "an API token is required: send 'Authorization: Bearer <token>' "
                                 "(create one with `ppl-audit token create NAME`)",
                            headers={"WWW-Authenticate": "Bearer"})
    token = token_repo.authenticate(session, creds.credentials, request.app.state.settings.secret)
    if token is None:
        raise HTTPException(401, "the API token is unknown or revoked",
                            headers={"WWW-Authenticate": "Bearer"})
    session.commit()  # last_used_at
    return token


def require_token(request: Request, session: SessionDep,
                  creds: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]) -> ApiToken:
    # service.http_guard.WriteGate checked this token before the body was read
    checked = getattr(request.state, "api_token_id", None)
    if checked is not None:
        token = session.get(ApiToken, checked)
        session.commit()  # hand the connection back while the route verifies programs
        if token is not None and token.revoked_at is None:
            return token
    return _check(request, session, creds)


def read_access(request: Request, session: SessionDep,
                creds: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]) -> None:
    """Open unless ``reads_require_token``; the web pages also accept a ``token`` cookie."""
    if not request.app.state.settings.reads_require_token:
        return
    if creds is None and request.cookies.get("ppl_audit_token"):
        creds = HTTPAuthorizationCredentials(scheme="Bearer",
                                             credentials=request.cookies["ppl_audit_token"])
    _check(request, session, creds)


WriteToken = Annotated[ApiToken, Depends(require_token)]
ReadAccess = Depends(read_access)
