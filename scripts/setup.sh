#!/usr/bin/env bash
# Everything ppl-audit needs on a fresh Debian machine with Python 3.11 and root:
# Debian packages (GHC and its libraries, Chromium), the .venv with ppl-audit, and the
# lazyppl Haskell library built once into a private package database. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-system.sh
bash scripts/install-python.sh
bash scripts/build-lazyppl.sh
# Seed the shared PyTensor compile cache with our own programs (trusted); sandboxed fits
# get a private copy of it and never write it (docs/SECURITY.md).
export PPL_AUDIT_CACHE="${PPL_AUDIT_CACHE:-$HOME/.cache/ppl-audit}"
# --if-needed: skipped when the cache's stamp names this version's programs, backends and
# compiler versions (pymc, pytensor, numba, nutpie, Python).
.venv/bin/ppl-audit warm-cache --if-needed
