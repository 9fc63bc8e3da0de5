"""The one user-facing error hierarchy.

Every error meant for a person carries a message that says what is wrong and a
``details`` dict (language, line, limit...). ``service.errors`` maps each class to an
audit verdict/status and an HTTP status in one place; anything else is unexpected and
is logged and shown as a generic message.
"""
from __future__ import annotations

from typing import Any


class AuditError(Exception):
    """Base class: an error whose message is meant for the user."""

    code = "error"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = {k: v for k, v in details.items() if v is not None}

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "details": self.details}

    def __str__(self) -> str:
        line = self.details.get("line")
        lang = self.details.get("language")
        where = ""
        if lang and line:
            where = f" ({lang} program, line {line})"
        elif lang:
            where = f" ({lang} program)"
        return f"{self.message}{where}"


class InvalidRequest(AuditError):
    """The request itself is malformed (bad scopes, unknown parameter names...)."""

    code = "invalid_request"


class ProgramRefused(AuditError):
    """The verifier/linter refused a program before anything ran. details: language, line."""

    code = "refused"


class CompileError(AuditError):
    """The program failed to compile (GHC) or to build a model (PyMC). details: language."""

    code = "compile_error"


class ProgramRuntimeError(AuditError):
    """The program failed while running (missing data field, exception in model)."""

    code = "runtime_error"


class ResourceLimit(AuditError):
    """A resource limit stopped the program. details: limit in {timeout, memory, cpu, output}."""

    code = "resource_limit"


class SandboxUnavailable(AuditError):
    """The OS sandbox could not be set up, so no untrusted program was run (fail closed).

    An operator problem (bubblewrap missing, user namespaces switched off), reported as
    the audit's ``error`` with the reason; ``ppl-audit worker`` refuses to start on it.
    """

    code = "sandbox_unavailable"
