"""Density overlays for the audit page: for each parameter that disagrees or is
inconclusive, the two fits' marginal densities (and posteriordb's reference draws when
the audit has them) drawn on one axis, as inline SVG computed on the server from the
stored draws (no JavaScript, like the forest plots of :mod:`service.plots`).

Densities are Gaussian kernel estimates with Silverman's bandwidth on at most
``MAX_POINTS`` draws per side (evenly thinned, all chains pooled), evaluated on
``GRID`` points spanning the 0.5–99.5% quantiles of every side together, so one far
outlier does not squash the picture. The y axis is density in 1/(parameter units).
"""
from __future__ import annotations

import io
import math
from html import escape

import numpy as np

#: Draws per side used for one curve (pooled over chains, evenly thinned).
MAX_POINTS = 4000
#: Points on the x axis.
GRID = 160
#: Parameters drawn per scope at most (worst first: disagree before inconclusive).
MAX_PLOTS = 12
COLOURS = {"lazyppl": "#8250df", "pymc": "#0969da", "reference": "#1f2328"}
LABELS = {"lazyppl": "LazyPPL", "pymc": "PyMC", "reference": "posteriordb reference"}


def kde(values: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Gaussian KDE of ``values`` on ``grid`` (Silverman's rule; a point mass becomes a
    narrow spike of width 1e-3 of the grid span rather than a division by zero)."""
    x = np.asarray(values, dtype=float).ravel()
    x = x[np.isfinite(x)]
    if x.size == 0:
        return np.zeros_like(grid)
    if x.size > MAX_POINTS:
        x = x[np.linspace(0, x.size - 1, MAX_POINTS).astype(int)]
    sd = float(np.std(x))
    iqr = float(np.subtract(*np.percentile(x, [75, 25])))
    spread = min(sd, iqr / 1.349) if iqr > 0 else sd
    h = 0.9 * spread * x.size ** -0.2
    if not h > 0:
        h = max(1e-3 * float(grid[-1] - grid[0]), 1e-12)
    z = (grid[:, None] - x[None, :]) / h
    return np.exp(-0.5 * z * z).sum(axis=1) / (x.size * h * math.sqrt(2 * math.pi))


def _span(sides: dict[str, np.ndarray]) -> tuple[float, float]:
    finite = [v[np.isfinite(v)] for v in sides.values()]
    qs = [np.percentile(v, [0.5, 99.5]) for v in finite if v.size]
    if not qs:
        return -1.0, 1.0
    lo, hi = min(q[0] for q in qs), max(q[1] for q in qs)
    if not hi > lo:
        lo, hi = lo - 0.5, hi + 0.5
    pad = 0.05 * (hi - lo)
    return lo - pad, hi + pad


def _ticks(lo: float, hi: float) -> list[float]:
    step = 10 ** math.floor(math.log10((hi - lo) / 4))
    for mult in (1, 2, 2.5, 5, 10):
        if (hi - lo) / (step * mult) <= 5:
            step *= mult
            break
    first = math.ceil(lo / step) * step
    return [round(first + i * step, 10) for i in range(int((hi - first) / step) + 1)]


def density_svg(parameter: str, verdict: str, sides: dict[str, np.ndarray],
                width: int = 360, height: int = 170) -> str:
    """One overlay: a curve per side (keys of :data:`COLOURS`), a legend, an x axis."""
    lo, hi = _span(sides)
    grid = np.linspace(lo, hi, GRID)
    curves = {side: kde(v, grid) for side, v in sides.items()}
    top_y = max((float(c.max()) for c in curves.values()), default=0.0) or 1.0
    left, right, top, bottom = 10, 10, 34, height - 26

    def px(v: float) -> float:
        return left + (v - lo) / (hi - lo) * (width - left - right)

    def py(d: float) -> float:
        return bottom - d / top_y * (bottom - top)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
           f'width="{width}" height="{height}" role="img" class="density" '
           f'aria-label="{escape(parameter)}: marginal densities" '
           f'font-family="system-ui, sans-serif" font-size="11">',
           f'<text x="{left}" y="14" font-weight="600">{escape(parameter)} '
           f'<tspan font-weight="400" fill="#57606a">({escape(verdict)})</tspan></text>']
    x = left + 2
    for side in curves:
        dash = ' stroke-dasharray="4,2"' if side == "reference" else ""
        out.append(f'<line x1="{x}" x2="{x + 14}" y1="25" y2="25" stroke="{COLOURS[side]}" '
                   f'stroke-width="2"{dash}/><text x="{x + 18}" y="29">{LABELS[side]}</text>')
        x += 26 + 6.5 * len(LABELS[side])
    for side, c in curves.items():
        points = " ".join(f"{px(g):.1f},{py(d):.1f}" for g, d in zip(grid, c))
        dash = ' stroke-dasharray="4,2"' if side == "reference" else ""
        out.append(f'<polyline points="{points}" fill="none" stroke="{COLOURS[side]}" '
                   f'stroke-width="1.8"{dash}><title>{LABELS[side]}</title></polyline>')
    out.append(f'<line x1="{left}" x2="{width - right}" y1="{bottom}" y2="{bottom}" stroke="#57606a"/>')
    for t in _ticks(lo, hi):
        out.append(f'<line x1="{px(t):.1f}" x2="{px(t):.1f}" y1="{bottom}" y2="{bottom + 4}" '
                   f'stroke="#57606a"/><text x="{px(t):.1f}" y="{bottom + 15}" '
                   f'text-anchor="middle" fill="#57606a">{t:g}</text>')
    out.append("</svg>")
    return "".join(out)


def wanted(comparisons: list[dict]) -> list[tuple[str, str]]:
    """(parameter, verdict) of the rows to draw: disagree first, then inconclusive."""
    rank = {"disagree": 0, "inconclusive": 1}
    rows = [(c["parameter"], c.get("verdict")) for c in comparisons if c.get("verdict") in rank]
    return sorted(rows, key=lambda pv: rank[pv[1]])[:MAX_PLOTS]


def read_members(blob: bytes, names: list[str]) -> dict[str, np.ndarray]:
    """Only the named arrays of a stored fit (call ``check_stored`` on it first)."""
    with np.load(io.BytesIO(blob), allow_pickle=False) as archive:
        return {n: archive[n] for n in names if n in archive.files}


def scope_overlays(session, audit, scope: str, evidence: dict, *, max_scalars: int,
                   max_mb: float) -> list[str]:
    """SVG overlays for one scope of a stored audit: each parameter that disagrees or is
    inconclusive (LazyPPL vs PyMC, or PyMC vs the reference), from the last look's stored
    fits and, on posteriordb's ``full`` scope, the reference draws (stored with the audit
    when they came from a user's posteriordb checkout, else the shipped ones). Stored draws
    come from untrusted programs: each fit passes the download checks first, and a fit
    that fails them is left out."""
    from service.db import audits as audit_repo
    from service.db.draws import UnservableDraws, check_stored

    rows = list(evidence.get("comparisons") or [])
    reference = evidence.get("reference") or {}
    for pair in ("pymc_vs_reference", "lazyppl_vs_reference"):
        rows += list((reference.get(pair) or {}).get("comparisons") or [])
    seen, targets = set(), []
    for name, verdict in wanted(rows):
        if name not in seen:
            seen.add(name)
            targets.append((name, verdict))
    if not targets:
        return []
    names = [n for n, _ in targets]
    sides: dict[str, dict[str, np.ndarray]] = {}
    for language in ("lazyppl", "pymc", "reference"):  # reference: kept from a user's posteriordb
        record = audit_repo.fit_record(session, audit.id, scope, language)
        if record is None:
            continue
        try:
            check_stored(record.draws, max_scalars=max_scalars, max_mb=max_mb)
        except UnservableDraws:
            continue
        sides[language] = read_members(record.draws, names)
    if "reference" not in sides and audit.posterior and (scope == "full" or evidence.get("kind") == "reference"
                            or evidence.get("reference")):
        try:
            from corpus.loader import load_reference

            ref = load_reference(audit.posterior).draws
            sides["reference"] = {n: ref[n] for n in names if n in ref}
        except (KeyError, OSError, ValueError):
            pass
    out = []
    for name, verdict in targets:
        present = {side: draws[name] for side, draws in sides.items() if name in draws}
        if len(present) >= 2:
            out.append(density_svg(name, verdict, present))
    return out
