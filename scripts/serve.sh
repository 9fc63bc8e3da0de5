#!/usr/bin/env bash
# The service in one command: starts PostgreSQL and Redis if they are not running,
# creates the database and migrates it, then runs the API (and web pages) and one
# Celery worker until Ctrl-C (both are stopped together).
#
#   bash scripts/serve.sh                 # http://127.0.0.1:8000
#   PORT=9000 WORKERS=2 bash scripts/serve.sh
#
# Configuration comes from PPL_AUDIT_* variables (see README); the defaults below
# point at the local PostgreSQL and Redis. More workers elsewhere need only the same
# PPL_AUDIT_DATABASE_URL and PPL_AUDIT_BROKER_URL and `ppl-audit worker`.
set -euo pipefail
cd "$(dirname "$0")/.."
export PPL_AUDIT_DATABASE_URL="${PPL_AUDIT_DATABASE_URL:-postgresql+psycopg://postgres@127.0.0.1:5432/ppl_audit}"
export PPL_AUDIT_BROKER_URL="${PPL_AUDIT_BROKER_URL:-redis://127.0.0.1:6379/0}"
HOST="${HOST:-127.0.0.1}"
PORT="${PORT:-8000}"
WORKERS="${WORKERS:-1}"
PPL=.venv/bin/ppl-audit
[ -x "$PPL" ] || { echo "run scripts/setup.sh first (no .venv/bin/ppl-audit)" >&2; exit 1; }

# the token pepper: PPL_AUDIT_SECRET if set, else this machine's own (made once, 0600);
# the service refuses to start without one (the public development pepper needs
# PPL_AUDIT_ENVIRONMENT=development)
if [ -z "${PPL_AUDIT_SECRET:-}" ]; then
  export PPL_AUDIT_SECRET_FILE="${PPL_AUDIT_SECRET_FILE:-${XDG_DATA_HOME:-$HOME/.local/share}/ppl-audit/service-pepper}"
fi

bash scripts/services.sh
"$PPL" db upgrade

pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

for i in $(seq "$WORKERS"); do
  "$PPL" worker --hostname "worker$i@%h" &
  pids+=($!)
done
"$PPL" serve --host "$HOST" --port "$PORT" &
pids+=($!)
echo "ppl-audit: API and pages on http://$HOST:$PORT/ (OpenAPI at /openapi.json); create a token with:" >&2
echo "  PPL_AUDIT_DATABASE_URL=$PPL_AUDIT_DATABASE_URL${PPL_AUDIT_SECRET_FILE:+ PPL_AUDIT_SECRET_FILE=$PPL_AUDIT_SECRET_FILE} $PPL token create NAME" >&2
wait -n "${pids[@]}"
