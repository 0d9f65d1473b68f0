#!/usr/bin/env bash
# axe-core (the accessibility checker the browser tests run in Chromium), from the npm registry:
# a pinned version, checked against the registry's sha512 integrity, cached in .cache/axe/.
set -euo pipefail
cd "$(dirname "$0")/.."
version=4.14.1
integrity=sha512-FHfa+lmNjQZfJz1q8wKqIDwC6DExcHt/pkjNQb09a3NPjCKg2rhu5qb2S4r76ASyFNNtuFooJpZe37OgudVGtQ==
dir=.cache/axe
[[ -f $dir/axe-$version.min.js ]] && exit 0
mkdir -p "$dir"
tmp=$(mktemp -d "$dir/.download.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
curl -fsSL "https://registry.npmjs.org/axe-core/-/axe-core-$version.tgz" -o "$tmp/axe.tgz"
got="sha512-$(openssl dgst -sha512 -binary "$tmp/axe.tgz" | base64 -w0)"
[[ $got == "$integrity" ]] || { echo "axe-core: integrity mismatch ($got)"; exit 1; }
tar -xzf "$tmp/axe.tgz" -C "$tmp" package/axe.min.js
mv "$tmp/package/axe.min.js" "$dir/axe-$version.min.js"
