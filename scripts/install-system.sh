#!/usr/bin/env bash
# Installs the Debian packages ppl-audit needs: GHC and the Haskell libraries the
# lazyppl package builds against (offline, from Debian), and Chromium for page tests.
set -euo pipefail
need=()
for p in ghc cabal-install libghc-random-dev libghc-log-domain-dev libghc-math-functions-dev \
         libghc-aeson-dev libghc-vector-dev libghc-hspec-dev libghc-quickcheck2-dev \
         libghc-splitmix-dev chromium bubblewrap; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ "${#need[@]}" -gt 0 ]; then
  echo "installing Debian packages: ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
