"""Request and response bodies of the REST API (SPEC §5), validated by pydantic.

Every model forbids unknown keys, so a typo is a 422 naming the key. Strings are
checked for NUL characters and lone surrogates (which PostgreSQL's JSONB refuses), names
also for any control character, and data for non-finite numbers; catching them here
keeps them 422s instead of failures deep in storage. Name patterns are matched whole
(``re.fullmatch``), so a trailing newline is not a name.
"""
from __future__ import annotations

import math
import re
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from workers.settings import AuditSettings

SCOPE_NAME = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}"
PARAMETER_NAME = r"[A-Za-z_][A-Za-z0-9_.]{0,99}(\[[0-9]+(,[0-9]+)*\])?"
MAX_SOURCE_CHARS = 200_000
MAX_SCOPES = 8
MAX_DATA_DEPTH = 6


#: NUL, and UTF-16 surrogate code points (valid JSON escapes, not Unicode characters)
_NEVER = re.compile("[\x00\ud800-\udfff]")
#: control characters other than tab, line feed, carriage return and form feed
_CONTROL = re.compile("[\x01-\x08\x0b\x0e-\x1f\x7f-\x9f]")
#: in names (scope names, keys, posterior names) no control character at all
_NAME_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def _no_nul(text: str, what: str, *, name: bool = False) -> str:
    """``text`` if it holds only storable characters; ``name=True`` also refuses tab and
    newlines (a name is one line)."""
    bad = (_NAME_CONTROL if name else _NEVER).search(text) or (
        None if name else _CONTROL.search(text))
    if bad:
        ch = bad.group()
        kind = ("a NUL character" if ch == "\x00" else
                "a lone surrogate" if "\ud800" <= ch <= "\udfff" else "a control character")
        raise ValueError(f"{what} contains {kind} (U+{ord(ch):04X})")
    return text


def check_data(value: Any, path: str = "data", depth: int = 0) -> None:
    """Scope data: JSON numbers, strings, booleans, lists and objects; finite numbers only."""
    if depth > MAX_DATA_DEPTH:
        raise ValueError(f"{path} is nested more than {MAX_DATA_DEPTH} levels deep")
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{path} is {value}; only finite numbers are allowed")
        return
    if isinstance(value, str):
        _no_nul(value, path)
        return
    if isinstance(value, list):
        for i, item in enumerate(value):
            check_data(item, f"{path}[{i}]", depth + 1)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            _no_nul(key, f"a key in {path}", name=True)
            check_data(item, f"{path}.{key}", depth + 1)
        return
    raise ValueError(f"{path} has an unsupported type {type(value).__name__}")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ProgramIn(_Strict):
    source: str = Field(min_length=1, max_length=MAX_SOURCE_CHARS,
                        description="program text (SPEC §2.1 PyMC or §2.2 LazyPPL)")

    @field_validator("source")
    @classmethod
    def _source_text(cls, v: str) -> str:
        _no_nul(v, "source")
        if not v.strip():
            raise ValueError("source is blank")
        return v


class AuditIn(_Strict):
    """``POST /api/v1/audits``: one translation pair and its scopes, or (with
    ``reference`` instead of ``lazyppl``) one PyMC program against posteriordb's
    reference draws on scope ``full`` (default data: the posterior's own)."""

    name: str = Field(min_length=1, max_length=200)
    pymc: ProgramIn
    lazyppl: ProgramIn | None = None
    reference: str | None = Field(
        None, pattern=r"^[A-Za-z0-9_.-]{1,200}$",
        description="a posteriordb posterior: compare the PyMC program with its reference "
                    "draws instead of a LazyPPL program")
    scopes: dict[str, dict[str, Any]] = Field(
        default_factory=dict, max_length=MAX_SCOPES,
        description="scope name -> data object (the program's `data`)")

    @model_validator(mode="after")
    def _one_other_side(self) -> "AuditIn":
        if (self.lazyppl is None) == (self.reference is None):
            raise ValueError("give exactly one of lazyppl (a translation pair) and "
                             "reference (a posteriordb posterior)")
        if self.lazyppl is not None and not self.scopes:
            raise ValueError("scopes: Dictionary should have at least 1 item (a "
                             "translation pair is audited on at least one scope)")
        if self.reference is not None and set(self.scopes) - {"full"}:
            raise ValueError("with reference the only scope is 'full' (the data the "
                             "reference was computed on)")
        return self
    parameters: list[str] | None = Field(
        None, min_length=1, max_length=200,
        description="base names to compare; default: what the LazyPPL program reports")
    settings: AuditSettings | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        _no_nul(v, "name", name=True)
        if not v.strip():
            raise ValueError("name is blank")
        return v

    @field_validator("scopes")
    @classmethod
    def _scopes(cls, scopes: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        for name, data in scopes.items():
            if not re.fullmatch(SCOPE_NAME, name):
                raise ValueError(f"scope name {ascii(name)} must match {SCOPE_NAME} (whole)")
            check_data(data, f"scopes.{name}")
        return scopes

    @field_validator("parameters")
    @classmethod
    def _parameters(cls, names: list[str] | None) -> list[str] | None:
        if names is None:
            return None
        for n in names:
            if not re.fullmatch(PARAMETER_NAME, n):
                raise ValueError(f"parameter name {ascii(n)} is not a name like mu, theta or beta[2,3]")
        if len(set(names)) != len(names):
            raise ValueError("parameters lists a name twice")
        return names


class BatchIn(_Strict):
    """``POST /api/v1/batches``: audit shipped posteriordb posteriors."""

    source: Literal["posteriordb"]
    posteriors: list[str] | Literal["all"] = Field(
        description='posterior names, or "all" for every translated posterior')
    settings: AuditSettings | None = None

    @field_validator("posteriors")
    @classmethod
    def _posteriors(cls, v):
        if isinstance(v, list):
            if not v:
                raise ValueError("posteriors is empty; give names or \"all\"")
            for n in v:
                _no_nul(n, "a posterior name", name=True)
            if len(set(v)) != len(v):
                raise ValueError("posteriors lists a name twice")
        return v


class Accepted(BaseModel):
    """``202`` answer: the new resource, where to poll it, and its status."""

    id: uuid.UUID
    status: str
    verdict: str | None = None
    reason: str | None = None
    url: str
    page: str


class Page(BaseModel):
    items: list[dict[str, Any]]
    total: int
    limit: int
    offset: int


class Problem(BaseModel):
    """Error body: ``message`` says what is wrong; ``errors`` lists each field error."""

    message: str
    errors: list[dict[str, Any]] = []
