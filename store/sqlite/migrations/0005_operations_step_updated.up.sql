-- 0005: the stuck-step sweeper's query (ListStuckOperations: step in the
-- in-progress steps, unchanged since a moment, oldest first) read every
-- operation: with 100,000 finished changes 69 ms a pass on PostgreSQL, 82
-- ms on SQLite (BENCHMARKS.md, issue 12 point 5). This index serves it.
CREATE INDEX operations_step_updated ON operations (step, updated_at);
