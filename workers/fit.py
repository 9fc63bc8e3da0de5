"""The value both runners return, and SPEC §2.3 parameter naming."""
from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field

import numpy as np

_SCALAR = re.compile(r"^(?P<base>[^\[\]]+)(\[(?P<idx>[0-9, ]+)\])?$")


@dataclass(frozen=True)
class Fit:
    """Posterior draws of one program on one scope, with provenance.

    ``draws`` maps SPEC §2.3 scalar names (``mu``, ``theta[1]``, ``beta[2,3]``) to
    float64 arrays shaped (chains, draws).
    """

    language: str
    draws: dict[str, np.ndarray]
    divergences: int = 0
    sampler: dict = field(default_factory=dict)
    stats: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    versions: dict = field(default_factory=dict)
    reportable: list[str] = field(default_factory=list)

    @property
    def n_chains(self) -> int:
        return next(iter(self.draws.values())).shape[0] if self.draws else 0

    @property
    def n_draws(self) -> int:
        return next(iter(self.draws.values())).shape[1] if self.draws else 0


def scalar_names(base: str, shape: tuple[int, ...] | list[int]) -> list[str]:
    """Expand a base name and shape to 1-based scalar names in row-major order."""
    shape = tuple(int(s) for s in shape)
    if shape == ():
        return [base]
    return [
        f"{base}[{','.join(str(i + 1) for i in idx)}]"
        for idx in itertools.product(*(range(s) for s in shape))
    ]


def base_name(scalar: str) -> str:
    """``beta[2,3]`` -> ``beta``; ``mu`` -> ``mu``."""
    m = _SCALAR.match(scalar.strip())
    if not m:
        raise ValueError(f"not a parameter name: {scalar!r}")
    return m.group("base")


def flatten_array(base: str, values: np.ndarray) -> dict[str, np.ndarray]:
    """(chains, draws, *shape) array -> {scalar name: (chains, draws)}."""
    values = np.asarray(values, dtype=np.float64)
    chains, draws = values.shape[:2]
    shape = values.shape[2:]
    flat = values.reshape(chains, draws, -1)
    return {name: flat[:, :, i] for i, name in enumerate(scalar_names(base, shape))}
