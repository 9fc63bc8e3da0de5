"""Readable terminal tables of an audit's evidence and of a batch report (rich)."""
from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table

COLOURS = {"agree": "green", "inconclusive": "yellow", "disagree": "red", "error": "magenta"}


def badge(verdict: str | None) -> str:
    v = verdict or "—"
    return f"[bold {COLOURS.get(v, 'white')}]{v}[/]"


def _num(x, fmt: str = "{:+.3f}") -> str:
    return "—" if x is None else fmt.format(x)


def _interval(iv, fmt: str = "{:+.3f}") -> str:
    if not iv or iv[0] is None or iv[1] is None:
        return "—"
    return f"[{fmt.format(iv[0])}, {fmt.format(iv[1])}]"


def _rows_table(title: str, rows: list[dict], cand: str, base: str) -> Table:
    t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    sides = "/".join({"lazyppl": "L", "pymc": "P", "reference": "ref"}.get(x, x)
                     for x in (cand, base))
    for col, just in (("parameter", "left"), ("d", "right"), ("D = d ± k·MCSE", "right"),
                      ("r", "right"), ("R", "right"), (f"bulk ESS {sides}", "right"),
                      (f"R-hat {sides}", "right"), ("verdict", "left")):
        t.add_column(col, justify=just, no_wrap=True)
    for row in rows:
        c, b = row.get(cand) or {}, row.get(base) or {}
        ess = f"{_num(c.get('ess_bulk'), '{:.0f}')}/{_num(b.get('ess_bulk'), '{:.0f}')}"
        rhat = f"{_num(c.get('rhat'), '{:.3f}')}/{_num(b.get('rhat'), '{:.3f}')}"
        t.add_row(row["parameter"], _num(row.get("d")), _interval(row.get("D")),
                  _num(row.get("r"), "{:.3f}"), _interval(row.get("R"), "{:.3f}"),
                  ess, rhat, badge(row.get("verdict")))
    return t


def print_audit(console: Console, ev: dict) -> None:
    """The verdict first, then a table per scope with gates, hints and the reference check."""
    pair = ("pymc", "reference") if ev.get("kind") == "reference" else ("lazyppl", "pymc")
    console.print("P = PyMC, ref = posteriordb reference (baseline)" if pair[0] == "pymc" else
                  "L = LazyPPL, P = PyMC (baseline)", style="dim", end="")
    console.print("; d in baseline SDs, r = SD ratio", style="dim")
    console.print(f"\n[bold]{ev.get('name', 'audit')}[/]: {badge(ev.get('verdict'))} — {ev.get('reason', '')}",
                  highlight=False)
    for name, sc in (ev.get("scopes") or {}).items():
        console.print(f"\n[bold]scope {name}[/]: {badge(sc.get('verdict'))} — {sc.get('reason', '')}",
                      highlight=False)
        if sc.get("comparisons"):
            title = "PyMC vs reference" if pair[0] == "pymc" else "LazyPPL vs PyMC"
            console.print(_rows_table(f"{title} ({name})", sc["comparisons"], *pair))
        for side, failed in (sc.get("gates") or {}).items():
            for f in failed:
                console.print(f"  gate failed ({side}): {f}", style="yellow", highlight=False)
        for row in sc.get("comparisons") or []:
            for h in row.get("hints") or []:
                console.print(f"  hint ({row['parameter']}): {h}", style="cyan", highlight=False)
        for h in sc.get("hints") or []:
            console.print(f"  hint: {h}", style="cyan", highlight=False)
        ref = sc.get("reference")
        if ref:
            for key, label in (("pymc_vs_reference", "PyMC vs reference"),
                               ("lazyppl_vs_reference", "LazyPPL vs reference")):
                part = ref.get(key) or {}
                console.print(f"  {label}: {badge(part.get('verdict'))} — {part.get('reason', '')}",
                              highlight=False)
        looks = sc.get("looks") or []
        if len(looks) > 1:
            console.print("  looks: " + "; ".join(
                f"{lk['look']}: {lk['pymc_draws']}/{lk.get('lazyppl_draws', '-')} draws → "
                f"{lk['verdict']}"
                for lk in looks), highlight=False)
        if sc.get("uncompared_pymc"):
            console.print(f"  PyMC variables not compared: {', '.join(sc['uncompared_pymc'])}",
                          highlight=False)
    if ev.get("error"):
        console.print(f"\nerror ({ev['error']['code']}): {ev['error']['message']}", style="magenta",
                      highlight=False)
    if ev.get("id"):
        console.print(f"\nstored as audit {ev['id']}", style="dim")


def print_batch(console: Console, report: dict) -> None:
    """A row per posterior (verdict per scope and reference checks), then SPEC §4 counts."""
    t = Table(title="posteriordb batch", title_justify="left", box=box.SIMPLE_HEAD)
    for col in ("posterior", "verdict", "visible", "full", "PyMC↔ref", "LazyPPL↔ref", "seconds"):
        t.add_column(col, justify="right" if col == "seconds" else "left")
    for e in report["posteriors"]:
        sc = e.get("scopes", {})
        t.add_row(e["posterior"], badge(e["verdict"]),
                  badge((sc.get("visible") or {}).get("verdict")),
                  badge((sc.get("full") or {}).get("verdict")),
                  badge(e["reference"].get("pymc_vs_reference")),
                  badge(e["reference"].get("lazyppl_vs_reference")),
                  f"{e['seconds']:.0f}{'*' if e.get('reused') else ''}")
    console.print(t)
    s = report["summary"]
    p, sc, d = s["posteriors"], s["scopes"], s["abs_d"]
    console.print(f"posteriors: {p['agree']} agree, {p['inconclusive']} inconclusive, "
                  f"{p['disagree']} disagree, {p.get('error', 0)} error (of {s['total']})", highlight=False)
    console.print(f"scope comparisons: {sc['agree']} agree, {sc['inconclusive']} inconclusive, "
                  f"{sc['disagree']} disagree, {sc.get('error', 0)} error", highlight=False)
    if d["count"]:
        console.print(f"|d| over {d['count']} parameter comparisons: median {d['median']:.3f}, "
                      f"95th percentile {d['p95']:.3f}, max {d['max']:.3f}, above 1: {d['above_1']}",
                      highlight=False)
    for e in report["posteriors"]:
        if e["verdict"] != "agree":
            console.print(f"  {e['posterior']}: {e['reason']}", style="dim", highlight=False)
    console.print(f"({report['seconds']:.0f} s; * = stored result reused)", style="dim")
