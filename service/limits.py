"""The operator's caps applied to one request's settings (issue 13).

A submitter chooses audit settings (``workers.settings.AuditSettings``); the operator
bounds them (``service.config.LimitSettings``, ``PPL_AUDIT_LIMITS__…``). A request
above a cap is refused with a message naming the setting, the requested value and the
cap; nothing is silently clamped. Pure: takes plain values, imports no web framework.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from service.config import LimitSettings
from workers.settings import AuditSettings

_MB = 1024 * 1024
#: bytes per stored draw (float64)
_VALUE_BYTES = 8


@dataclass(frozen=True)
class OverCap:
    """One setting above its cap: ``setting`` is the request path (``settings.pymc.chains``)."""

    setting: str
    value: float
    cap: float
    limit: str
    explanation: str = ""

    def reason(self) -> str:
        why = f" ({self.explanation})" if self.explanation else ""
        return (f"{_num(self.value)} is above the operator's cap of "
                f"{_num(self.cap)}{why} (PPL_AUDIT_LIMITS__{self.limit.upper()})")

    def message(self) -> str:
        return f"{self.setting}: {self.reason()}"

    def as_error(self) -> dict:
        """A field error shaped like pydantic's, for the API's 422 body."""
        return {"loc": ("body", *self.setting.split(".")), "type": "over_cap",
                "msg": self.reason(), "cap": self.cap, "value": self.value}


def _num(x: float) -> str:
    return f"{x:.6g}" if isinstance(x, float) else str(x)


def final_draws(draws: int, growth: float, looks: int) -> int:
    """Draws per chain at the last look: ``draws`` grown by ``growth`` (rounded up, as
    ``workers.pipeline.run_scope`` does) ``looks - 1`` times."""
    n = draws
    for _ in range(looks - 1):
        n = math.ceil(n * growth)
    return n


def over_caps(settings: AuditSettings, limits: LimitSettings, *, scopes: int,
              parameters: int = 0) -> list[OverCap]:
    """Every cap the request exceeds (empty when it is within all of them).

    ``scopes`` is the number of scopes each audit of the request has; ``parameters`` the
    length of its ``parameters`` list. Wall budget is per scope (``budget.wall_seconds``)
    and per audit (that times the scopes, which run one after the other at worst).
    """
    s, lim, out = settings, limits, []
    b = s.budget

    def cap(setting: str, value, limit: str, explanation: str = "") -> None:
        if value > getattr(lim, limit):
            out.append(OverCap(setting, value, getattr(lim, limit), limit, explanation))

    cap("scopes", scopes, "scopes", "number of scopes")
    cap("parameters", parameters, "parameters", "entries of the list")
    cap("settings.budget.wall_seconds", b.wall_seconds, "scope_wall_seconds", "per scope")
    cap("settings.budget.wall_seconds", b.wall_seconds * scopes, "audit_wall_seconds",
        f"× {scopes} scope(s) = the audit's wall budget")
    cap("settings.budget.wall_seconds", 2 * b.wall_seconds + 30, "fit_cpu_seconds",
        "each fit's CPU limit is 2 × wall_seconds + 30")
    cap("settings.budget.memory_mb", b.memory_mb, "fit_memory_mb", "per fit")
    cap("settings.budget.max_looks", b.max_looks, "looks")
    cap("settings.pymc.chains", s.pymc.chains, "chains")
    cap("settings.lazyppl.chains", s.lazyppl.chains, "chains")
    cap("settings.pymc.tune", s.pymc.tune, "tune")
    cap("settings.pymc.retry_target_accepts", len(s.pymc.retry_target_accepts), "retries",
        "number of entries")
    for side, group in (("pymc", s.pymc), ("lazyppl", s.lazyppl)):
        last = final_draws(group.draws, b.growth, b.max_looks)
        grown = (f"draws {group.draws} × growth {b.growth:g} over {b.max_looks} looks "
                 f"= {last} per chain")
        cap(f"settings.{side}.draws", last, "final_draws", grown)
        cap(f"settings.{side}.draws", group.chains * last * _VALUE_BYTES / _MB, "output_mb",
            f"{group.chains} chains × {last} draws × 8 bytes per scalar, in MB")
    last = final_draws(s.lazyppl.draws, b.growth, b.max_looks)
    steps = s.lazyppl.warmup + last * s.lazyppl.thin
    cap("settings.lazyppl.thin", steps, "lazyppl_steps",
        f"warmup {s.lazyppl.warmup} + {last} final draws × thin {s.lazyppl.thin} steps per chain")
    return out


def check(settings: AuditSettings, limits: LimitSettings, *, scopes: int,
          parameters: int = 0) -> str | None:
    """One message listing every exceeded cap, or None when the request is within them."""
    found = over_caps(settings, limits, scopes=scopes, parameters=parameters)
    return "; ".join(o.message() for o in found) or None
