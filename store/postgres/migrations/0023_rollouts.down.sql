DROP TABLE rollouts;
DROP INDEX operations_rollout;
ALTER TABLE operations DROP COLUMN rollout_id;
