#!/usr/bin/env bash
# `make cluster`: builds the stock binaries if needed, then runs a real etcd + kube-apiserver on
# 127.0.0.1 with a few dozen demo nodes until Ctrl-C. Options go to the demo, e.g.
#   scripts/cluster.sh --nodes 200 --pods-per-node 0
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh run
scripts/k8s-binaries.sh >/dev/null
# exec: Ctrl-C and SIGTERM reach Python directly, which stops every process it started.
exec .venv/bin/python -m tests.harness.demo "$@"
