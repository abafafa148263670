package bot

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"changebot/demo"
	"changebot/flows"
	"changebot/flows/rules"
	"changebot/store"
	"changebot/store/postgres/pgtest"
)

// BenchmarkWaitingChangesMemory measures what changes in flight cost the
// process (DESIGN §9: rows, not memory; 10,000 waiting changes under
// 100 MB). It puts 10,000 changes in APPROVAL_SENT (waiting for a decision)
// and runs a replica over them for a few seconds, then reports the live heap
// after a GC and the Go runtime's total memory from the OS.
func BenchmarkWaitingChangesMemory(b *testing.B) {
	const n = 10000
	env, err := demo.NewEnv(pgtest.URL(), false, time.Second, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer env.Close()
	sc := pgtest.New(b)
	env.Config.DatabaseURL = pgtest.URL()
	app, err := NewApp(context.Background(), env.Config, &AppOpts{Schema: sc.Name, Poll: demo.Poll})
	if err != nil {
		b.Fatal(err)
	}
	defer app.Close()
	ctx := context.Background()
	for i := range n {
		op, _, err := app.Engine().Submit(ctx, flows.SubmitParams{SubjectID: fmt.Sprintf("svc-%d", i), TargetKey: "prod",
			Project: demo.Project, Title: "t", RequestedBy: demo.Requester, ApprovalFirst: true,
			Files: []store.File{{Path: "a.yaml", Content: "a: 1"}}})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := app.Engine().Transition(ctx, op, rules.ApprovalSent, flows.TransitionOpts{Source: "bench"}); err != nil {
			b.Fatal(err)
		}
	}
	// Their request_approval jobs are stale now (the changes moved on): the
	// replica drains them without calling anyone, then idles over 10,000
	// waiting rows.
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- app.Run(runCtx, env.Listener) }()
	b.ResetTimer()
	for range b.N {
		time.Sleep(5 * time.Second) // the measured window of idling, not a wait for a state
	}
	b.StopTimer()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "heap-MB")
	b.ReportMetric(float64(ms.Sys)/(1<<20), "sys-MB")
	b.ReportMetric(float64(runtime.NumGoroutine()), "goroutines")
	stop()
	<-done
}
