#!/usr/bin/env bash
# `make test`: installs what the suite needs, starts Redis and PostgreSQL on 127.0.0.1 (own
# ports, own data under .run/ and .cache/), lints, then runs the whole suite on SQLite and the
# database-backed tests again on PostgreSQL.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
scripts/bootstrap.sh dev
scripts/services.sh redis 6390
# 25432: below the kernel's ephemeral range (32768-60999), so no test's port-0 listener can hold
# it should PostgreSQL ever need to start again.
scripts/services.sh postgres 25432
scripts/services.sh check-postgres 25432
scripts/k8s-binaries.sh >/dev/null   # stock etcd/kube-apiserver/kube-scheduler for `cluster` tests; cached after the first build
scripts/k8s-binaries.sh toolchain >/dev/null  # the CEL conformance tests fetch cel-spec's data with it (cached binaries alone need none)
scripts/helm-binary.sh >/dev/null    # stock helm for the chart tests (tests/deploy); cached likewise
export SCHEDWEB_REDIS_URL=redis://127.0.0.1:6390/0
export SCHEDWEB_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:25432/schedweb

.venv/bin/ruff check .
.venv/bin/ruff format --check .

echo "== pytest (SQLite)"
.venv/bin/pytest "$@"
echo "== pytest (PostgreSQL: tests that use the database)"
# The SQLite run takes a while; whatever happened to PostgreSQL meanwhile, start it again if it
# stopped and fail here, with its log, if it takes no new connection.
scripts/services.sh postgres 25432
scripts/services.sh check-postgres 25432
SCHEDWEB_DATABASE_URL=$SCHEDWEB_TEST_POSTGRES_URL .venv/bin/pytest -m db "$@"
echo "make test: passed in $((SECONDS - start)) s"
