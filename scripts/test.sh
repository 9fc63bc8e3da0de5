#!/usr/bin/env bash
# The README's test command: install what is needed, start PostgreSQL and Redis if they
# are not running, and run the whole test suite (unit, integration, slow, end to end).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/services.sh
export PPL_AUDIT_CACHE="${PPL_AUDIT_CACHE:-$HOME/.cache/ppl-audit}"
( cd lazyppl && CABAL_CONFIG="$PWD/cabal.config-offline" cabal test --offline all )
# -rfEs: every failure, error and skipped test is listed with its reason at the end
.venv/bin/pytest -q -rfEs --durations=25 -p no:cacheprovider --timeout=1200 "$@"
