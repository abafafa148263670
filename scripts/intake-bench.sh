#!/bin/sh
# intake-bench.sh: BenchmarkIntake (webhooks) next to pgbench in one run, as
# BENCHMARKS.md quotes it: pgbench at 1 and 8 clients, then the intake at 8
# and 1 senders and at half of pgbench's 8-client tps (CHANGEBOT_BENCH_RATE),
# then pgbench again, with the load average before and after.
# COUNT (default 3) runs of each benchmark.
set -eu
dir=$(dirname "$0")
COUNT=${COUNT:-3}
date -u
uptime
out=$(mktemp)
"$dir/pgbench.sh" | tee "$out"
rate=$(awk '/tps =/{t=$3} END{printf "%d", t/2}' "$out")
rm -f "$out"
echo "== intake, CHANGEBOT_BENCH_RATE=$rate (half of pgbench's tps at 8 clients)"
CHANGEBOT_BENCH_RATE=$rate go test -run '^$' -bench Intake -benchmem -count "$COUNT" "$dir/../webhooks"
uptime
"$dir/pgbench.sh"
uptime
