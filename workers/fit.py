"""The value both runners return, and SPEC §2.3 parameter naming."""
from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, field

import numpy as np

_SCALAR = re.compile(r"^(?P<base>[^\[\]]+)(\[(?P<idx>[0-9, ]+)\])?$")

#: Most scalars one fit may report, all parameters together (a model reports a few
#: dozen; posteriordb's largest references have a few hundred). More is refused.
MAX_SCALARS = 2_000
#: Longest base name accepted, in characters.
MAX_BASE_CHARS = 100
#: SPEC §2.3 names, strictly: a base name is an identifier (posteriordb/Stan style);
#: indices are 1-based decimal integers without leading zeros, comma-separated.
_BASE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_STRICT_SCALAR = re.compile(r"(?P<base>[A-Za-z_][A-Za-z0-9_]*)"
                            r"(?:\[(?P<idx>[1-9][0-9]{0,5}(?:,[1-9][0-9]{0,5})*)\])?")


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
    #: A LazyPPL fit's per-chain checkpoints (opaque strings the harness wrote after the
    #: last draw), from which a later look continues the chains instead of refitting.
    #: Held in memory for the scope's looks only: never stored, never shown.
    checkpoints: list[str] | None = field(default=None, repr=False, compare=False)

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


class ReportedNameError(ValueError):
    """A program reported scalar names outside SPEC §2.3; ``name`` is the first bad one."""

    def __init__(self, message: str, name: str) -> None:
        super().__init__(message)
        self.name = name


def check_reported_names(names: list, shapes: dict | None = None) -> dict[str, tuple[int, ...]]:
    """Validate the scalar names a program reported; return base name -> shape.

    Strict SPEC §2.3: each base name is an identifier (``_BASE``, at most
    :data:`MAX_BASE_CHARS`); a scalar is ``base`` or ``base[i,j,...]`` with 1-based
    indices; every base's indices are dense (all of 1..n in each dimension, the same
    number of dimensions throughout), in row-major order; at most :data:`MAX_SCALARS`
    in all. With ``shapes`` (base -> list of dimensions, as the LazyPPL harness reports
    them) the names must be exactly their expansion, in order. Raises
    :class:`ReportedNameError` naming the first offending name.
    """
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ReportedNameError("the reported names are not a list of strings", "")
    if len(names) > MAX_SCALARS:
        raise ReportedNameError(f"the program reports {len(names)} scalars, more than the "
                                f"limit of {MAX_SCALARS}", names[0])
    if shapes is not None:
        return _check_against_shapes(names, shapes)
    layout: dict[str, list[tuple[int, ...]]] = {}
    for name in names:
        m = _STRICT_SCALAR.fullmatch(name)
        if not m or len(m.group("base")) > MAX_BASE_CHARS:
            raise ReportedNameError(f"{name!r} is not a parameter name (SPEC §2.3: a name "
                                    "such as mu, theta[1] or beta[2,3])", name)
        idx = tuple(int(i) for i in m.group("idx").split(",")) if m.group("idx") else ()
        layout.setdefault(m.group("base"), []).append(idx)
    result = {}
    for base, indices in layout.items():
        ndims = {len(i) for i in indices}
        shape = tuple(max(col) for col in zip(*indices)) if ndims == {len(indices[0])} else ()
        # dense means exactly the row-major product of 1..n per dimension; compare the
        # counts first so that alpha[200000] never expands 200000 names
        dense = len(ndims) == 1 and math.prod(shape) == len(indices) and indices == list(
            itertools.product(*(range(1, d + 1) for d in shape)))
        if not dense:
            bad = indices[-1]
            shown = f"{base}[{','.join(map(str, bad))}]" if bad else base
            raise ReportedNameError(
                f"the scalars of {base!r} are not indexed 1..n in every dimension, once "
                f"each, in row-major order (e.g. {shown!r})", shown)
        result[base] = shape
    return result


def _check_against_shapes(names: list[str], shapes: dict) -> dict[str, tuple[int, ...]]:
    result: dict[str, tuple[int, ...]] = {}
    total = 0
    for base, shape in shapes.items():
        if not (isinstance(base, str) and _BASE.fullmatch(base)
                and len(base) <= MAX_BASE_CHARS):
            raise ReportedNameError(f"{base!r} is not a parameter name (SPEC §2.3: an "
                                    "identifier such as mu or theta)", str(base))
        if not (isinstance(shape, list) and len(shape) <= 8 and all(
                isinstance(d, int) and not isinstance(d, bool) and 0 <= d <= MAX_SCALARS
                for d in shape)):
            raise ReportedNameError(f"parameter {base!r} has a malformed shape {shape!r}",
                                    base)
        size = 1
        for d in shape:
            size *= d
        total += size
        if total > MAX_SCALARS:
            raise ReportedNameError(f"the program reports more than {MAX_SCALARS} scalars "
                                    f"(at {base!r})", base)
        result[base] = tuple(shape)
    expected = [n for base, shape in result.items() for n in scalar_names(base, shape)]
    if names != expected:
        mismatch = [n for n, e in zip(names, expected) if n != e]
        extra = names[len(expected):] or expected[len(names):]
        bad = (mismatch or extra)[0]
        raise ReportedNameError(f"the reported names do not match the reported shapes "
                                f"(at {bad!r})", bad)
    return result


def flatten_array(base: str, values: np.ndarray) -> dict[str, np.ndarray]:
    """(chains, draws, *shape) array -> {scalar name: (chains, draws)}."""
    values = np.asarray(values, dtype=np.float64)
    chains, draws = values.shape[:2]
    shape = values.shape[2:]
    flat = values.reshape(chains, draws, -1)
    return {name: flat[:, :, i] for i, name in enumerate(scalar_names(base, shape))}
