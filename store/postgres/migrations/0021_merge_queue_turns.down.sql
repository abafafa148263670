ALTER TABLE merge_queues DROP COLUMN IF EXISTS turn_avg_ms;
