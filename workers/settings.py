"""Audit settings: the product's considered defaults, every one overridable per request.

These are plain pydantic models with ``extra="forbid"`` so that an unknown key is a 422
at the API and a clear error in the CLI. The resolved settings are stored with every
result, so a verdict can be re-derived with exactly the numbers that produced it.
"""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


class _Group(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PyMCSettings(_Group):
    """NUTS settings. ``target_accept`` is raised to each of ``retry_target_accepts`` in
    turn while a fit has divergences, and a dense or low-rank ``mass_matrix`` that still
    diverges at the last tries it once more with a diagonal one (every attempt is
    recorded)."""

    chains: int = Field(4, ge=1, le=16)
    tune: int = Field(1000, ge=50, le=20000)
    draws: int = Field(1000, ge=50, le=50000)
    target_accept: float = Field(0.9, gt=0.5, lt=1.0)
    # each a NUTS acceptance target, so strictly between 0 and 1; how many is the
    # operator's cap (service LimitSettings.retries), not the schema's
    retry_target_accepts: list[Annotated[float, Field(gt=0.0, lt=1.0)]] = Field(
        default_factory=lambda: [0.95, 0.99])
    # "auto": the measured rule of workers/pymc_runner/choice.py (NumPyro for small
    # models, nutpie for large ones, nutpie when NumPyro fails), recorded as
    # sampler.backend_choice. Re-measured with auto in session 8: the corpus (same
    # verdicts on all 46, audit seconds 2,520 -> 1,493) and the calibration study (every
    # pair as with nutpie). Not the default: the SPEC eight-schools pair through the CLI
    # took 27.2 s with auto against 13.0 s with nutpie (cold JAX in a fresh child, XLA
    # compiles inside each sampling); batches of posteriors are where auto wins.
    backend: Literal["pymc", "nutpie", "numpyro", "blackjax", "auto"] = "nutpie"
    # low-rank (nutpie) / dense (pymc, numpyro) adaptation: measured 10× the ESS per
    # second of a diagonal one on correlated regressions (benchmarks/nuts_backends.py)
    mass_matrix: Literal["diag", "low_rank", "dense"] = "low_rank"
    # SPEC §2.1 profile the program is verified against (docs/PYMC_PROFILE.md): `strict`
    # (no Potential, no scan), or `standard` (idiomatic I/O-free PyMC model code).
    profile: Literal["strict", "standard"] = "strict"
    # A later look extends the look before's nutpie chains instead of refitting them
    # (same draws; docs/ARCHITECTURE.md "Continued chains"). Off by default: each chain
    # samples on until the slowest one has the draws asked, and on 2 cores with both
    # scopes and LazyPPL running that overshoot cost more than the extensions saved
    # (session 29: gp_pois_regr, both eight schools, hmm_drive_0: 298 vs 276 s, a fresh
    # diagonal attempt 74 vs 47 CPU-s, the extended ones 5.7 vs 8.5 CPU-s; hmm_drive_1
    # alone, 4 looks: 290 vs 265 s, one chain ~10x slower than the others at look 1).
    extend_chains: bool = False


class LazyPPLSettings(_Group):
    """Metropolis-Hastings settings. Each chain runs ``warmup`` adaptation steps, then
    keeps every ``thin``-th of ``draws * thin`` steps."""

    chains: int = Field(4, ge=1, le=16)
    warmup: int = Field(4000, ge=0, le=10_000_000)
    draws: int = Field(1000, ge=50, le=100_000)
    thin: int = Field(10, ge=1, le=10_000)
    kernel: str = Field("default", pattern=r"^[a-z][a-z0-9_-]{0,31}$")


class RuleSettings(_Group):
    """SPEC §4 comparison rule and convergence gates."""

    k: float = Field(4.0, gt=0)
    delta: float = Field(0.2, gt=0)
    sd_ratio_band: tuple[float, float] = (0.8, 1.25)
    rhat_max: float = Field(1.01, ge=1.0)
    ess_bulk_min: float = Field(400, ge=0)
    ess_tail_min: float = Field(400, ge=0)
    max_divergences: int = Field(0, ge=0)
    # issue 14 item 3 (docs/RULE.md): a scope whose one fit failed its gates on R-hat or
    # ESS only may still disagree when every chain of that fit, alone with its own MCSE,
    # lies wholly outside the delta band (or is wholly wider than the SD band). Opt-in:
    # SPEC §4 (binding) says a failed gate is never disagree; on by default only once
    # the SPEC says so
    gross_difference: bool = False

    @field_validator("sd_ratio_band")
    @classmethod
    def _band_ordered(cls, band: tuple[float, float]) -> tuple[float, float]:
        lo, hi = band
        if not (0 < lo < 1 < hi):
            raise ValueError("sd_ratio_band must be [lo, hi] with 0 < lo < 1 < hi")
        return band


class BudgetSettings(_Group):
    """Adaptive run length: a scope left inconclusive only for lack of draws (intervals
    too wide, or ESS / R-hat shortfalls of chains that mix slowly rather than sit in
    separate modes) takes another look: the fits whose Monte Carlo error keeps it
    undecided are refitted from the same seed with the draws projected to decide it
    (``workers.looks``), the other fit is kept, until the scope is decisive,
    ``max_looks`` looks were taken, or the projected fits would not end within
    ``wall_seconds``. ``growth`` is no longer used by the looks (issue 14); it is kept
    so that stored settings still validate."""

    wall_seconds: float = Field(900, gt=0)
    max_looks: int = Field(4, ge=1, le=10)
    growth: float = Field(2.0, ge=1.0, le=10.0)
    memory_mb: int = Field(4096, ge=256, le=65536)


class AuditSettings(_Group):
    """All settings of one audit; ``seed`` seeds every fit (derived per scope/side)."""

    seed: int = Field(20261130, ge=0, lt=2**31)
    pymc: PyMCSettings = Field(default_factory=PyMCSettings)
    lazyppl: LazyPPLSettings = Field(default_factory=LazyPPLSettings)
    rule: RuleSettings = Field(default_factory=RuleSettings)
    budget: BudgetSettings = Field(default_factory=BudgetSettings)

    def with_overrides(self, overrides: dict | None) -> AuditSettings:
        """These settings with the keys named in ``overrides`` replaced, group by group
        (``{"pymc": {"profile": "standard"}}`` changes that one key), validated again.
        A corpus translation's ``meta.json`` ``settings`` are applied this way on top of
        a batch's settings (what the program needs: its profile, a mass matrix)."""
        if not overrides:
            return self
        merged = self.model_dump(mode="json")
        for key, value in overrides.items():
            if isinstance(merged.get(key), dict) and isinstance(value, dict):
                merged[key] = {**merged[key], **value}
            else:
                merged[key] = value  # unknown keys are refused by validation
        return AuditSettings.model_validate(merged)


def derive_seed(seed: int, scope: str, side: str) -> int:
    """A seed per (scope, side), stable across processes (no Python hash randomisation)."""
    import hashlib

    digest = hashlib.sha256(f"{seed}:{scope}:{side}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % (2**31 - 1)
