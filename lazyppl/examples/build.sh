#!/bin/sh
# Build an example model against the cabal-built library:
#   examples/build.sh eight_schools   ->  examples/bin/eight_schools
# Run it:  examples/input.py eight_schools | examples/bin/eight_schools +RTS -N2
set -e
here=$(cd "$(dirname "$0")" && pwd)
db="$here/../dist-newstyle/packagedb/ghc-$(ghc --numeric-version)"
mkdir -p "$here/bin" "$here/bin/obj-$1"
ghc -O2 -threaded -rtsopts -package-db "$db" -package lazyppl \
    -i"$here/$1" -outputdir "$here/bin/obj-$1" -o "$here/bin/$1" "$here/Main.hs" >/dev/null
