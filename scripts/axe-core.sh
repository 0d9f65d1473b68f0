#!/usr/bin/env bash
# axe-core (the accessibility checker the browser tests run in Chromium), fetched by npm from its
# configured registry (npm's default unless the machine says otherwise: no registry host is named
# here): a pinned version, checked against the registry's sha512 integrity, cached in .cache/axe/.
set -euo pipefail
cd "$(dirname "$0")/.."
version=4.14.1
integrity=sha512-FHfa+lmNjQZfJz1q8wKqIDwC6DExcHt/pkjNQb09a3NPjCKg2rhu5qb2S4r76ASyFNNtuFooJpZe37OgudVGtQ==
dir=.cache/axe
[[ -f $dir/axe-$version.min.js ]] && exit 0
mkdir -p "$dir"
tmp=$(mktemp -d "$dir/.download.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
command -v npm >/dev/null || { echo "axe-core: npm is needed (Debian: apt-get install npm; scripts/bootstrap.sh dev does)"; exit 1; }
(cd "$tmp" && npm pack --silent --cache "$PWD/npm-cache" "axe-core@$version" >/dev/null)
mv "$tmp/axe-core-$version.tgz" "$tmp/axe.tgz"
got="sha512-$(openssl dgst -sha512 -binary "$tmp/axe.tgz" | base64 -w0)"
[[ $got == "$integrity" ]] || { echo "axe-core: integrity mismatch ($got)"; exit 1; }
tar -xzf "$tmp/axe.tgz" -C "$tmp" package/axe.min.js
mv "$tmp/package/axe.min.js" "$dir/axe-$version.min.js"
