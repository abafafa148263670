-- 0009: how long a change holds a merge queue's head, on average (the
-- PostgreSQL migration 0021's column, in milliseconds; 0 before any turn).
ALTER TABLE merge_queues ADD COLUMN turn_avg_ms INTEGER NOT NULL DEFAULT 0;
