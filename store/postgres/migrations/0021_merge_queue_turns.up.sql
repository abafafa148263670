-- 0021: how long a change holds a merge queue's head, on average (issue 22
-- point 5: the status comment's "about 2 min"). turn_avg_ms is updated as
-- each head is given back: the first turn's length, then 3/4 of the old
-- average plus 1/4 of the new turn, in milliseconds; 0 before any turn.
ALTER TABLE merge_queues ADD COLUMN turn_avg_ms bigint NOT NULL DEFAULT 0;
