#!/usr/bin/env bash
# `make run`: local defaults (SQLite, Redis on 127.0.0.1:6379, the demo cluster unless
# SCHEDWEB_KUBECONFIG is set), a Celery worker with beat, and uvicorn on 127.0.0.1:8000.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .run
scripts/bootstrap.sh run
[[ -f .env ]] && set -a && source .env && set +a
redis_url=${SCHEDWEB_REDIS_URL:-redis://127.0.0.1:6379/0}
if [[ $redis_url =~ ^redis://(127\.0\.0\.1|localhost):([0-9]+) ]]; then
  scripts/services.sh redis "${BASH_REMATCH[2]}"
fi
export SCHEDWEB_REDIS_URL=$redis_url
py=.venv/bin/python
$py manage.py migrate --noinput -v0
$py manage.py collectstatic --noinput -v0
if [[ ! -f .run/admin-login.txt ]]; then   # first start: an admin to log in with
  $py manage.py adduser admin --role admin --if-no-users | tee .run/admin-login.txt
fi

pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM
.venv/bin/celery -A schedweb worker -B --loglevel=INFO --concurrency=2 \
  --schedule .run/celerybeat-schedule >.run/worker.log 2>&1 &
pids+=($!)
echo "schedweb: http://127.0.0.1:8000/  (login: see .run/admin-login.txt; worker log: .run/worker.log; Ctrl-C stops everything)"
.venv/bin/uvicorn schedweb.asgi:application --host 127.0.0.1 --port 8000 \
  --workers "${SCHEDWEB_WEB_WORKERS:-2}" --loop uvloop --http httptools --lifespan on &
pids+=($!)
wait -n "${pids[@]}"
