#!/usr/bin/env bash
# `make bench`: every benchmark, printing medians, p99 and ratios measured in the same run.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh dev
scripts/k8s-binaries.sh >/dev/null   # the extender suite runs a real kube-apiserver and kube-scheduler
.venv/bin/python -m bench "$@"
