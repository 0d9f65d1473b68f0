#!/usr/bin/env bash
# `make run`: local defaults (SQLite, Redis on 127.0.0.1:6379, the demo cluster unless
# SCHEDWEB_KUBECONFIG is set), a Celery worker with beat, uvicorn on 127.0.0.1:8000 (pages, API)
# and the extender's own listener on 127.0.0.1:8443 (HTTPS with mutual TLS; certificates from a
# local CA made on first start in .run/tls/, see scripts/extender-certs.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
umask 077   # .run/ (secret key, admin password, logs) and the SQLite file: readable by us only
mkdir -p .run
chmod 700 .run
scripts/bootstrap.sh run
[[ -f .env ]] && set -a && source .env && set +a
redis_url=${SCHEDWEB_REDIS_URL:-redis://127.0.0.1:6379/0}
started_redis=""   # the port of a Redis this run started (and stops on exit), if any
if [[ $redis_url =~ ^redis://(127\.0\.0\.1|localhost):([0-9]+) ]]; then
  redis_port=${BASH_REMATCH[2]}
  (exec 3<>"/dev/tcp/127.0.0.1/$redis_port") 2>/dev/null || started_redis=$redis_port
  scripts/services.sh redis "$redis_port"
fi
export SCHEDWEB_REDIS_URL=$redis_url
# DEBUG pages show settings and URL lists: off unless asked for (SCHEDWEB_DEBUG=1 in .env).
export SCHEDWEB_DEBUG=${SCHEDWEB_DEBUG:-0}
# A secret key of this checkout's own, generated on first start (sessions and CSRF tokens).
if [[ -z ${SCHEDWEB_SECRET_KEY:-} ]]; then
  [[ -s .run/secret-key ]] || .venv/bin/python -c 'import secrets; print(secrets.token_urlsafe(50))' >.run/secret-key
  SCHEDWEB_SECRET_KEY=$(<.run/secret-key)
  export SCHEDWEB_SECRET_KEY
fi
# The extender's listener: TLS with a server certificate, and only clients with a certificate
# of the local CA complete the handshake; each certificate has one job (issue 27; the settings'
# defaults name these subjects): .run/tls/client.crt (CN=kube-scheduler) the extender verbs,
# webhook.crt (CN=kube-apiserver) the queue webhook, probe.crt (CN=schedweb-probe) health only.
if [[ -z ${SCHEDWEB_EXTENDER_TLS_CERT:-} ]]; then
  scripts/extender-certs.sh .run/tls
  tls=$PWD/.run/tls
  export SCHEDWEB_EXTENDER_TLS_CERT=$tls/server.crt SCHEDWEB_EXTENDER_TLS_KEY=$tls/server.key
  export SCHEDWEB_EXTENDER_CLIENT_CA=$tls/ca.crt
  # What schedulerconfig and the Connect page tell kube-scheduler to use.
  export SCHEDWEB_EXTENDER_SCHEDULER_CA=${SCHEDWEB_EXTENDER_SCHEDULER_CA:-$tls/ca.crt}
  export SCHEDWEB_EXTENDER_SCHEDULER_CERT=${SCHEDWEB_EXTENDER_SCHEDULER_CERT:-$tls/client.crt}
  export SCHEDWEB_EXTENDER_SCHEDULER_KEY=${SCHEDWEB_EXTENDER_SCHEDULER_KEY:-$tls/client.key}
fi
py=.venv/bin/python
$py manage.py migrate --noinput -v0
$py manage.py collectstatic --noinput -v0
if [[ ! -f .run/admin-login.txt ]]; then   # first start: an admin to log in with
  $py manage.py adduser admin --role admin --if-no-users | tee .run/admin-login.txt
fi
# Files an older `make run` created world-readable.
chmod 600 .run/secret-key .run/admin-login.txt 2>/dev/null || true
[[ -f db.sqlite3 ]] && chmod 600 db.sqlite3

pids=()
cleanup() {
  kill "${pids[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
  [[ -z $started_redis ]] || scripts/services.sh stop-redis "$started_redis"
}
trap cleanup EXIT INT TERM
# Without gossip, mingle and event heartbeats: no schedweb code or monitor uses worker-to-worker
# events (no `celery inspect`, no Flower), and gossip logged ERROR tracebacks on a Redis restart.
# Keep these flags on every worker command line (docker-compose.yml, tests/e2e/stack.py).
.venv/bin/celery -A schedweb worker -B --loglevel=INFO --concurrency=2 \
  --without-gossip --without-mingle --without-heartbeat \
  --schedule .run/celerybeat-schedule >.run/worker.log 2>&1 &
pids+=($!)
echo "schedweb: http://127.0.0.1:${SCHEDWEB_WEB_PORT:-8000}/  (login: see .run/admin-login.txt; worker log: .run/worker.log; Ctrl-C stops everything)"
# httptools with deadlines for clients that stall in their headers or body (schedweb/http_timeouts.py).
.venv/bin/uvicorn schedweb.asgi:application --host 127.0.0.1 --port "${SCHEDWEB_WEB_PORT:-8000}" \
  --workers "${SCHEDWEB_WEB_WORKERS:-2}" --loop uvloop --http schedweb.http_timeouts:TimedHttpToolsProtocol --lifespan on &
pids+=($!)
extender_url=$(DJANGO_SETTINGS_MODULE=schedweb.settings $py -c 'import django; django.setup(); from django.conf import settings; print(settings.SCHEDWEB_EXTENDER_URL)' 2>/dev/null || true)
echo "schedweb extender: ${extender_url}  (kube-scheduler: python manage.py schedulerconfig, or the Connect page)"
$py -m schedweb.extender_server &
pids+=($!)
wait -n "${pids[@]}"
