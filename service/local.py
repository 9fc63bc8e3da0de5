"""`ppl-audit audit` and `ppl-audit batch`: audits with no servers.

The pipeline runs in this process (each program still in its sandboxed subprocess) and
results go to the embedded SQLite database through the same models as the service, so
that `ppl-audit serve` pointed at the same file shows them too.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
import uuid
from pathlib import Path

from rich.console import Console

from service.report import print_audit, print_batch
from workers import pipeline
from workers.compare import batch_summary
from workers.errors import AuditError, InvalidRequest
from workers.settings import AuditSettings


def add_audit_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pymc", required=True, type=Path, help="PyMC program (defines model(data))")
    other = p.add_mutually_exclusive_group(required=True)
    other.add_argument("--lazyppl", type=Path, help="LazyPPL module (exports model)")
    other.add_argument("--reference", metavar="POSTERIOR",
                       help="compare with posteriordb's reference draws of POSTERIOR instead "
                       "(no LazyPPL side; scope full, default: the posterior's data)")
    p.add_argument("--scope", action="append", metavar="NAME=DATA.json",
                   help="a named data set; repeat for several scopes (with --reference: "
                   "only full=DATA.json)")
    p.add_argument("--parameters", help="comma-separated base names to compare (default: "
                   "every name in the LazyPPL draw, or in the reference)")
    p.add_argument("--settings", type=Path, help="JSON file of settings (SPEC §5 groups)")
    p.add_argument("--profile", choices=["strict", "standard"],
                   help="PyMC profile (docs/PYMC_PROFILE.md; overrides the settings file; "
                   "default strict)")
    p.add_argument("--json", action="store_true", help="print the full evidence as JSON")
    p.add_argument("--no-save", action="store_true", help="do not store the result")


def add_batch_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("source", choices=["posteriordb"])
    which = p.add_mutually_exclusive_group()
    which.add_argument("--posteriors", help="comma-separated posterior names")
    which.add_argument("--all", action="store_true", help="every translated posterior (default)")
    p.add_argument("--settings", type=Path, help="JSON file of settings (SPEC §5 groups)")
    p.add_argument("--json", action="store_true", help="print the batch report as JSON")
    p.add_argument("--fresh", action="store_true",
                   help="recompute audits even when an identical one is stored")
    p.add_argument("--database", metavar="PATH",
                   help="a posteriordb checkout (any commit, posteriordb's layout) to read data "
                   "and reference draws from instead of the shipped subset")
    p.add_argument("--pymc-from", choices=["translations", "database"], default="translations",
                   help="whose PyMC program: our translations (default) or each posterior's "
                   "own implementation in the database (model_implementations.pymc)")
    p.add_argument("--lazyppl-from", choices=["translations", "none"],
                   help="translations: audit against our LazyPPL translation where there is "
                   "one (and check both against the reference); none: the PyMC program "
                   "against the reference draws alone (default: translations with our PyMC "
                   "programs, none with --pymc-from database)")
    p.add_argument("--profile", choices=["strict", "standard"],
                   help="PyMC profile (overrides the settings file; default strict)")


def _settings(path: Path | None) -> AuditSettings:
    if path is None:
        return AuditSettings()
    try:
        return AuditSettings.model_validate(json.loads(path.read_text()))
    except (OSError, ValueError) as err:
        raise InvalidRequest(f"settings file {path}: {err}") from None


def _stdout_console() -> Console:
    """Tables need ~100 columns; a pipe gets that width instead of rich's 80."""
    console = Console()
    return console if console.is_terminal else Console(width=120)


def _scopes(specs: list[str]) -> dict[str, dict]:
    scopes = {}
    for spec in specs:
        name, sep, file = spec.partition("=")
        if not sep or not name or not file:
            raise InvalidRequest(f"--scope takes NAME=DATA.json, got {spec!r}")
        try:
            data = json.loads(Path(file).read_text())
        except (OSError, ValueError) as err:
            raise InvalidRequest(f"scope {name!r}: cannot read {file}: {err}") from None
        if not isinstance(data, dict):
            raise InvalidRequest(f"scope {name!r}: {file} must hold a JSON object")
        scopes[name] = data
    return scopes


class _Progress:
    """A one-line live status on stderr (stdout stays clean for --json)."""

    def __init__(self, console: Console, prefix: str = "") -> None:
        self.console, self.prefix, self.status = console, prefix, None
        self.started = time.monotonic()

    def __enter__(self):
        self.status = self.console.status(f"{self.prefix}starting")
        self.status.__enter__()
        return self

    def __exit__(self, *exc):
        self.status.__exit__(*exc)

    def __call__(self, event: str, **info) -> None:
        t = f"[{time.monotonic() - self.started:5.0f} s]"
        if event == "fit":
            msg = (f"scope {info['scope']}: fitting {info['language']} "
                   f"(look {info['look']}, {info['draws']} draws per chain)")
        elif event == "compare":
            msg = f"scope {info['scope']}: comparing"
        elif event == "scope_done":
            self.console.print(f"{t} {self.prefix}scope {info['scope']}: {info['verdict']}")
            return
        else:
            msg = event
        self.status.update(f"{t} {self.prefix}{msg}")


def _session_factory():
    from service.config import get_settings
    from service.db.base import make_engine, make_session_factory
    from service.db.migrate import upgrade

    url = get_settings().database_url
    upgrade(url)
    return make_session_factory(make_engine(url))


def store_result(sessions, request: pipeline.AuditRequest, evidence: dict, fits: dict,
                 *, source: str, posterior: str | None = None) -> uuid.UUID:
    """Write a finished local audit (programs, data, fits, rows, verdict) in one transaction."""
    from service.db import audits as repo

    with sessions.begin() as session:
        audit = repo.create_audit(
            session, name=request.name, pymc_source=request.pymc_source,
            lazyppl_source=request.lazyppl_source, scopes=request.scopes,
            parameters=request.parameters, settings=request.settings.model_dump(mode="json"),
            source=source, posterior=posterior)
        repo.set_status(session, audit, "running")
        for scope, ev in evidence.get("scopes", {}).items():
            scope_fits = [(look, f) for (s, _lang, look), f in fits.items() if s == scope]
            repo.store_scope_outcome(session, audit, scope, ev, scope_fits, seconds=ev.get("seconds"))
        repo.set_status(session, audit, "done", verdict=evidence["verdict"],
                        reason=evidence.get("reason"), error=evidence.get("error"),
                        evidence=evidence)
        return audit.id


def _run_with_progress(request: pipeline.AuditRequest, console: Console, prefix: str = "",
                       standby=None):
    """Run the audit; ``standby`` (the CLI's early-started PyMC session) serves its PyMC
    side when its limits fit the audit's settings, and is closed with it."""
    from workers.pymc_runner.session import limits_for

    session = None
    if standby is not None:
        session = standby.take(limits_for(request.settings),
                               max_children=min(len(request.scopes),
                                                pipeline.MAX_PARALLEL_SCOPES))
    try:
        with _Progress(console, prefix) as progress:
            return pipeline.run_audit(request, progress=progress, pymc_session=session)
    finally:
        if session is not None:
            session.close()


def _audit_settings(args: argparse.Namespace) -> AuditSettings:
    settings = _settings(args.settings)
    if getattr(args, "profile", None):
        pymc = settings.pymc.model_copy(update={"profile": args.profile})
        settings = settings.model_copy(update={"pymc": pymc})
    return settings


def _reference_request(args: argparse.Namespace, name: str, parameters):
    """`--reference POSTERIOR`: the PyMC program against posteriordb's draws."""
    from corpus.loader import load_data, load_reference
    from workers.reference_audit import SCOPE, ReferenceAuditRequest

    names = sorted({spec.partition("=")[0] for spec in args.scope or []})
    if set(names) - {SCOPE}:
        raise InvalidRequest(f"with --reference the only scope is {SCOPE!r} (the data the "
                             f"reference was computed on), got {names}")
    scopes = _scopes(args.scope or [])
    try:
        reference = load_reference(args.reference)
        data = scopes[SCOPE] if SCOPE in scopes else load_data(args.reference)
    except (KeyError, FileNotFoundError, ValueError) as e:
        raise InvalidRequest(f"no posteriordb reference {args.reference!r}: {e}") from None
    return ReferenceAuditRequest(name=name, pymc_source=args.pymc.read_text(),
                                 posterior=args.reference, reference=reference, data=data,
                                 parameters=parameters, settings=_audit_settings(args))


def audit_main(args: argparse.Namespace) -> int:
    """Run one audit locally; exit 0 for any verdict, 2 if the audit could not run."""
    out, err = _stdout_console(), Console(stderr=True)
    try:
        name = args.pymc.parent.name if args.pymc.stem == "model" else args.pymc.stem
        parameters = ([p.strip() for p in args.parameters.split(",")]
                      if args.parameters else None)
        if getattr(args, "reference", None):
            request = _reference_request(args, name, parameters)
        else:
            if not args.scope:
                raise InvalidRequest("--scope NAME=DATA.json is needed (at least one)")
            request = pipeline.AuditRequest(
                name=name, pymc_source=args.pymc.read_text(),
                lazyppl_source=args.lazyppl.read_text(), scopes=_scopes(args.scope),
                parameters=parameters, settings=_audit_settings(args))
    except (OSError, AuditError) as e:
        err.print(f"ppl-audit: {e}", style="red", markup=False)
        return 2
    if not isinstance(request, pipeline.AuditRequest):
        from service import reference_batch

        with _Progress(err) as progress:
            evidence, fits = reference_batch.run(request, progress)
        if not args.no_save:
            evidence["id"] = reference_batch.store(_session_factory(), request, evidence, fits,
                                                   source="cli", keep_reference=False)
        if args.json:
            print(json.dumps(evidence, indent=2))
        else:
            print_audit(out, evidence)
        return 0
    evidence, fits = _run_with_progress(request, err,
                                        standby=getattr(args, "pymc_standby", None))
    if not args.no_save:
        evidence["id"] = str(store_result(_session_factory(), request, evidence, fits, source="cli"))
    if args.json:
        print(json.dumps(evidence, indent=2))
    else:
        print_audit(out, evidence)
    return 0


def corpus_request(name: str, settings: AuditSettings, db=None,
                   pymc_source: str | None = None) -> pipeline.AuditRequest:
    """The audit of one translated posteriordb posterior (reference checked on ``full``):
    our programs, or ``pymc_source`` in place of our PyMC program; data and reference from
    the shipped subset or ``db``. With our PyMC program, the translation's own
    ``meta.json`` settings (e.g. its profile) are applied on top of ``settings``."""
    from corpus.loader import load

    entry = load(name, db)
    return pipeline.AuditRequest(
        name=name, pymc_source=pymc_source or entry.pymc_source,
        lazyppl_source=entry.lazyppl_source, scopes=entry.scopes, parameters=entry.parameters,
        settings=(entry.settings(settings) if pymc_source in (None, entry.pymc_source)
                  else settings),
        reference=entry.reference, reference_scope="full")


def find_reusable(sessions, request: pipeline.AuditRequest, posterior: str) -> dict | None:
    """A stored, finished audit of the same programs, data and settings, if any."""
    import sqlalchemy as sa

    from service.db.models import Audit

    want = pipeline.provenance(request)
    settings = request.settings.model_dump(mode="json")
    with sessions() as session:
        stored = session.scalars(
            sa.select(Audit).where(Audit.posterior == posterior, Audit.status == "done")
            .order_by(Audit.created_at.desc()))
        for audit in stored:
            ev = audit.evidence or {}
            if (all(ev.get(k) == v for k, v in want.items()) and audit.settings == settings
                    and ev.get("verdict") != "error"):
                return {**ev, "id": str(audit.id)}
    return None


def batch_entry(evidence: dict, seconds: float, reused: bool) -> dict:
    """One posterior's row of the batch report."""
    scopes = evidence.get("scopes", {})
    full = scopes.get("full", {})
    ref = full.get("reference") or {}
    return {
        "posterior": evidence["name"], "audit_id": evidence.get("id"),
        "verdict": evidence["verdict"], "reason": evidence.get("reason"),
        "scopes": {n: {"verdict": ev.get("verdict"), "reason": ev.get("reason"),
                       "hints": ev.get("hints", [])} for n, ev in scopes.items()},
        "reference": {
            "pymc_vs_reference": (ref.get("pymc_vs_reference") or {}).get("verdict"),
            "lazyppl_vs_reference": (ref.get("lazyppl_vs_reference") or {}).get("verdict"),
            "lazyppl_vs_pymc": full.get("lazyppl_vs_pymc"),
        },
        "seconds": round(seconds, 2), "reused": reused,
        # the audit's own wall time (its scopes run side by side), also for a reused row
        "audit_seconds": round(max((ev.get("seconds") or 0.0 for ev in scopes.values()),
                                   default=0.0), 2),
    }


def run_batch(names: list[str], settings: AuditSettings, *, console: Console, fresh: bool = False,
              save: bool = True, db=None, pymc_from: str = "translations",
              lazyppl: bool = True, progress: bool = False) -> dict:
    """Audit each posterior in turn and summarise. A posterior is audited as a pair (its
    PyMC program against our LazyPPL translation, both checked against the reference)
    when ``lazyppl`` and we have translated it, else as a reference audit (the PyMC
    program against the reference draws). ``pymc_from="database"`` takes each
    posterior's own PyMC program from the database. Identical stored pair audits are
    reused (not with a user's database: its reference draws may differ from ours)."""
    from corpus.loader import TRANSLATIONS_DIR, list_posteriors, pymc_implementation, read_meta
    from service import reference_batch

    sessions = _session_factory() if save else None
    translated = set(list_posteriors())
    entries, evidences = [], []
    started = time.monotonic()
    for i, name in enumerate(names, 1):
        t0 = time.monotonic()
        prefix = f"[{i}/{len(names)}] {name}: "
        bar = (lambda: _Progress(console, prefix)) if progress else None
        try:
            if pymc_from == "database":
                source = pymc_implementation(name, db)
            else:
                source = (TRANSLATIONS_DIR / name / "model.py").read_text(encoding="utf-8")
        except (KeyError, OSError) as e:
            raise InvalidRequest(f"posterior {name!r}: {e}") from None
        reused = False
        if source is None:
            evidence = reference_batch.missing(
                name, "the database has no PyMC implementation (model_implementations.pymc) "
                "of this posterior")
            entry = reference_batch.entry(evidence, time.monotonic() - t0)
        elif lazyppl and name in translated:
            try:
                request = corpus_request(name, settings, db, source)
            except (KeyError, OSError, ValueError) as e:
                raise InvalidRequest(f"posterior {name!r}: {e}") from None
            evidence = (None if (fresh or not save or db is not None)
                        else find_reusable(sessions, request, name))
            reused = evidence is not None
            if evidence is None:
                evidence, fits = _run_with_progress(request, console, prefix)
                if save:
                    if db is not None:  # the shipped snapshot could not re-derive them
                        fits[("full", "reference", 1)] = request.reference
                    evidence["id"] = str(store_result(sessions, request, evidence, fits,
                                                      source="cli-batch", posterior=name))
            entry = batch_entry(evidence, time.monotonic() - t0, reused)
        else:
            try:
                own = pymc_from != "database" and name in translated
                # our program runs with its meta.json settings (e.g. its profile)
                request = reference_batch.request(
                    name, source, settings.with_overrides(read_meta(name).get("settings"))
                    if own else settings, db)
            except (FileNotFoundError, ValueError) as e:
                evidence = reference_batch.missing(name, str(e))
            else:
                with bar() if bar is not None else contextlib.nullcontext() as p:
                    evidence, fits = reference_batch.run(request, p)
                if save:
                    evidence["id"] = reference_batch.store(
                        sessions, request, evidence, fits, source="cli-batch",
                        keep_reference=db is not None)
            entry = reference_batch.entry(evidence, time.monotonic() - t0)
        console.print(f"{prefix}{entry['verdict']}{' (stored result reused)' if reused else ''}"
                      f" in {entry['seconds']:.0f} s", highlight=False)
        entries.append(entry)
        evidences.append(evidence)
    return {"source": "posteriordb", "database": str(db.path) if db is not None else "shipped",
            "pymc_from": pymc_from, "lazyppl_from": "translations" if lazyppl else "none",
            "posteriors": entries, "summary": batch_summary(evidences),
            "settings": settings.model_dump(mode="json"),
            "seconds": round(time.monotonic() - started, 1)}


def batch_main(args: argparse.Namespace) -> int:
    """A local batch over posteriordb posteriors, with progress and the SPEC §4 summary."""
    from corpus.loader import list_posteriors, open_database

    out, err = _stdout_console(), Console(stderr=True)
    lazyppl_from = args.lazyppl_from or ("none" if args.pymc_from == "database"
                                         else "translations")
    try:
        db = None
        if args.database:
            try:
                db = open_database(args.database)
            except (OSError, ValueError) as e:
                raise InvalidRequest(f"--database {args.database}: {e}") from None
        in_db = set(db.posterior_names()) if db is not None else None
        if args.pymc_from == "database":
            if db is None:
                raise InvalidRequest("--pymc-from database needs --database PATH (the shipped "
                                     "subset holds no PyMC programs of posteriordb's)")
            available = sorted(in_db)
        else:
            available = [n for n in list_posteriors() if in_db is None or n in in_db]
        if args.posteriors:
            names = [n.strip() for n in args.posteriors.split(",") if n.strip()]
            unknown = [n for n in names if n not in available]
            if unknown:
                where = ("the database" if args.pymc_from == "database"
                         else "the translated corpus" + (" and the database" if db else ""))
                raise InvalidRequest(f"not in {where}: {', '.join(unknown)}")
        else:
            names = available
        report = run_batch(names, _audit_settings(args), console=err, fresh=args.fresh, db=db,
                           pymc_from=args.pymc_from, lazyppl=lazyppl_from == "translations",
                           progress=True)
    except AuditError as e:
        err.print(f"ppl-audit: {e}", style="red", markup=False)
        return 2
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_batch(out, report)
    return 0
