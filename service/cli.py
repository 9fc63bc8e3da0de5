"""``ppl-audit``: the one command (SPEC §6).

    ppl-audit audit --pymc P.py --lazyppl L.hs --scope NAME=DATA.json ...   (local, no servers)
    ppl-audit batch posteriordb [--posteriors a,b | --all] [--json]         (local)
    ppl-audit serve [--host H] [--port P]       API + web pages (uvicorn)
    ppl-audit worker [--concurrency N]          Celery worker (prefork)
    ppl-audit token create NAME                 prints a new API token once
    ppl-audit token list | token revoke NAME
    ppl-audit db upgrade                        Alembic migrations to head
    ppl-audit warm-cache [--corpus [A,B]]       compile our own programs into the shared cache
    ppl-audit status [--json]                   queue depth, live workers, stuck work
"""
from __future__ import annotations

import argparse
import functools
import hashlib
import json
import sys
import time
from collections.abc import Callable


def _settings():
    from service.config import get_settings

    try:
        return get_settings()
    except Exception as err:  # pydantic ValidationError: say which variable is wrong
        print(f"ppl-audit: configuration error: {err}", file=sys.stderr)
        raise SystemExit(2) from None


def _serve(args) -> int:
    import uvicorn

    from service.api import create_app

    settings = _settings()
    _ready_database(settings.database_url)
    if args.workers > 1:  # several processes: each builds its app from the environment
        uvicorn.run("service.api:create_app", factory=True, workers=args.workers,
                    host=args.host, port=args.port, log_level=args.log_level, proxy_headers=True)
    else:
        uvicorn.run(create_app(settings), host=args.host, port=args.port,
                    log_level=args.log_level, proxy_headers=True)
    return 0


#: Our own shipped programs whose compiled PyTensor/numba pieces seed the shared cache.
WARM_PROGRAMS = ("eight_schools-eight_schools_noncentered", "kidiq-kidscore_momiq",
                 "eight_schools-eight_schools_centered")
#: Each is fitted with the default backend (numba entries for nutpie) and with PyMC's own
#: NUTS (C modules of PyTensor's ops): a fit with ``backend: pymc`` of eight schools
#: compiled for 12 s against a cache holding numba entries only, 1.6 s against this one.
WARM_BACKENDS = ("nutpie", "pymc")


def warm_cache_stamp(corpus: list[str] | None = None,
                     digest: Callable[[str], str] | None = None) -> dict:
    """What a warmed cache holds: programs, backends, and the compilers' versions (an
    upgraded PyTensor or numba keys its entries anew, so the cache is warmed again);
    ``corpus``: the shipped posteriors warmed on both scopes' data (``--corpus``), each
    with the digest of what was compiled (:func:`_corpus_digest`), so an edited
    translation is warmed again (``digest``: how to compute it, by default afresh)."""
    from importlib.metadata import version

    from workers.pymc_runner import nutpie_wrappers

    digest = digest or _corpus_digest
    return {"programs": list(WARM_PROGRAMS), "backends": list(WARM_BACKENDS),
            "versions": {**{p: version(p) for p in ("pymc", "pytensor", "numba", "nutpie")},
                         # our nutpie callbacks, cached with each program (issue 11)
                         "nutpie_callbacks": nutpie_wrappers.VERSION},
            "python": sys.version.split()[0],
            "corpus": {name: digest(name) for name in sorted(corpus or [])}}


def _corpus_digest(name: str) -> str:
    """SHA-256 of what warming a translation compiles: its PyMC program, profile and both
    scopes' data (what shapes the compiled code)."""
    source, datasets, profile = _corpus_programs([name])[name]
    canonical = json.dumps([source, profile, datasets], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def _held_corpus(held: dict | None, base_held: bool,
                 digest: Callable[[str], str]) -> set[str]:
    """The translations a stamp holds as they are now: named with the digest of the
    current program and data (``digest``; a stamp from before digests, a list of names,
    holds none; a name no longer shipped is dropped)."""
    from corpus.loader import list_posteriors

    entries = (held or {}).get("corpus") if base_held else None
    if not isinstance(entries, dict):
        return set()
    shipped = set(list_posteriors())
    return {name for name, entry in entries.items()
            if name in shipped and entry == digest(name)}


def _same_base_warm(a: dict | None, b: dict) -> bool:
    """Both stamps name the same base programs, backends and compiler versions."""
    keys = ("programs", "backends", "versions", "python")
    return a is not None and all(a.get(k) == b[k] for k in keys)


def _corpus_programs(names: list[str]) -> dict[str, tuple[str, list[dict], str]]:
    """Our translations' PyMC programs with the data of both scopes a batch audits
    (``visible`` and ``full``: the graph's shapes, so the compiled code, differ)."""
    from corpus.loader import load

    programs = {}
    for name in names:
        entry = load(name)
        profile = (entry.meta.get("settings") or {}).get("pymc", {}).get("profile", "strict")
        programs[name] = (entry.pymc_source, [entry.scopes["visible"], entry.scopes["full"]],
                          profile)
    return programs


def _warm_cache(args) -> int:
    """Fit our shipped programs once (trusted) so their compiled ops join the shared
    compile cache that every sandboxed fit gets a private copy of."""
    import sandbox
    from corpus.loader import TRANSLATIONS_DIR, list_posteriors, load_data
    from workers.pymc_runner.runner import warm_shared_cache, warm_stamp, write_warm_stamp

    corpus = []
    if args.corpus is not None:
        corpus = list_posteriors() if args.corpus == "all" else args.corpus.split(",")
        unknown = sorted(set(corpus) - set(list_posteriors()))
        if unknown:
            print(f"warm-cache: no translation for {', '.join(unknown)}", file=sys.stderr)
            return 2
    if corpus:
        sandbox.check_available()
        _warm_lazyppl_binaries(corpus)
    held = warm_stamp()
    base_held = _same_base_warm(held, warm_cache_stamp())
    # each translation's digest loads its data: computed once in this call, and only where
    # the held translations matter (not for a set-up's --if-needed without --corpus)
    digest = functools.cache(_corpus_digest)
    held_corpus = (_held_corpus(held, base_held, digest) if corpus or not args.if_needed
                   else set())
    if args.if_needed and base_held and set(corpus) <= held_corpus:
        print("warm-cache: the shared cache already holds these programs' compiled pieces")
        return 0
    sandbox.check_available()
    if not (args.if_needed and base_held):
        programs = {name: ((TRANSLATIONS_DIR / name / "model.py").read_text(),
                           [load_data(name)], "strict") for name in WARM_PROGRAMS}
        for name, seconds in warm_shared_cache(programs, WARM_BACKENDS).items():
            print(f"warm-cache: {name} compiled in {seconds:.1f} s", flush=True)
    failed = []
    for name in sorted(set(corpus) - (held_corpus if args.if_needed else set())):
        # one program at a time, so one that cannot be fitted does not stop the rest; the
        # pre-warm model is held already (the base programs' warm-up compiled it)
        try:
            seconds = warm_shared_cache(_corpus_programs([name]), ("nutpie",),
                                        prewarm_model=False)[name]
        except Exception as err:  # noqa: BLE001 - reported, the others still warm
            failed.append(name)
            print(f"warm-cache: {name} FAILED: {err}", flush=True)
            continue
        held_corpus.add(name)
        print(f"warm-cache: {name} (visible, full) compiled in {seconds:.1f} s", flush=True)
    write_warm_stamp(warm_cache_stamp(sorted(held_corpus), digest))
    return 1 if failed else 0


def _warm_lazyppl_binaries(corpus: list[str]) -> None:
    """Compile the translations' Model.hs into the GHC binary cache (keyed by source and
    library build, so a scope task reads the binary instead of running GHC, ~1.7 s each).
    Cached binaries answer in about a millisecond, so this runs on every call; a program
    that fails to compile is reported and left for its audit to report again."""
    from corpus.loader import TRANSLATIONS_DIR
    from haskell_bridge import build_program
    from sandbox import Limits

    built = cached = 0
    started = time.monotonic()
    for name in corpus:
        path = TRANSLATIONS_DIR / name / "Model.hs"
        if not path.is_file():
            continue
        try:
            done = build_program(path.read_text(),
                                 limits=Limits(cpu_seconds=300, memory_mb=4096, wall_seconds=300))
        except Exception as err:  # noqa: BLE001 - reported; the audit will say it again
            print(f"warm-cache: {name} Model.hs FAILED to compile: {err}", flush=True)
            continue
        cached, built = cached + done.cached, built + (not done.cached)
    print(f"warm-cache: LazyPPL binaries of {built + cached} translations ready ({built} compiled, "
          f"{cached} cached) in {time.monotonic() - started:.1f} s", flush=True)


def _refuse_without_sandbox() -> None:
    """Fail closed: a worker that cannot sandbox programs must not take any."""
    import sandbox
    from workers.errors import SandboxUnavailable

    try:
        sandbox.check_available()
    except SandboxUnavailable as err:
        print(f"ppl-audit worker: refusing to start: {err}", file=sys.stderr)
        raise SystemExit(3) from None
    if sandbox.mode() == "none":
        print("ppl-audit worker: WARNING: PPL_AUDIT_SANDBOX=none, untrusted programs run "
              "WITHOUT the OS sandbox (trusted local use only)", file=sys.stderr)


def _worker(args) -> int:
    _settings()
    _refuse_without_sandbox()
    from workers.celery_app import app

    argv = ["worker", "--pool=prefork", f"--concurrency={args.concurrency}",
            f"--queues={app.conf.task_default_queue}", f"--loglevel={args.log_level}"]
    if args.hostname:
        argv.append(f"--hostname={args.hostname}")
    app.worker_main(argv)
    return 0


def _ready_database(url: str) -> None:
    """The embedded SQLite database migrates itself; PostgreSQL must be migrated by the
    operator (``ppl-audit db upgrade``), and we say so instead of failing on a query."""
    from service.db import migrate

    if url.startswith("sqlite"):
        migrate.upgrade(url)
        return
    try:
        current = migrate.current_revision(url)
    except Exception as err:
        print(f"ppl-audit: cannot reach the database: {err.__class__.__name__}: "
              f"{str(err).splitlines()[0]}", file=sys.stderr)
        raise SystemExit(2) from None
    if current is None:
        print("ppl-audit: the database has no schema yet; run `ppl-audit db upgrade` first",
              file=sys.stderr)
        raise SystemExit(2)


def _sessions(settings):
    from service.db import make_engine, make_session_factory

    _ready_database(settings.database_url)
    return make_session_factory(make_engine(settings.database_url))


def _token(args) -> int:
    from service.db import tokens

    settings = _settings()
    with _sessions(settings).begin() as session:
        if args.token_command == "create":
            row, plaintext = tokens.create_token(session, args.name, settings.secret)
            print(plaintext)
            print(f"token {row.name!r} created; it is shown only this once", file=sys.stderr)
        elif args.token_command == "revoke":
            n = tokens.revoke_token(session, args.name)
            print(f"revoked {n} token(s) named {args.name!r}")
            return 0 if n else 1
        else:
            for row in tokens.list_tokens(session):
                state = f"revoked {row.revoked_at:%Y-%m-%d}" if row.revoked_at else "live"
                print(f"{row.id}\t{row.name}\t{state}\tcreated {row.created_at:%Y-%m-%d %H:%M}")
    return 0


def _db(args) -> int:
    from service.db import migrate
    from service.db.base import create_database_if_missing

    url = _settings().database_url
    if args.db_command == "upgrade":
        if create_database_if_missing(url):
            print("created the database", file=sys.stderr)
        migrate.upgrade(url)
    print(f"schema revision: {migrate.current_revision(url)}")
    return 0


def _status(args) -> int:
    """The health report of ``GET /api/v1/health``, read directly (no API needed).
    Exit 1 when the database or broker is unreachable or a lease has expired."""
    from service.api import service_health
    from service.db import make_engine, make_session_factory
    from workers.celery_app import CeleryDispatcher, create_celery

    settings = _settings()
    engine = make_engine(settings.database_url)
    try:
        report = service_health(make_session_factory(engine),
                                CeleryDispatcher(create_celery(settings)), settings)
    finally:
        engine.dispose()
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        work = report["work"] or {}
        print(f"database   {'up' if report['database'] else 'UNREACHABLE'}")
        print(f"broker     {'up' if report['broker'] else 'UNREACHABLE'}"
              f"  ({report['queued_tasks']} task(s) in queue {settings.celery.queue!r})")
        if work:
            print(f"workers    {work['live_workers']} live")
            print(f"scopes     {work['queued_units']} queued, {work['running_units']} running, "
                  f"{work['expired_leases']} with an expired lease")
            print(f"oldest     queued {_age(work['oldest_queued_seconds'])}, "
                  f"running {_age(work['oldest_running_seconds'])}")
    healthy = report["database"] and report["broker"] and not (report["work"] or {}).get(
        "expired_leases")
    return 0 if healthy else 1


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def _local(name: str):
    def run(args) -> int:
        from service import local

        return getattr(local, name)(args) or 0
    return run


LOCAL_COMMANDS = ("audit", "batch")


def build_parser(local_arguments: bool = True) -> argparse.ArgumentParser:
    """The parser; ``local_arguments=False`` skips importing the local runner (and with
    it ArviZ, ~5–10 s) for the service commands, which never use it."""
    p = argparse.ArgumentParser(prog="ppl-audit", description="Do two probabilistic programs "
                                "(PyMC and LazyPPL) define the same posterior?")
    sub = p.add_subparsers(dest="command", required=True)

    a = sub.add_parser("audit", help="audit one translation pair locally (no servers)")
    a.set_defaults(func=_local("audit_main"))
    b = sub.add_parser("batch", help="audit shipped posteriordb posteriors locally")
    b.set_defaults(func=_local("batch_main"))
    if local_arguments:
        from service.local import add_audit_arguments, add_batch_arguments

        add_audit_arguments(a)
        add_batch_arguments(b)

    s = sub.add_parser("serve", help="run the REST API and web pages")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8000)
    s.add_argument("--log-level", default="info")
    s.add_argument("--workers", type=int, default=1, help="uvicorn processes (default 1)")
    s.set_defaults(func=_serve)

    w = sub.add_parser("worker", help="run a Celery worker (each job uses about two cores)")
    w.add_argument("--concurrency", type=int, default=1)
    w.add_argument("--hostname", help="Celery node name, e.g. w1@%%h")
    w.add_argument("--log-level", default="INFO")
    w.set_defaults(func=_worker)

    wc = sub.add_parser("warm-cache", help="compile our shipped programs into the shared "
                        "PyTensor cache (trusted; sandboxed fits get a private copy)")
    wc.add_argument("--if-needed", action="store_true",
                    help="do nothing when the cache already holds what this version warms")
    wc.add_argument("--corpus", nargs="?", const="all", metavar="A,B",
                    help="also the shipped translations (all, or these), on both scopes' "
                    "data: batches of them then load their compiled code (nutpie)")
    wc.set_defaults(func=_warm_cache)

    t = sub.add_parser("token", help="API tokens")
    tsub = t.add_subparsers(dest="token_command", required=True)
    tc = tsub.add_parser("create", help="create a token and print it once")
    tc.add_argument("name")
    tr = tsub.add_parser("revoke", help="revoke the tokens called NAME")
    tr.add_argument("name")
    tsub.add_parser("list", help="list tokens (never their values)")
    t.set_defaults(func=_token)

    d = sub.add_parser("db", help="database schema")
    dsub = d.add_subparsers(dest="db_command", required=True)
    dsub.add_parser("upgrade", help="create the database if needed and migrate to head")
    dsub.add_parser("current", help="print the schema revision")
    d.set_defaults(func=_db)

    st = sub.add_parser("status", help="queue depth, live workers, oldest queued/running work")
    st.add_argument("--json", action="store_true", help="the health report as JSON")
    st.set_defaults(func=_status)
    return p


def quiet_third_party_warnings() -> None:
    """Silence the one third-party notice users saw on every first run of the day:
    ArviZ's once-a-day FutureWarning about its 1.0 refactor, printed on import (matched
    by its message and module, so any other ArviZ warning still shows)."""
    import warnings

    warnings.filterwarnings("ignore", message=r"\s*ArviZ is undergoing a major refactor",
                            category=FutureWarning, module="arviz")


def main(argv: list[str] | None = None) -> int:
    quiet_third_party_warnings()
    argv = sys.argv[1:] if argv is None else argv
    command = next((a for a in argv if not a.startswith("-")), None)
    early = (_early_pymc_session(min(2, max(1, argv.count("--scope"))))
             if command == "audit" and "--help" not in argv else None)
    try:
        args = build_parser(local_arguments=command in LOCAL_COMMANDS).parse_args(argv)
        if early is not None:
            args.pymc_standby = early
        return int(args.func(args) or 0)
    finally:
        if early is not None:
            early.close()


def _early_pymc_session(children: int):
    """`ppl-audit audit`: start the audit's PyMC session (a sandboxed child importing
    PyMC, 2-4 s) before this process imports the local runner (ArviZ, SQLAlchemy: as
    long again), for default budgets; other settings start their own session."""
    try:
        import sandbox
        from workers.pymc_runner.session import Standby, limits_for
        from workers.settings import AuditSettings

        if sandbox.mode() == "bwrap":
            sandbox.check_available()
        standby = Standby()
        standby.refill(limits_for(AuditSettings()), children)  # a child per scope
        return standby
    except Exception:  # noqa: BLE001 - the audit then starts its session (and reports)
        return None


if __name__ == "__main__":
    raise SystemExit(main())
