#!/usr/bin/env bash
# The README's test command: install what is needed, start PostgreSQL and Redis if they
# are not running, and run the whole test suite (unit, integration, slow, end to end).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/services.sh
export PPL_AUDIT_CACHE="${PPL_AUDIT_CACHE:-$HOME/.cache/ppl-audit}"
( cd lazyppl && CABAL_CONFIG="$PWD/cabal.config-offline" cabal test --offline all )
# -rfEs: every failure, error and skipped test is listed with its reason at the end.
# -n: tests run in PPL_AUDIT_TEST_WORKERS pytest-xdist processes (default 2, one per core
# here; 0 runs them in this process). Most of a test's wall time is a child's import or
# compile, a sandbox start or a wait for a worker, so two at once halve the suite on two
# cores (measured: 1,173 s against 2,269 s). Each xdist process has its own database and
# queue (tests/conftest.py), as parallel runs always had.
.venv/bin/pytest -q -rfEs --durations=25 -p no:cacheprovider --timeout=1200 \
  -n "${PPL_AUDIT_TEST_WORKERS:-2}" "$@"
