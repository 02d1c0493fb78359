#!/bin/sh
# The soak on a 16-core machine at a 15-s interval (10,000 nodes, 10 minutes), with a PostgreSQL cluster and a
# redis-server of its own, so nothing else on the machine shares them. Prepared for a lent device machine
# (no network there: the repository's .venv must travel with the working tree, or exist there):
#
#     sh bench/soak_device.sh                 # writes soak-15s.json (and the logs) under ${OUT:-var/soak-device}
#
# Needs PostgreSQL's server binaries (initdb, pg_ctl; Debian: postgresql-15 or 16) and redis-server on PATH
# or in /usr/lib/postgresql/*/bin. Sizing for 16 cores: 12 gunicorn workers, 3 writers, a Celery worker with
# 2 processes and beat; PostgreSQL and Redis take the rest. Override with WEB=.. WRITERS=.. NODES=.. MINUTES=..
set -eu
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/var/soak-device}"
mkdir -p "$OUT"
PGBIN="$(dirname "$(command -v initdb 2>/dev/null || ls /usr/lib/postgresql/*/bin/initdb | tail -1)")"
PGDATA="$(mktemp -d /tmp/soak-pg.XXXXXX)"
PGPORT="${PGPORT:-55432}"
"$PGBIN/initdb" -D "$PGDATA" -U postgres -A trust >"$OUT/initdb.log" 2>&1
# A production-like configuration for a 16-core, 128 GiB box (synchronous_commit stays on: acknowledged means durable).
cat >>"$PGDATA/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $PGPORT
max_connections = 200
shared_buffers = 8GB
effective_cache_size = 32GB
wal_buffers = 64MB
max_wal_size = 8GB
checkpoint_timeout = 15min
unix_socket_directories = '$PGDATA'
CONF
"$PGBIN/pg_ctl" -D "$PGDATA" -l "$OUT/postgres.log" -w start
trap '"$PGBIN/pg_ctl" -D "$PGDATA" -m fast stop; rm -rf "$PGDATA"' EXIT
uptime | tee "$OUT/uptime-before.txt"
status=0
.venv/bin/python bench/soak.py --nodes "${NODES:-10000}" --interval 15 --minutes "${MINUTES:-10}" \
    --web-workers "${WEB:-12}" --writers "${WRITERS:-3}" --celery-concurrency 2 \
    --database-url "postgres://postgres@127.0.0.1:$PGPORT/fleet_soak" --json "$OUT/soak-15s.json" \
    >"$OUT/soak-15s.out" 2>&1 || status=$?
uptime | tee "$OUT/uptime-after.txt"
cp -r var/soak-*/logs "$OUT/" 2>/dev/null || true
tail -60 "$OUT/soak-15s.out"
exit $status
