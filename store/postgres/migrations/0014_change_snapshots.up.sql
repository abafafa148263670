-- 0014: snapshots of a change's replayed state every N events (setting
-- history.snapshot_every), so a replay starts from the nearest one instead
-- of the first event. Derived data: replay rebuilds them; the events stay
-- the record (a copy leaves snapshots behind, store.IgnoredTables).
CREATE TABLE change_snapshots (
    operation_id text NOT NULL REFERENCES operations (id),
    seq          bigint NOT NULL,
    occurred_at  timestamptz NOT NULL,
    state        jsonb NOT NULL,
    PRIMARY KEY (operation_id, seq)
);
