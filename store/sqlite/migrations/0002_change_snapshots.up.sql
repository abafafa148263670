-- 0002: snapshots of a change's replayed state every N events (setting
-- history.snapshot_every), so a replay starts from the nearest one instead
-- of the first event. Derived data: replay rebuilds them; the events stay
-- the record (a copy leaves snapshots behind, store.IgnoredTables).
-- occurred_at is the time of event seq, as text like change_events'.
CREATE TABLE change_snapshots (
    operation_id TEXT NOT NULL REFERENCES operations (id),
    seq          INTEGER NOT NULL,
    occurred_at  TEXT NOT NULL,
    state        TEXT NOT NULL,
    PRIMARY KEY (operation_id, seq)
);
