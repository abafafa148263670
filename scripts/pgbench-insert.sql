-- One single-row INSERT per transaction (pgbench runs each script as one
-- transaction): the reference BenchmarkIntake is compared with
-- (DESIGN §9). The payload is about the size of the intake benchmark's
-- delivery (testdata/gitlab/webhook-merge_request-open.json, 6 kB).
-- Run against a scratch database, never `test`: see BENCHMARKS.md.
INSERT INTO bench_insert (payload) VALUES (repeat('x', 6000));
