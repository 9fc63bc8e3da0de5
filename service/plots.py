"""Forest plots as inline SVG, drawn on the server (no JavaScript, no image files).

One row per parameter: the point estimate, its Monte Carlo interval (k·MCSE), and the
agreement band shaded behind. ``d`` is drawn on a linear axis against ±δ; the SD ratio
``r`` on a log axis against [lo, hi] so that r and 1/r sit symmetrically about 1.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

COLOURS = {"agree": "#1a7f37", "inconclusive": "#b7791f", "disagree": "#cf222e",
           "error": "#6e7781"}


@dataclass(frozen=True)
class Row:
    label: str
    point: float | None
    lo: float | None
    hi: float | None
    verdict: str


def _finite(*xs) -> bool:
    return all(x is not None and math.isfinite(x) for x in xs)


def _ticks(lo: float, hi: float, log: bool) -> list[float]:
    if log:
        candidates = [0.25, 0.5, 0.67, 0.8, 1.0, 1.25, 1.5, 2.0, 4.0]
        return [t for t in candidates if lo <= t <= hi]
    span = hi - lo
    step = 10 ** math.floor(math.log10(span / 4)) if span > 0 else 1
    for mult in (1, 2, 2.5, 5, 10):
        if span / (step * mult) <= 6:
            step *= mult
            break
    first = math.ceil(lo / step) * step
    return [round(first + i * step, 10) for i in range(int((hi - first) / step) + 1)]


def forest_svg(rows: list[Row], *, band: tuple[float, float], log: bool = False,
               title: str = "", reference: float = 0.0, width: int = 560) -> str:
    """An SVG forest plot. ``band`` is the agreement region; ``reference`` the no-difference
    line (0 for d, 1 for r). Intervals are clipped at the axis ends (marked with ◂ ▸)."""
    f = (lambda x: math.log(x)) if log else (lambda x: x)
    values = [band[0], band[1], reference]
    for r in rows:
        values += [v for v in (r.point, r.lo, r.hi) if _finite(v) and (not log or v > 0)]
    lo_v, hi_v = min(values), max(values)
    if log:
        lo_v, hi_v = min(lo_v, 0.6), max(hi_v, 1.6)
        # keep the axis useful when one interval is absurdly wide
        lo_v, hi_v = max(lo_v, 0.1), min(hi_v, 10.0)
    else:
        pad = 0.1 * (hi_v - lo_v or 1)
        lo_v, hi_v = lo_v - pad, hi_v + pad
        lim = max(3.0, 3 * max(abs(band[0]), abs(band[1])))
        lo_v, hi_v = max(lo_v, -lim), min(hi_v, lim)
    left, right, top, row_h = 130, 20, 28, 22
    plot_w = width - left - right
    height = top + row_h * max(1, len(rows)) + 34
    a, b = f(lo_v), f(hi_v)

    def x(v: float) -> float:
        v = min(max(v, lo_v), hi_v)
        return left + (f(v) - a) / (b - a) * plot_w

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
           f'width="{width}" height="{height}" role="img" aria-label="{escape(title)}" '
           f'class="forest" font-family="system-ui, sans-serif" font-size="12">']
    if title:
        out.append(f'<text x="{left}" y="16" font-weight="600">{escape(title)}</text>')
    bottom = top + row_h * max(1, len(rows))
    out.append(f'<rect x="{x(band[0]):.1f}" y="{top}" width="{x(band[1]) - x(band[0]):.1f}" '
               f'height="{bottom - top}" fill="#dafbe1" />')
    out.append(f'<line x1="{x(reference):.1f}" x2="{x(reference):.1f}" y1="{top}" y2="{bottom}" '
               f'stroke="#8c959f" stroke-dasharray="3,3" />')
    for t in _ticks(lo_v, hi_v, log):
        out.append(f'<line x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{bottom}" y2="{bottom + 4}" stroke="#57606a"/>')
        out.append(f'<text x="{x(t):.1f}" y="{bottom + 16}" text-anchor="middle" fill="#57606a">{t:g}</text>')
    out.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{bottom}" y2="{bottom}" stroke="#57606a"/>')
    for i, r in enumerate(rows):
        y = top + row_h * i + row_h / 2
        colour = COLOURS.get(r.verdict, "#6e7781")
        out.append(f'<text x="{left - 8}" y="{y + 4:.1f}" text-anchor="end">{escape(r.label)}</text>')
        if _finite(r.lo, r.hi) and (not log or (r.lo > 0 and r.hi > 0)):
            out.append(f'<line x1="{x(r.lo):.1f}" x2="{x(r.hi):.1f}" y1="{y:.1f}" y2="{y:.1f}" '
                       f'stroke="{colour}" stroke-width="3" stroke-linecap="round"/>')
            if r.lo < lo_v:
                out.append(f'<text x="{left - 2}" y="{y + 4:.1f}" fill="{colour}">◂</text>')
            if r.hi > hi_v:
                out.append(f'<text x="{left + plot_w - 6}" y="{y + 4:.1f}" fill="{colour}">▸</text>')
        if _finite(r.point) and (not log or r.point > 0):
            out.append(f'<circle cx="{x(r.point):.1f}" cy="{y:.1f}" r="4.5" fill="white" '
                       f'stroke="{colour}" stroke-width="2"><title>{escape(r.label)}: '
                       f'{r.point:.3g} [{(r.lo or float("nan")):.3g}, {(r.hi or float("nan")):.3g}] '
                       f'{r.verdict}</title></circle>')
        else:
            out.append(f'<text x="{left + 4}" y="{y + 4:.1f}" fill="#6e7781">not defined</text>')
    out.append("</svg>")
    return "".join(out)


def band_verdict(interval, band) -> str:
    """Colour of one interval against its own band: inside (agree), wholly outside
    (disagree) or straddling (inconclusive). The row's verdict combines both plots."""
    if not interval or len(interval) < 2 or not _finite(interval[0], interval[1]):
        return "inconclusive"
    lo, hi = interval[0], interval[1]
    if band[0] <= lo and hi <= band[1]:
        return "agree"
    if hi < band[0] or lo > band[1]:
        return "disagree"
    return "inconclusive"


def scope_plots(comparisons: list[dict], rule: dict) -> tuple[str, str]:
    """(d plot, SD-ratio plot) for one scope's comparison rows (evidence format). Each
    interval is coloured by where it lies against that plot's band."""
    delta = float(rule.get("delta", 0.2))
    band = tuple(rule.get("sd_ratio_band", (0.8, 1.25)))
    d_rows = [Row(c["parameter"], c.get("d"), *(c.get("D") or (None, None)),
                  band_verdict(c.get("D"), (-delta, delta))) for c in comparisons]
    r_rows = [Row(c["parameter"], c.get("r"), *(c.get("R") or (None, None)),
                  band_verdict(c.get("R"), band)) for c in comparisons]
    return (forest_svg(d_rows, band=(-delta, delta), title=f"standardized mean difference d (band ±{delta:g})"),
            forest_svg(r_rows, band=band, log=True, reference=1.0,
                       title=f"SD ratio r, log scale (band {band[0]:g}–{band[1]:g})"))
