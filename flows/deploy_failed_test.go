package flows_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"changebot/flows"
	"changebot/flows/flowtest"
	"changebot/flows/rules"
	"changebot/store"
)

// TestConcurrentFailedDeployCallbacksWriteOneEvent: a deploy system that
// sends its "failed" twice at once (a retry racing the first send) gets one
// FAILED_RECORDED and DUPLICATEs, and the change one deploy_failed event:
// the callback request is recorded in the event's transaction.
func TestConcurrentFailedDeployCallbacksWriteOneEvent(t *testing.T) {
	t.Parallel()
	h := flowtest.New(t, nil)
	op := h.ToMerged(t, flowtest.Change("svc"))
	cb := rules.DeployCallback{RequestID: "d1", ProjectID: op.ProjectID, MRIID: op.MRIID, MergeCommitSHA: op.MergeCommitSHA, Status: "failed"}
	const senders = 6
	results := make([]string, senders)
	errs := make([]error, senders)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = h.Engine.AcceptDeploy(context.Background(), cb)
		}()
	}
	close(start)
	wg.Wait()
	recorded := 0
	for i := range senders {
		switch {
		case errs[i] != nil:
			// A sender answered 503 sends again; it must then be a duplicate.
			res, err := h.Engine.AcceptDeploy(context.Background(), cb)
			if err != nil || res != rules.ResultDuplicate {
				t.Errorf("sender %d failed (%v), and sending again answered %q, %v; want DUPLICATE", i, errs[i], res, err)
			}
		case results[i] == rules.ResultFailedRecorded:
			recorded++
		case results[i] != rules.ResultDuplicate:
			t.Errorf("sender %d answered %q, want FAILED_RECORDED or DUPLICATE", i, results[i])
		}
	}
	if recorded != 1 {
		t.Errorf("%d senders were answered FAILED_RECORDED, want 1 (%v)", recorded, results)
	}
	n := 0
	for _, ev := range h.Events(t, op.ID) {
		if ev.Type == store.EventDeployFailed {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d deploy_failed events, want 1", n)
	}
	if res, err := h.Engine.AcceptDeploy(context.Background(), cb); err != nil || res != rules.ResultDuplicate {
		t.Errorf("the callback sent again: %q, %v; want DUPLICATE", res, err)
	}
}

// conflictingStore answers every deploy_failed write with a version
// conflict, as if the change moved between every read and write.
type conflictingStore struct{ flows.Store }

func (s conflictingStore) ApplyTransition(ctx context.Context, p store.TransitionParams) (store.Operation, store.Event, error) {
	if p.Event.Type == store.EventDeployFailed {
		return store.Operation{}, store.Event{}, store.ErrVersionConflict
	}
	return s.Store.ApplyTransition(ctx, p)
}

// TestFailedDeployNotRecordedIsAnError: a "failed" deploy callback whose
// write lost every attempt to a moving change is an error (the handler
// answers 503 and the sender sends again), not FAILED_RECORDED with nothing
// written, and the request is not recorded, so the next send is applied.
func TestFailedDeployNotRecordedIsAnError(t *testing.T) {
	t.Parallel()
	h := flowtest.New(t, &flowtest.Opts{Configure: func(cfg *flows.EngineConfig) { cfg.Store = conflictingStore{cfg.Store} }})
	op := h.ToMerged(t, flowtest.Change("svc"))
	cb := rules.DeployCallback{RequestID: "d1", ProjectID: op.ProjectID, MRIID: op.MRIID, MergeCommitSHA: op.MergeCommitSHA, Status: "failed"}
	res, err := h.Engine.AcceptDeploy(context.Background(), cb)
	if err == nil {
		t.Fatalf("AcceptDeploy answered %q with nothing written, want an error", res)
	}
	if _, err := h.Store.CallbackResult(context.Background(), h.Store.DB(), "deploy", "d1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the unrecorded callback's request: %v, want not recorded", err)
	}
	for _, ev := range h.Events(t, op.ID) {
		if ev.Type == store.EventDeployFailed {
			t.Errorf("a deploy_failed event was written: %+v", ev)
		}
	}
}
