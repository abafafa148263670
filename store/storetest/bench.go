package storetest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"changebot/store"
)

// Steps and statuses of the benchmark's rows, as the step table has them
// (store does not import flows): VALIDATED, a change waiting on its MR
// pipeline (CREATE_MR_OPENED, MR_CREATING) and MERGED.
const (
	benchValidatedStep = 30001
	benchWaitingStep   = 10003
	benchMergedStep    = 20007
)

// benchFinished is how many finished changes BenchmarkPasses puts in the
// database (issue 12 point 5: 100,000); CHANGEBOT_BENCH_FINISHED changes it.
func benchFinished() int {
	if n, err := strconv.Atoi(os.Getenv("CHANGEBOT_BENCH_FINISHED")); err == nil && n > 0 {
		return n
	}
	return 100_000
}

// BenchmarkPasses measures the queries one reconciler pass and one sweeper
// pass make (issue 12 point 5, "reconciler and sweeper queries per run
// with 100,000 finished changes") on a database holding benchFinished
// VALIDATED changes (updated over the last 30 days), 100 changes waiting
// on a pipeline and 100 MERGED within the reconciler's window, imported in
// one transaction (store.Snapshot), then analyze (the engine's statistics,
// as autovacuum or SQLite's ANALYZE keep them in a running installation;
// nil: none). Each sub-benchmark runs one query the way its pass calls it:
// ns/op is the time of that query per pass.
func BenchmarkPasses(b *testing.B, open Open, analyze func(testing.TB)) {
	s := open(b)(Opts{})
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)
	imp, ok := s.(interface {
		Import(ctx context.Context, snap *store.Snapshot) error
	})
	if !ok {
		b.Fatalf("%T cannot import a copy (storecopy.Target)", s)
	}
	if err := imp.Import(ctx, benchSnapshot(benchFinished(), now)); err != nil {
		b.Fatal(err)
	}
	if analyze != nil {
		analyze(b)
	}
	waiting := []int{benchWaitingStep, 10101, 20002, 20004, 20005, 20006, 30002}
	kinds := []string{"await_pipeline", "handle_merge_request", "await_deploy"}
	runs := []struct {
		name string
		run  func() error
	}{
		{"reconciler/candidates", func() error {
			_, err := s.ListReconcileCandidates(ctx, s.DB(), store.ReconcileParams{After: now.Add(-24 * time.Hour),
				Before: now.Add(-10 * time.Minute), Limit: 500})
			return err
		}},
		{"reconciler/wake_stale_waits", func() error {
			_, err := s.WakeStaleWaits(ctx, s.DB(), store.WakeParams{Steps: waiting, Kinds: kinds,
				QuietBefore: now.Add(-10 * time.Minute), WakeAfter: now.Add(10 * time.Minute), Limit: 100})
			return err
		}},
		{"reconciler/watched_mrs", func() error {
			_, err := s.ListWatchedMRs(ctx, s.DB(), store.WatchParams{Steps: []int{10102, 10201, 10004, 10502, 20008},
				Statuses: []string{store.StatusApprovalSent, store.StatusCreateFailed, store.StatusMRCreating, store.StatusHandleFailed},
				Limit:    50})
			return err
		}},
		{"sweeper/stuck", func() error {
			_, err := s.ListStuckOperations(ctx, s.DB(), store.StuckParams{Steps: waiting, Kinds: kinds,
				QuietBefore: now.Add(-10 * time.Minute), Limit: 100})
			return err
		}},
		{"active/count", func() error {
			_, err := s.CountActive(ctx, s.DB())
			return err
		}},
	}
	for _, r := range runs {
		b.Run(r.name, func(b *testing.B) {
			for b.Loop() {
				if err := r.run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchSnapshot is a copy of an installation holding finished finished
// changes, 100 waiting and 100 merged ones, operations only.
func benchSnapshot(finished int, now time.Time) *store.Snapshot {
	var table store.Table
	for _, t := range store.CopyTables {
		if t.Name == "operations" {
			table = t
		}
	}
	row := func(i int, step int, status string, updated time.Time) []any {
		v := map[string]any{
			"id": fmt.Sprintf("op_bench_%08d", i), "platform": "gitlab", "subject_id": fmt.Sprintf("svc-%d", i),
			"target_key": "prod", "project": "group/config", "project_id": int64(1 + i%20), "target_branch": "main",
			"source_branch": fmt.Sprintf("changebot/svc-%d", i), "title": "t", "files": []byte(`[]`),
			"requested_by": "alice", "approval_first": true, "step": int64(step), "status": status, "version": int64(9),
			"mr_iid": int64(i + 1), "merge_commit_sha": "", "step_started_at": updated, "created_at": updated.Add(-time.Hour),
			"updated_at": updated,
		}
		if status == store.StatusMerged || status == store.StatusValidated {
			v["merge_commit_sha"] = fmt.Sprintf("%040d", i)
		}
		out := make([]any, len(table.Columns))
		for j, c := range table.Columns {
			x, ok := v[c.Name]
			if !ok {
				x = zeroOf(c.Kind)
			}
			out[j] = x
		}
		return out
	}
	var rows [][]any
	for i := range finished {
		rows = append(rows, row(i, benchValidatedStep, store.StatusValidated,
			now.Add(-time.Duration(i%(30*24*60))*time.Minute-time.Hour)))
	}
	for i := range 100 {
		rows = append(rows, row(finished+i, benchWaitingStep, store.StatusMRCreating, now.Add(-time.Duration(i)*time.Minute)))
		rows = append(rows, row(finished+100+i, benchMergedStep, store.StatusMerged, now.Add(-time.Duration(20+i)*time.Minute)))
	}
	return &store.Snapshot{Rows: map[string][][]any{"operations": rows}}
}

// zeroOf is the value of a column of kind k the benchmark does not set.
func zeroOf(k store.ColumnKind) any {
	switch k {
	case store.KindText:
		return ""
	case store.KindInt:
		return int64(0)
	case store.KindBool:
		return false
	case store.KindTime:
		return time.Unix(0, 0).UTC()
	case store.KindJSON:
		return []byte(`{}`)
	}
	return nil
}
