package flows

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"runtime/debug"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"changebot/platform"
	"changebot/store"
	"changebot/templates"
)

// StatusView builds the status comment's view of op from its events and the
// step catalogue; commands lists what may be run now (from the command
// registry, wired by bot).
func (e *Engine) StatusView(op store.Operation, events []store.Event) templates.StatusView {
	st := MustStep(StepCode(op.Step))
	v := templates.StatusView{
		OperationID: op.ID, Title: op.Title, SubjectID: op.SubjectID, TargetKey: op.TargetKey,
		RequestedBy: op.RequestedBy, Status: op.Status, StepCode: op.Step, StepName: st.Name,
		Hint: st.Hint, Terminal: st.Terminal, Detail: op.Detail,
		Failed:      op.Status == store.StatusCreateFailed || op.Status == store.StatusHandleFailed || op.Status == store.StatusRejected,
		MR:          templates.MRView{IID: op.MRIID, WebURL: op.MRWebURL},
		PipelineURL: op.PipelineURL, TicketID: op.TicketID,
	}
	for _, ev := range events {
		v.Seq = ev.Seq
		if ev.Type == store.EventAttempt {
			continue // retried calls are history, not steps
		}
		v.Timeline = append(v.Timeline, templates.TimelineEntry{At: ev.OccurredAt,
			StepName: StepCode(ev.ToStep).String(), Status: ev.ToStatus, Actor: ev.Actor, Source: ev.Source})
		v.Seq = ev.Seq
	}
	if e.cfg.CommandsFunc != nil {
		v.Commands = e.cfg.CommandsFunc(op, st)
	}
	return v
}

type noteWorker struct {
	river.WorkerDefaults[RefreshNoteArgs]
	e *Engine
}

// Work implements river.Worker.
func (w *noteWorker) Work(ctx context.Context, job *river.Job[RefreshNoteArgs]) (err error) {
	defer func() {
		if r := recover(); r != nil {
			w.e.m.panics.WithLabelValues(KindRefreshNote).Inc()
			w.e.log.Error("status note refresh panicked", attrOperationID, job.Args.OperationID, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			err = fmt.Errorf("refreshing status note: panic: %v", r)
		}
	}()
	return w.e.RefreshNote(ctx, job.Args.OperationID)
}

// RefreshNote renders op's status comment and writes it to its MR: edits
// the note it recorded, finds it by the hidden marker if the record is
// missing, recreates it if someone deleted it, never creates a second one.
// Renders of one MR are serialised with a transaction-scoped advisory lock,
// and a render never replaces a newer one (rendered_seq). When events
// arrive while it renders, it renders again (bounded), so coalescing never
// leaves an older state visible.
func (e *Engine) RefreshNote(ctx context.Context, opID string) error {
	return e.refreshNote(ctx, opID, false)
}

// refreshNote renders; force re-renders even when the recorded note already
// shows the newest event (/status), which also recreates a deleted note.
func (e *Engine) refreshNote(ctx context.Context, opID string, force bool) error {
	for range 3 {
		again, err := e.refreshNoteOnce(ctx, opID, force)
		force = false
		if err != nil || !again {
			return err
		}
	}
	return nil
}

func (e *Engine) refreshNoteOnce(ctx context.Context, opID string, force bool) (again bool, err error) {
	op, events, err := e.Get(ctx, opID)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return false, nil
		}
		return false, err
	}
	if op.MRIID == 0 {
		return false, nil
	}
	err = e.st.InTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, noteLockKey(op.ProjectID, op.MRIID)); err != nil {
			return fmt.Errorf("locking status note: %w", err)
		}
		// Re-read under the lock: another render may have happened.
		events, err = e.st.ListEvents(ctx, tx, opID)
		if err != nil {
			return err
		}
		op, err = e.st.GetOperation(ctx, tx, opID)
		if err != nil {
			return err
		}
		view := e.StatusView(op, events)
		rec, err := e.st.GetStatusNote(ctx, tx, op.ProjectID, op.MRIID)
		if err == nil && !force && rec.OperationID == op.ID && rec.RenderedSeq >= view.Seq {
			return nil // already shows this state or a newer one
		}
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		body, err := e.cfg.Renderer.Status(view)
		if err != nil {
			return fmt.Errorf("rendering status comment: %w", err)
		}
		noteID, err := e.writeNote(ctx, op, rec, body)
		if err != nil {
			return err
		}
		_, err = e.st.SaveStatusNote(ctx, tx, store.StatusNote{ProjectID: op.ProjectID, MRIID: op.MRIID,
			NoteID: noteID, OperationID: op.ID, RenderedSeq: view.Seq})
		return err
	})
	if err != nil {
		return false, fmt.Errorf("refreshing status note of %s: %w", opID, err)
	}
	latest, err := e.st.ListEvents(ctx, e.st.Pool(), opID)
	if err != nil {
		return false, err
	}
	return len(latest) > len(events), nil
}

// writeNote edits the recorded note, or finds ours by marker, or creates one.
func (e *Engine) writeNote(ctx context.Context, op store.Operation, rec store.StatusNote, body string) (int64, error) {
	if rec.NoteID != 0 {
		n, err := e.gl.UpdateNote(ctx, op.ProjectID, op.MRIID, rec.NoteID, body)
		if err == nil {
			return n.ID, nil
		}
		if !errors.Is(err, platform.ErrNotFound) {
			return 0, err
		}
		// Deleted by someone: recreate below.
	} else {
		n, err := e.gl.FindNote(ctx, op.ProjectID, op.MRIID, templates.Marker(op.ID))
		if err == nil {
			if _, err := e.gl.UpdateNote(ctx, op.ProjectID, op.MRIID, n.ID, body); err != nil {
				return 0, err
			}
			return n.ID, nil
		}
		if !errors.Is(err, platform.ErrNotFound) {
			return 0, err
		}
	}
	n, err := e.gl.CreateNote(ctx, op.ProjectID, op.MRIID, body)
	if err != nil {
		return 0, err
	}
	return n.ID, nil
}

func noteLockKey(projectID, iid int64) int64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "status_note:%d:%d", projectID, iid)
	return int64(h.Sum64())
}
