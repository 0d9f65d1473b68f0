#!/usr/bin/env bash
# Builds the stock kube-apiserver, kube-scheduler and etcd that the cluster tests run, from the
# versions pinned in tests/harness/go.mod, through the Go module proxy, into
# .cache/k8s/<kubernetes version>/ (git-ignored). Only the first build is slow: a stamp of
# go.mod + go.sum makes later runs return at once.
#   scripts/k8s-binaries.sh          # build if missing or stale; prints the binaries folder
#   scripts/k8s-binaries.sh --force  # rebuild even if the stamp matches
#   scripts/k8s-binaries.sh tidy     # after editing versions in go.mod: go mod tidy
#   scripts/k8s-binaries.sh toolchain  # install the Go toolchain only; prints its go binary
# The Go toolchain is installed the same way everywhere: the golang.org/toolchain module, fetched
# by whatever `go` the machine has (Debian's golang-go will do; scripts/bootstrap.sh dev installs
# it) with the go command's default module proxy and checksum database (or whatever GOPROXY and
# GOSUMDB say: no registry host is named here), and checked against the hash sum.golang.org
# publishes for it. That first `go` builds nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
case ${1:-} in
"" | --force | tidy | toolchain) ;;
*) echo "usage: $0 [--force | tidy | toolchain]" >&2; exit 2 ;;
esac
mod_dir=$root/tests/harness

# h1: hashes of golang.org/toolchain v0.0.1-go<version>.linux-<arch> as published by
# the checksum database (the Sum that `go mod download -json golang.org/toolchain@v0.0.1-go1.26.5.linux-amd64`
# prints).
declare -A toolchain_h1=(
  [go1.26.5.linux-amd64]='h1:/yCM7qVQu6sYYUewQ39rtTtRMYMHdbP9oNjgp+lEV9w='
  [go1.26.5.linux-arm64]='h1:UHSk3bG/La7y0Yct6mGksNBsq5i/8jxM+TAKPjB6jUM='
)

die() { echo "k8s-binaries: $*" >&2; exit 1; }
temp_dirs=()
trap 'rm -rf "${temp_dirs[@]}"' EXIT
for cmd in python3 flock sha256sum; do
  command -v $cmd >/dev/null || die "$cmd is needed (Debian: apt-get install python3 util-linux coreutils)"
done

go_version=$(awk '$1 == "toolchain" {print $2}' "$mod_dir/go.mod")
k8s_version=$(awk '$1 == "require" {$1 = ""; $0 = $0} $1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print $2; exit}' "$mod_dir/go.mod")
[[ -n $go_version && -n $k8s_version ]] || die "tests/harness/go.mod has no toolchain or k8s.io/kubernetes line"
case $(uname -m) in
x86_64) arch=amd64 ;;
aarch64 | arm64) arch=arm64 ;;
*) die "unsupported machine $(uname -m) (linux amd64 and arm64 only)" ;;
esac
toolchain=$go_version.linux-$arch
expected_h1=${toolchain_h1[$toolchain]:-}
[[ -n $expected_h1 ]] || die "no pinned checksum for $toolchain: add its sum.golang.org h1: hash to this script"

goroot=$root/.cache/go-toolchain/$go_version
out=$root/.cache/k8s/$k8s_version
mkdir -p "$root/.cache/go" "$root/.cache/go-toolchain" "$root/.cache/k8s"

# Everything Go writes stays under .cache/go; nothing reaches ~/go or ~/.cache.
# The module proxy and checksum database are the go command's defaults (or GOPROXY/GOSUMDB's).
export GOTOOLCHAIN=local
export GOPATH=$root/.cache/go/path GOMODCACHE=$root/.cache/go/mod GOCACHE=$root/.cache/go/build
# Static binaries like the release's; two compile jobs (K8S_BUILD_JOBS) to share the 2 cores.
export GOENV=off GOTELEMETRY=off GOWORK=off CGO_ENABLED=0 GOFLAGS=-p=${K8S_BUILD_JOBS:-2}
unset GOROOT
go=$goroot/bin/go

install_toolchain() {
  local fetch_go tmp zip extracted
  fetch_go=$(command -v go) || die "a go command is needed to fetch Go $go_version (Debian: apt-get install golang-go; scripts/bootstrap.sh dev does)"
  tmp=$(mktemp -d "$root/.cache/go-toolchain/.download.XXXXXX")
  temp_dirs+=("$tmp")
  echo "k8s-binaries: fetching Go $go_version (the golang.org/toolchain module) with $("$fetch_go" env GOVERSION 2>/dev/null || echo "$fetch_go")" >&2
  # The module's zip (kept in the module cache) and its extracted copy (removed below: ours is
  # extracted from the zip once its hash is checked).
  read -r zip extracted < <(cd "$tmp" && GOFLAGS= "$fetch_go" mod download -json "golang.org/toolchain@v0.0.1-$toolchain" |
    python3 -c 'import json, sys; info = json.load(sys.stdin); sys.exit(info["Error"]) if info.get("Error") else print(info["Zip"], info.get("Dir", ""))') ||
    true
  [[ -f ${zip:-} ]] || die "could not fetch golang.org/toolchain@v0.0.1-$toolchain"
  if [[ -n ${extracted:-} && -d $extracted ]]; then chmod -R u+w "$extracted" && rm -rf "$extracted"; fi
  # dirhash Hash1, as cmd/go computes it for go.sum: sha256 over the sorted lines
  # "<sha256 hex of file>  <name in zip>\n", base64-encoded, prefixed "h1:".
  python3 - "$zip" "$expected_h1" "$tmp/unpacked" <<'PY' || die "checksum mismatch for $toolchain: refusing to install it"
import base64, hashlib, sys, zipfile

path, expected, dest = sys.argv[1:]
with zipfile.ZipFile(path) as z:
    names = sorted(z.namelist())
    summary = "".join(f"{hashlib.sha256(z.read(n)).hexdigest()}  {n}\n" for n in names)
    actual = "h1:" + base64.b64encode(hashlib.sha256(summary.encode()).digest()).decode()
    if actual != expected:
        sys.exit(f"expected {expected}, got {actual}")
    z.extractall(dest)
PY
  local unpacked=$tmp/unpacked/golang.org/toolchain@v0.0.1-$toolchain
  # Module zips carry no file modes; cmd/go sets these executable when it installs a toolchain.
  chmod +x "$unpacked"/bin/* "$unpacked"/pkg/tool/*/*
  rm -rf "$goroot"
  mv "$unpacked" "$goroot"
}

if [[ ${1:-} == toolchain ]]; then
  # For scripts/helm-binary.sh: one toolchain, installed and verified in one place.
  [[ -x $go && $("$go" env GOVERSION 2>/dev/null) == "$go_version" ]] || install_toolchain
  echo "$go"
  exit 0
fi
if [[ ${1:-} == tidy ]]; then
  [[ -x $go ]] || install_toolchain
  cd "$mod_dir" && exec "$go" mod tidy
fi

stamp=$(cat "$mod_dir/go.mod" "$mod_dir/go.sum" | sha256sum | cut -c1-64)
built() { [[ -x $out/kube-apiserver && -x $out/kube-scheduler && -x $out/etcd && $(cat "$out/.stamp" 2>/dev/null) == "$stamp" ]]; }
if [[ ${1:-} != --force ]] && built; then
  echo "$out"
  exit 0
fi

# One build at a time (make test and make cluster may start together); the second waits and
# then finds the stamp written.
exec 9>"$root/.cache/k8s/.lock"
flock 9
if [[ ${1:-} != --force ]] && built; then
  echo "$out"
  exit 0
fi

[[ -x $go && $("$go" env GOVERSION 2>/dev/null) == "$go_version" ]] || install_toolchain

start=$SECONDS
echo "k8s-binaries: building kube-apiserver, kube-scheduler ($k8s_version) and etcd with $go_version (cold: about 12 minutes on 2 cores)" >&2
tmp_out=$(mktemp -d "$root/.cache/k8s/.build.XXXXXX")
temp_dirs+=("$tmp_out")
# The version variables hack/lib/version.sh sets for a release build, so /version and
# --version report the real release instead of v0.0.0-master.
major=${k8s_version#v}; major=${major%%.*}
minor=${k8s_version#v*.}; minor=${minor%%.*}
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
done
cd "$mod_dir"
"$go" build -mod=readonly -trimpath -buildvcs=false -ldflags="$ldflags" -o "$tmp_out/" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-scheduler
"$go" build -mod=readonly -trimpath -buildvcs=false -ldflags="-s -w" -o "$tmp_out/etcd" go.etcd.io/etcd/server/v3
mkdir -p "$out"
mv -f "$tmp_out"/kube-apiserver "$tmp_out"/kube-scheduler "$tmp_out"/etcd "$out"/
echo "$stamp" >"$out/.stamp"
echo "k8s-binaries: built in $((SECONDS - start)) s" >&2
echo "$out"
