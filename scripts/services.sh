#!/usr/bin/env bash
# Starts local services on 127.0.0.1 when they are not already answering.
#   scripts/services.sh redis PORT      # redis-server, data under .run/redis-PORT
#   scripts/services.sh postgres PORT   # a private PostgreSQL cluster under .cache/pg-PORT
#   scripts/services.sh check-postgres PORT  # exit 0 when it accepts a new connection; else its log
#   scripts/services.sh stop-redis PORT # stops the redis-server started here on PORT
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .run

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

case $1 in
redis)
  port=$2
  if port_open "$port"; then exit 0; fi
  mkdir -p ".run/redis-$port"
  # Bounded like docker-compose's: writes fail when full (noeviction) instead of losing queues.
  redis-server --bind 127.0.0.1 --port "$port" --dir "$PWD/.run/redis-$port" --save '' --appendonly no \
    --maxmemory "${SCHEDWEB_REDIS_MAXMEMORY:-512mb}" --maxmemory-policy noeviction \
    --daemonize yes --logfile "$PWD/.run/redis-$port/redis.log" --pidfile "$PWD/.run/redis-$port/redis.pid"
  for _ in $(seq 50); do port_open "$port" && exit 0; sleep 0.1; done
  echo "services: redis did not start on 127.0.0.1:$port"; exit 1
  ;;
postgres)
  port=$2
  if port_open "$port"; then exit 0; fi
  bindir=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
  # Not under .run/: `make run` makes .run/ private to its user (chmod 700), and PostgreSQL runs
  # as the postgres user when we are root, so pg_ctl could no longer reach a data dir in there.
  data="$PWD/.cache/pg-$port"
  run_as=(); [[ $(id -u) -eq 0 ]] && run_as=(runuser -u postgres --)   # PostgreSQL refuses to run as root
  if [[ ! -f $data/PG_VERSION ]]; then
    mkdir -p "$data"; [[ $(id -u) -eq 0 ]] && chown postgres: "$data"
    "${run_as[@]}" "$bindir/initdb" -D "$data" -U postgres --auth=trust -E UTF8 >/dev/null
  fi
  [[ $(id -u) -eq 0 ]] && chown -R postgres: "$data"
  "${run_as[@]}" "$bindir/pg_ctl" -D "$data" -l "$data/server.log" -w -t 30 \
    -o "-h 127.0.0.1 -p $port -k /tmp -c fsync=off -c synchronous_commit=off -c full_page_writes=off" start >/dev/null
  ;;
check-postgres)
  # A new connection, not just an open port: what transactional tests and threads need.
  port=$2
  bindir=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
  for _ in $(seq 100); do
    "$bindir/pg_isready" -q -h 127.0.0.1 -p "$port" -U postgres && exit 0
    sleep 0.1
  done
  echo "services: PostgreSQL on 127.0.0.1:$port accepts no connection; its log ends:"
  tail -n 40 "$PWD/.cache/pg-$port/server.log" 2>/dev/null || true
  exit 1
  ;;
stop-redis)
  pidfile=".run/redis-$2/redis.pid"
  [[ -f $pidfile ]] || exit 0
  kill "$(<"$pidfile")" 2>/dev/null || true
  for _ in $(seq 50); do port_open "$2" || exit 0; sleep 0.1; done
  echo "services: redis on 127.0.0.1:$2 did not stop"; exit 1
  ;;
*) echo "usage: $0 redis|postgres|check-postgres|stop-redis PORT"; exit 2 ;;
esac
