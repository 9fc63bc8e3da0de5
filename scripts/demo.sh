#!/usr/bin/env bash
# The README's first command: install what is needed and audit one posteriordb posterior
# (eight schools, non-centred) with no servers, printing the verdict table.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ppl-audit batch posteriordb --posteriors "${1:-eight_schools-eight_schools_noncentered}"
