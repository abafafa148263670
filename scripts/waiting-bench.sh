#!/bin/sh
# The waiting-changes benchmark of BENCHMARKS.md (issue 12 point 5): 1,000
# and 10,000 changes waiting on pipelines that never report, one replica,
# alone on the scratch database bench_waiting (created if missing) so that
# pg_stat_database counts its transactions only. A window of
# CHANGEBOT_BENCH_WAIT_WINDOW (default 60s) each, after the seeding.
set -e
createdb -h 127.0.0.1 -U postgres bench_waiting 2>/dev/null || true
TEST_DATABASE_URL='postgres://postgres@127.0.0.1:5432/bench_waiting?sslmode=disable' \
CHANGEBOT_BENCH_WAIT_WINDOW=${CHANGEBOT_BENCH_WAIT_WINDOW:-60s} \
	go test ./bot -run '^$' -bench '^BenchmarkWaitingChanges$' -benchtime 1x -timeout 60m
