"""Where each error ends up, in one place: an audit status + verdict, and an HTTP status.

User errors (:class:`workers.errors.AuditError`) are results: the audit is ``done`` with
verdict ``error`` and the error's message as its reason. Anything else is a bug or an
infrastructure failure: the audit is ``failed``, the exception is logged with context,
and the user sees a generic reason.
"""
from __future__ import annotations

import logging

from workers.errors import (
    AuditError, CompileError, InvalidRequest, ProgramRefused, ProgramRuntimeError, ResourceLimit,
)

log = logging.getLogger("ppl_audit.service")

GENERIC_REASON = "internal error while running the audit (logged for the operators)"

#: HTTP status when an error is raised synchronously by a request.
HTTP_STATUS: dict[type[AuditError], int] = {
    InvalidRequest: 422,
    ProgramRefused: 422,
    CompileError: 422,
    ProgramRuntimeError: 422,
    ResourceLimit: 422,
    AuditError: 422,
}


def http_status(err: AuditError) -> int:
    for cls in type(err).__mro__:
        if cls in HTTP_STATUS:
            return HTTP_STATUS[cls]
    return 500


def audit_outcome(err: BaseException) -> dict:
    """``status``, ``verdict``, ``reason`` and ``error`` for an audit stopped by ``err``."""
    if isinstance(err, AuditError):
        return {"status": "done", "verdict": "error", "reason": str(err), "error": err.to_dict()}
    return {"status": "failed", "verdict": "error", "reason": GENERIC_REASON,
            "error": {"code": "internal", "message": GENERIC_REASON,
                      "details": {"type": type(err).__name__}}}
