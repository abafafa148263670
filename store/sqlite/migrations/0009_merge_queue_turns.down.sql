ALTER TABLE merge_queues DROP COLUMN turn_avg_ms;
