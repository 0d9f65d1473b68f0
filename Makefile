# schedweb: two set-up commands (README): `make run` and `make test`. Everything they need is
# installed by scripts/bootstrap.sh; services are started on 127.0.0.1 only.
SHELL := /bin/bash
.DEFAULT_GOAL := help

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

run:  ## install, migrate SQLite, start Redis (if needed), a Celery worker and the web server on 127.0.0.1:8000
	@scripts/run.sh

test:  ## install everything and run the whole suite (SQLite, then PostgreSQL)
	@scripts/test.sh

bench:  ## benchmarks, printing medians and ratios
	@scripts/bench.sh

cluster:  ## start a real etcd + kube-apiserver on 127.0.0.1 (Ctrl-C stops it)
	@scripts/cluster.sh

lint:  ## ruff lint and format check
	@scripts/bootstrap.sh dev >/dev/null && .venv/bin/ruff check . && .venv/bin/ruff format --check .

.PHONY: help run test bench cluster lint
