package flows

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"

	"changebot/flows/rules"
	"changebot/platform"
	"changebot/store"
)

// cleanUpIfCancelled runs when the create job of operation id could not
// record the merge request mr it opened from branch source because someone
// moved the change first. When the change is now CLOSED (a /cancel landed
// while the job ran, before the change knew its merge request, so the
// cancel closed nothing), what the job opened belongs to no change: the
// merge request is closed, the branch deleted, and a cleanup event records
// it (issue 9 defect 6: whatever a cancelled change opened is closed). Any
// other move is left alone (the job that moved it owns the change). Errors
// are GitLab's or the store's; the job is retried and cleans up again
// (closing a closed merge request and deleting a missing branch are no-ops).
func (e *Engine) cleanUpIfCancelled(ctx context.Context, id string, projectID int64, source string, mr platform.MergeRequest) error {
	cur, err := e.st.GetOperation(ctx, e.st.DB(), id)
	if err != nil {
		return fmt.Errorf("reading the change after a lost move: %w", err)
	}
	if rules.StepCode(cur.Step) != rules.Closed {
		return nil
	}
	done := map[string]any{"source_branch": source}
	if mr.IID > 0 && mr.State != platform.MRStateClosed && mr.State != platform.MRStateMerged {
		if _, err := e.gl.CloseMergeRequest(ctx, projectID, mr.IID); err != nil && !errors.Is(err, platform.ErrNotFound) {
			return fmt.Errorf("closing !%d of cancelled change %s: %w", mr.IID, id, err)
		}
		done["closed_mr_iid"] = mr.IID
	}
	switch err := e.gl.DeleteBranch(ctx, projectID, source); {
	case err == nil:
		done["deleted_branch"] = true
	case !errors.Is(err, platform.ErrNotFound):
		return fmt.Errorf("deleting branch %s of cancelled change %s: %w", source, id, err)
	}
	if _, err := e.st.AppendEvent(ctx, id, store.EventParams{Type: store.EventCleanup, Actor: ActorBot,
		Source: "job:" + rules.KindCreateMR, Payload: done}); err != nil {
		return fmt.Errorf("recording the cleanup of cancelled change %s: %w", id, err)
	}
	e.opLog(cur).Info("cancelled during create: closed what the create job opened", "closed_mr_iid", mr.IID, "source_branch", source)
	return nil
}

// closeUnrecorded closes what the create job of op may have opened in
// GitLab without recording it on the change: the open merge request of its
// source branch and the branch itself. It returns what it did, for the
// CLOSED event's payload. A project that does not exist (any more) has
// nothing to close.
func (e *Engine) closeUnrecorded(ctx context.Context, op store.Operation) (map[string]any, error) {
	done := map[string]any{}
	proj, err := e.gl.Project(ctx, op.Project)
	if errors.Is(err, platform.ErrNotFound) || errors.Is(err, platform.ErrForbidden) {
		return done, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading project %q to close what %s opened: %w", op.Project, op.ID, err)
	}
	source := e.prefix + op.ID
	mr, err := e.gl.FindOpenMergeRequest(ctx, proj.ID, source)
	switch {
	case err == nil:
		if _, err := e.gl.CloseMergeRequest(ctx, proj.ID, mr.IID); err != nil && !errors.Is(err, platform.ErrNotFound) {
			return nil, fmt.Errorf("closing !%d of %s: %w", mr.IID, op.ID, err)
		}
		done["closed_mr_iid"] = mr.IID
	case !errors.Is(err, platform.ErrNotFound):
		return nil, fmt.Errorf("looking for the merge request of %s: %w", op.ID, err)
	}
	switch err := e.gl.DeleteBranch(ctx, proj.ID, source); {
	case err == nil:
		done["deleted_branch"] = source
	case !errors.Is(err, platform.ErrNotFound):
		return nil, fmt.Errorf("deleting branch %s of %s: %w", source, op.ID, err)
	}
	return done, nil
}

// cancelCleanupDelay is how long after a cancel in the create phase its
// cleanup job runs: longer than any attempt of the create job may still
// run (bot bounds a job to a minute), so whatever such an attempt opened
// exists by then.
const cancelCleanupDelay = 2 * time.Minute

// cancelCleanupJob is the job that closes, after cancelCleanupDelay, what
// the create job of op (being cancelled now) opened unrecorded.
func (e *Engine) cancelCleanupJob(op store.Operation) river.InsertManyParams {
	return river.InsertManyParams{Args: CloseMRArgs{OperationID: op.ID, Step: int(rules.Closed), Version: op.Version + 1},
		InsertOpts: &river.InsertOpts{ScheduledAt: e.now().Add(cancelCleanupDelay), UniqueOpts: *uniqueActive, MaxAttempts: MaxAttempts}}
}

type cancelCleanupWorker struct {
	river.WorkerDefaults[CloseMRArgs]
	e *Engine
}

// Work implements river.Worker: for a change still CLOSED without a
// recorded merge request, close the open merge request of its source
// branch and delete the branch, recording a cleanup event when it found
// something. Idempotent: a second run finds nothing.
func (w *cancelCleanupWorker) Work(ctx context.Context, job *river.Job[CloseMRArgs]) error {
	e := w.e
	op, err := e.st.GetOperation(ctx, e.st.DB(), job.Args.OperationID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading cancelled change %s: %w", job.Args.OperationID, err)
	}
	if rules.StepCode(op.Step) != rules.Closed || op.MRIID > 0 {
		return nil
	}
	done, err := e.closeUnrecorded(ctx, op)
	if err != nil {
		return err
	}
	if len(done) == 0 {
		return nil
	}
	if _, err := e.st.AppendEvent(ctx, op.ID, store.EventParams{Type: store.EventCleanup, Actor: ActorBot,
		Source: "job:" + rules.KindCloseMR, Payload: done}); err != nil {
		return fmt.Errorf("recording the cleanup of cancelled change %s: %w", op.ID, err)
	}
	e.opLog(op).Info("closed what a cancelled change's create job opened", "cleanup", fmt.Sprint(done))
	return nil
}
