DROP INDEX IF EXISTS operations_queue;
DROP TABLE IF EXISTS merge_queue_fronts;
DROP TABLE IF EXISTS merge_queues;
