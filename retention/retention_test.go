package retention_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"changebot/retention"
	"changebot/store"
	"changebot/store/postgres"
	"changebot/store/postgres/pgtest"
)

// now is the injected clock of every case.
var now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// seed writes deliveries and callback rows received ages ago (processed
// unless unprocessed is set), and one change event dated long ago.
func seed(t *testing.T, sc pgtest.Schema, ages []time.Duration, unprocessed ...time.Duration) {
	t.Helper()
	ctx := context.Background()
	for i, age := range ages {
		at := now.Add(-age)
		if _, err := sc.Pool.Exec(ctx, `INSERT INTO webhook_deliveries (dedupe_key, event, body, received_at, processed_at, outcome)
			VALUES ($1, 'Note Hook', '{}'::bytea, $2, $2, 'routed')`, fmt.Sprintf("idem:d%d", i), at); err != nil {
			t.Fatal(err)
		}
		if _, err := sc.Pool.Exec(ctx, `INSERT INTO callback_requests (request_id, kind, operation_id, result, received_at)
			VALUES ($1, 'approval', 'op_x', 'ACCEPTED', $2)`, fmt.Sprintf("r%d", i), at); err != nil {
			t.Fatal(err)
		}
	}
	for i, age := range unprocessed {
		if _, err := sc.Pool.Exec(ctx, `INSERT INTO webhook_deliveries (dedupe_key, event, body, received_at)
			VALUES ($1, 'Note Hook', '{}'::bytea, $2)`, fmt.Sprintf("idem:u%d", i), now.Add(-age)); err != nil {
			t.Fatal(err)
		}
	}
}

func count(t *testing.T, sc pgtest.Schema, table string) int {
	t.Helper()
	var n int
	if err := sc.Pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

const day = 24 * time.Hour

// TestPrunerDeletesOnlyOldIntakeRows runs passes against the real
// database with an injected clock: rows older than the setting go, in
// batches of BatchSize and at most MaxBatches per table and pass; younger
// rows, unprocessed deliveries and change events stay.
func TestPrunerDeletesOnlyOldIntakeRows(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name            string
		ages            []time.Duration
		unprocessed     []time.Duration
		maxAge          time.Duration
		batch, batches  int
		wantDeleted     []int64 // deliveries deleted by each pass (callbacks alike)
		wantBatches     []int
		wantLeft        int // deliveries left after the passes
		wantLeftCallbck int
	}{
		{name: "nothing old", ages: []time.Duration{time.Hour, 29 * day}, maxAge: 30 * day, batch: 10, batches: 5,
			wantDeleted: []int64{0}, wantBatches: []int{2}, wantLeft: 2, wantLeftCallbck: 2},
		{name: "old rows go, young stay", ages: []time.Duration{time.Hour, 29 * day, 31 * day, 90 * day}, maxAge: 30 * day, batch: 10, batches: 5,
			wantDeleted: []int64{2}, wantBatches: []int{2}, wantLeft: 2, wantLeftCallbck: 2},
		{name: "in batches, bounded per pass", ages: []time.Duration{31 * day, 32 * day, 33 * day, 34 * day, 35 * day, day}, maxAge: 30 * day, batch: 2, batches: 2,
			wantDeleted: []int64{4, 1, 0}, wantBatches: []int{4, 2, 2}, wantLeft: 1, wantLeftCallbck: 1},
		{name: "unprocessed deliveries are kept", ages: []time.Duration{40 * day}, unprocessed: []time.Duration{40 * day}, maxAge: 30 * day, batch: 10, batches: 5,
			wantDeleted: []int64{1}, wantBatches: []int{2}, wantLeft: 0, wantLeftCallbck: 0},
		{name: "setting shortened", ages: []time.Duration{11 * day, 3 * time.Hour}, maxAge: 10 * day, batch: 10, batches: 5,
			wantDeleted: []int64{1}, wantBatches: []int{2}, wantLeft: 1, wantLeftCallbck: 1},
		// Issue 21.11: a GitHub redelivery (kept 3 days, 7 on GHES) or a
		// GitLab resend from Recent events must find its dedupe row, so a
		// shorter setting (stored before the floor) still keeps MinMaxAge.
		{name: "below the floor keeps the redelivery windows", ages: []time.Duration{2 * day, 7*day + 23*time.Hour, 8*day + time.Hour}, maxAge: day, batch: 10, batches: 5,
			wantDeleted: []int64{1}, wantBatches: []int{2}, wantLeft: 2, wantLeftCallbck: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sc := pgtest.New(t)
			st, err := postgres.New(sc.Pool, &postgres.StoreOpts{Schema: sc.Name})
			if err != nil {
				t.Fatal(err)
			}
			seed(t, sc, tc.ages, tc.unprocessed...)
			// A change whose history is older than any retention.
			old := now.Add(-400 * day)
			if _, err := sc.Pool.Exec(context.Background(), `INSERT INTO operations (id, subject_id, target_key, project, title, requested_by, step, status, step_started_at, created_at, updated_at)
				VALUES ('op_old', 's', 'k', 'p', 't', 'alice', 10201, 'CLOSED', $1, $1, $1)`, old); err != nil {
				t.Fatal(err)
			}
			if _, err := sc.Pool.Exec(context.Background(), `INSERT INTO change_events (operation_id, seq, type, from_step, to_step, from_status, to_status, actor, source, schema_version, occurred_at, prev_hash, hash)
				VALUES ('op_old', 1, 'submitted', 0, 10201, '', 'CLOSED', 'alice', 'api', 1, $1, '', 'h')`, old); err != nil {
				t.Fatal(err)
			}
			events := count(t, sc, "change_events")
			p := retention.New(retention.Config{Store: st, NowFunc: func() time.Time { return now },
				MaxAgeFunc: func() time.Duration { return tc.maxAge }, BatchSize: tc.batch, MaxBatches: tc.batches})
			for i, want := range tc.wantDeleted {
				rep, err := p.Run(context.Background())
				if err != nil {
					t.Fatalf("pass %d: %v", i+1, err)
				}
				got := rep.Deleted[store.TableWebhookDeliveries]
				if got != want || rep.Batches != tc.wantBatches[i] {
					t.Fatalf("pass %d deleted %d deliveries in %d batches in all, want %d in %d (report %+v)", i+1, got, rep.Batches, want, tc.wantBatches[i], rep)
				}
				if cb := rep.Deleted[store.TableCallbackRequests]; cb > got+int64(len(tc.unprocessed)) {
					t.Fatalf("pass %d deleted %d callback rows, %d deliveries", i+1, cb, got)
				}
			}
			if n := count(t, sc, "webhook_deliveries"); n != tc.wantLeft+len(tc.unprocessed) {
				t.Errorf("%d deliveries left, want %d", n, tc.wantLeft+len(tc.unprocessed))
			}
			if n := count(t, sc, "callback_requests"); n != tc.wantLeftCallbck {
				t.Errorf("%d callback rows left, want %d", n, tc.wantLeftCallbck)
			}
			if n := count(t, sc, "change_events"); n != events {
				t.Errorf("change events went from %d to %d: events are never pruned", events, n)
			}
		})
	}
}
