#!/bin/sh
# pgbench.sh: the PostgreSQL reference of BENCHMARKS.md. Runs a
# one-insert-per-transaction script (scripts/pgbench-insert.sql) for
# PGBENCH_TIME seconds at 1 and at 8 clients against the scratch database
# `bench` (created if missing; the `test` database is never touched).
set -eu
HOST=${PGHOST:-127.0.0.1}
USER=${PGUSER:-postgres}
DB=${PGBENCH_DB:-bench}
SECS=${PGBENCH_TIME:-10}
dir=$(dirname "$0")
psql -h "$HOST" -U "$USER" -lqt | cut -d'|' -f1 | grep -qw "$DB" || createdb -h "$HOST" -U "$USER" "$DB"
psql -q -h "$HOST" -U "$USER" "$DB" -c "CREATE TABLE IF NOT EXISTS bench_insert (id bigserial PRIMARY KEY, payload text NOT NULL, created_at timestamptz NOT NULL DEFAULT now()); TRUNCATE bench_insert"
for c in 1 8; do
	echo "== pgbench, one insert per transaction, $c client(s), ${SECS}s"
	pgbench -h "$HOST" -U "$USER" -n -f "$dir/pgbench-insert.sql" -c "$c" -j "$c" -T "$SECS" -r "$DB" | grep -E 'latency average|tps ='
done
