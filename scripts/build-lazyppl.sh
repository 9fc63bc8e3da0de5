#!/usr/bin/env bash
# Builds the lazyppl Haskell package once, offline, into a private package database in
# which user programs are compiled as Safe Haskell, and prints that build's directory.
#
#   scripts/build-lazyppl.sh            # build if needed; last stdout line = build dir
#
# Environment: PPL_AUDIT_CACHE (default ~/.cache/ppl-audit) is where builds live;
# LAZYPPL_SRC (default <repo>/lazyppl) is the package to build.
#
# The build directory is ${PPL_AUDIT_CACHE}/lazyppl-<hash>, where <hash> covers the
# library sources (lazyppl.cabal, Setup.hs, src/), the GHC version and this script, so
# a changed library gets a fresh build and an unchanged one is reused (a second run
# takes well under a second). Inside:
#   package.db/       lazyppl + the closure of its dependencies, copied from GHC's global
#                     database. Trusted (ghc-pkg trust): base and lazyppl, and
#                     containers and log-domain because the user may import Numeric.Log
#                     and Data.Map(.Strict), which are Trustworthy modules; compile.py
#                     exposes only those modules of theirs (module thinning), and every
#                     other package in the database stays untrusted. The trust is
#                     recorded in the database, never passed as -trust flags (which
#                     would re-expose every module of the package).
#   install/          the installed library
#   build-info.json   hash, GHC version, lazyppl unit id, trusted packages
#   ready             written last; a directory without it is an interrupted build
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src="${LAZYPPL_SRC:-$here/../lazyppl}"
cache="${PPL_AUDIT_CACHE:-$HOME/.cache/ppl-audit}"
trusted_packages=(base lazyppl containers log-domain)

if ! command -v ghc >/dev/null || ! command -v ghc-pkg >/dev/null; then
  echo "build-lazyppl: ghc/ghc-pkg not found; run scripts/install-system.sh first" >&2
  exit 2
fi
if [ ! -f "$src/lazyppl.cabal" ] || [ ! -d "$src/src" ]; then
  echo "build-lazyppl: no lazyppl package (lazyppl.cabal, src/) in $src" >&2
  exit 2
fi
src="$(cd "$src" && pwd)"
mkdir -p "$cache"
ghc_version="$(ghc --numeric-version)"

# Snapshot the sources first and hash the snapshot, so that edits made during a build
# can never be filed under the wrong hash.
stage="$(mktemp -d "$cache/.stage-XXXXXX")"
building=""
# an interrupted or failed build of ours leaves no half-made directory behind
trap 'rm -rf "$stage"; if [ -n "$building" ] && [ ! -f "$building/ready" ]; then rm -rf "$building"; fi' EXIT
(cd "$src" && cp -r --parents lazyppl.cabal src "$stage/")
if [ -f "$src/Setup.hs" ]; then cp "$src/Setup.hs" "$stage/"; else
  printf 'import Distribution.Simple\nmain :: IO ()\nmain = defaultMain\n' >"$stage/Setup.hs"
fi
[ -f "$src/README.md" ] && cp "$src/README.md" "$stage/"  # listed in extra-source-files
hash="$(
  {
    (cd "$stage" && find lazyppl.cabal Setup.hs src -type f -print0 | LC_ALL=C sort -z \
       | xargs -0 sha256sum)
    echo "ghc $ghc_version"
    sha256sum <"${BASH_SOURCE[0]}"
  } | sha256sum | cut -c1-16
)"
out="$cache/lazyppl-$hash"

if [ -f "$out/ready" ]; then  # the common case: nothing to do, no lock to wait for
  echo "$out"
  exit 0
fi
exec 9>"$cache/.build.lock"
flock 9  # one build at a time per cache directory
if [ -f "$out/ready" ]; then  # built by another process while we waited
  echo "$out"
  exit 0
fi
building="$out"
rm -rf "$out"
mkdir -p "$out"
echo "build-lazyppl: building lazyppl ($hash) into $out" >&2

cd "$stage"
ghc -v0 -O0 -outputdir "$stage/setup-build" -o "$stage/setup" Setup.hs
# Only GHC's global database (Debian's libghc-*-dev): no user database, no Hackage.
"$stage/setup" configure -v0 --package-db=clear --package-db=global \
  --builddir="$stage/dist" --prefix="$out/install" \
  --disable-tests --disable-benchmarks --disable-profiling --disable-shared \
  --disable-executable-dynamic --enable-optimization=2
"$stage/setup" build -v1 --builddir="$stage/dist" >&2
"$stage/setup" copy -v0 --builddir="$stage/dist"
"$stage/setup" register -v0 --builddir="$stage/dist" --gen-pkg-config="$stage/lazyppl.conf"

db="$out/package.db"
pkg=(ghc-pkg --global-package-db="$db" --no-user-package-db)
mkdir -p "$db"
# Copy the dependency closure of lazyppl from the global database, by unit id.
declare -A seen=()
# depends: is a multi-line field (continuation lines start with blanks)
queue=($(awk '/^[^ \t]/ {on = ($1 == "depends:")} on {sub(/^depends:/, ""); print}' \
  "$stage/lazyppl.conf"))
while [ "${#queue[@]}" -gt 0 ]; do
  id="${queue[0]}"; queue=("${queue[@]:1}")
  [ -n "${seen[$id]:-}" ] && continue
  seen[$id]=1
  ghc-pkg --global --no-user-package-db describe --ipid "$id" >"$db/$id.conf"
  for dep in $(ghc-pkg --global --no-user-package-db field --ipid --simple-output "$id" depends); do
    queue+=("$dep")
  done
done
cp "$stage/lazyppl.conf" "$db/lazyppl.conf"
"${pkg[@]}" recache
for p in $("${pkg[@]}" list --simple-output --names-only); do
  "${pkg[@]}" distrust "$p" >/dev/null
done
for p in "${trusted_packages[@]}"; do
  "${pkg[@]}" trust "$p"
done
"${pkg[@]}" check >&2

unit_id="$("${pkg[@]}" field --simple-output lazyppl id)"
cat >"$out/build-info.json" <<EOF
{"hash": "$hash", "ghc": "$ghc_version", "lazyppl_unit_id": "$unit_id",
 "lazyppl_version": "$("${pkg[@]}" field --simple-output lazyppl version)",
 "trusted_packages": ["$(IFS=,; echo "${trusted_packages[*]}" | sed 's/,/", "/g')"],
 "source": "$src"}
EOF
touch "$out/ready"
echo "build-lazyppl: done" >&2

# Prune (still under the lock, so no other build is in progress): keep the three most
# recently used builds (haskell_bridge.paths touches "ready" on use) and any used in
# the last hour; drop unfinished builds and stale stages left by killed runs.
for dir in "$cache"/lazyppl-*; do
  if [ -d "$dir" ] && [ ! -f "$dir/ready" ]; then rm -rf "$dir"; fi
done
ls -dt "$cache"/lazyppl-*/ready 2>/dev/null | tail -n +4 | while read -r ready; do
  if [ -n "$(find "$ready" -mmin +60)" ]; then rm -rf "$(dirname "$ready")"; fi
done
find "$cache" -maxdepth 1 -name '.stage-*' -mmin +60 -exec rm -rf {} + 2>/dev/null || true
echo "$out"
