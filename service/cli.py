"""``ppl-audit``: the one command (SPEC §6).

    ppl-audit audit --pymc P.py --lazyppl L.hs --scope NAME=DATA.json ...   (local, no servers)
    ppl-audit batch posteriordb [--posteriors a,b | --all] [--json]         (local)
    ppl-audit serve [--host H] [--port P]       API + web pages (uvicorn)
    ppl-audit worker [--concurrency N]          Celery worker (prefork)
    ppl-audit token create NAME                 prints a new API token once
    ppl-audit token list | token revoke NAME
    ppl-audit db upgrade                        Alembic migrations to head
"""
from __future__ import annotations

import argparse
import sys


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

    uvicorn.run(create_app(_settings()), host=args.host, port=args.port,
                log_level=args.log_level, proxy_headers=True)
    return 0


def _worker(args) -> int:
    _settings()
    from workers.celery_app import app

    argv = ["worker", "--pool=prefork", f"--concurrency={args.concurrency}",
            f"--queues={app.conf.task_default_queue}", f"--loglevel={args.log_level}"]
    if args.hostname:
        argv.append(f"--hostname={args.hostname}")
    app.worker_main(argv)
    return 0


def _sessions(settings):
    from service.db import make_engine, make_session_factory

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


def _local(name: str):
    def run(args) -> int:
        from service import local

        return getattr(local, name)(args) or 0
    return run


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ppl-audit", description="Do two probabilistic programs "
                                "(PyMC and LazyPPL) define the same posterior?")
    sub = p.add_subparsers(dest="command", required=True)

    from service.local import add_audit_arguments, add_batch_arguments

    a = sub.add_parser("audit", help="audit one translation pair locally (no servers)")
    add_audit_arguments(a)
    a.set_defaults(func=_local("audit_main"))
    b = sub.add_parser("batch", help="audit shipped posteriordb posteriors locally")
    add_batch_arguments(b)
    b.set_defaults(func=_local("batch_main"))

    s = sub.add_parser("serve", help="run the REST API and web pages")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8000)
    s.add_argument("--log-level", default="info")
    s.set_defaults(func=_serve)

    w = sub.add_parser("worker", help="run a Celery worker (each job uses about two cores)")
    w.add_argument("--concurrency", type=int, default=1)
    w.add_argument("--hostname", help="Celery node name, e.g. w1@%%h")
    w.add_argument("--log-level", default="INFO")
    w.set_defaults(func=_worker)

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
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
