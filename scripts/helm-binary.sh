#!/usr/bin/env bash
# Builds the stock helm CLI that the chart tests run (`helm lint`, `helm template`) from the
# helm.sh/helm/v3 version pinned in tests/harness/helm/go.mod, through the go command's module proxy, with
# the toolchain scripts/k8s-binaries.sh installs, into .cache/helm/<version>/helm (git-ignored).
# A stamp of go.mod + go.sum makes later runs return at once (cold, modules downloaded and compiled: 272 s measured on a loaded 2-core machine).
#   scripts/helm-binary.sh          # build if missing or stale; prints the binary's path
#   scripts/helm-binary.sh --force  # rebuild even if the stamp matches
#   scripts/helm-binary.sh tidy     # after changing the version in go.mod: go mod tidy
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
case ${1:-} in
"" | --force | tidy) ;;
*) echo "usage: $0 [--force | tidy]" >&2; exit 2 ;;
esac
mod_dir=$root/tests/harness/helm
die() { echo "helm-binary: $*" >&2; exit 1; }

version=$(awk '$1 == "require" && $2 == "helm.sh/helm/v3" {print $3} $1 == "helm.sh/helm/v3" && $2 ~ /^v/ {print $2}' "$mod_dir/go.mod" | head -1)
[[ -n $version ]] || die "tests/harness/helm/go.mod does not require helm.sh/helm/v3"
out=$root/.cache/helm/$version
stamp=$(cat "$mod_dir/go.mod" "$mod_dir/go.sum" | sha256sum | cut -c1-64)
built() { [[ -x $out/helm && $(cat "$out/.stamp" 2>/dev/null) == "$stamp" ]]; }
if [[ ${1:-} == "" ]] && built; then
  echo "$out/helm"
  exit 0
fi

go=$(scripts/k8s-binaries.sh toolchain)
# Everything Go writes stays under .cache/go, as with scripts/k8s-binaries.sh. The module proxy
# and checksum database are the go command's defaults (or whatever GOPROXY/GOSUMDB say).
export GOTOOLCHAIN=local
export GOPATH=$root/.cache/go/path GOMODCACHE=$root/.cache/go/mod GOCACHE=$root/.cache/go/build
export GOENV=off GOTELEMETRY=off GOWORK=off CGO_ENABLED=0 GOFLAGS=-p=${K8S_BUILD_JOBS:-2}
unset GOROOT
if [[ ${1:-} == tidy ]]; then
  cd "$mod_dir" && exec "$go" mod tidy
fi

mkdir -p "$root/.cache/helm"
exec 9>"$root/.cache/helm/.lock"
flock 9
if [[ ${1:-} != --force ]] && built; then
  echo "$out/helm"
  exit 0
fi
start=$SECONDS
echo "helm-binary: building helm $version" >&2
tmp_out=$(mktemp -d "$root/.cache/helm/.build.XXXXXX")
trap 'rm -rf "$tmp_out"' EXIT
cd "$mod_dir"
# As helm's Makefile: -s -w (no symbol tables), the version `helm version` prints, and the
# Kubernetes version `helm template` and `lint` assume, from the client-go it is built with
# (v0.35.x -> 1.35; otherwise 1.20, which a chart's kubeVersion may refuse).
client_go=$("$go" list -mod=readonly -m -f '{{.Version}}' k8s.io/client-go)
k8s_minor=${client_go#v0.}; k8s_minor=${k8s_minor%%.*}
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$version"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$k8s_minor"
done
"$go" build -mod=readonly -trimpath -buildvcs=false -ldflags="$ldflags" \
  -o "$tmp_out/helm" helm.sh/helm/v3/cmd/helm
mkdir -p "$out"
mv -f "$tmp_out/helm" "$out/helm"
echo "$stamp" >"$out/.stamp"
echo "helm-binary: built in $((SECONDS - start)) s" >&2
echo "$out/helm"
