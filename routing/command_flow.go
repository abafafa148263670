package routing

import (
	"context"
	"errors"
	"fmt"
	"time"

	"changebot/commands"
	"changebot/flows"
	"changebot/flows/rules"
	"changebot/platform"
	"changebot/store"
)

// Engine is what the command adapter needs from the flow (implemented by
// *flows.Engine).
type Engine interface {
	FindByMR(ctx context.Context, projectID, iid int64) (store.Operation, error)
	Act(ctx context.Context, id string, a rules.Action, p rules.ActionParams) (store.Operation, error)
	Refuse(ctx context.Context, op store.Operation, p rules.ActionParams, reason string) error
	RefreshNow(ctx context.Context, op store.Operation) error
	Reply(ctx context.Context, projectID, iid int64, body string) error
	IsApprover(ctx context.Context, op store.Operation, user platform.User) (bool, error)
	DecideInGitLab(ctx context.Context, op store.Operation, user platform.User, decision, source string) error
	ApprovalProvider(project string) string
	TicketURL(ctx context.Context, op store.Operation) (string, error)
	FreezeQueue(ctx context.Context, projectID int64, branch string, frozen bool, actor, reason string) (store.Queue, error)
}

// OperationReader reads one operation (implemented by *postgres.Store).
type OperationReader interface {
	DB() store.DBTX
	GetOperation(ctx context.Context, db store.DBTX, id string) (store.Operation, error)
}

// CommandFlow implements commands.Flow over the flow engine: it turns
// operation ids back into stored operations and operations into
// commands.Change.
type CommandFlow struct {
	e  Engine
	st OperationReader
}

var _ commands.Flow = (*CommandFlow)(nil)

// NewCommandFlow returns the commands' view of engine e; st reads the
// operations the commands name by id.
func NewCommandFlow(e Engine, st OperationReader) *CommandFlow { return &CommandFlow{e: e, st: st} }

// ChangeOf is the command layer's view of op.
func ChangeOf(op store.Operation) commands.Change {
	return commands.Change{
		OperationID: op.ID, RequestedBy: op.RequestedBy, TargetBranch: op.TargetBranch, Status: op.Status,
		Step: rules.MustStep(rules.StepCode(op.Step)), MRIID: op.MRIID,
		AwaitsGitLabApproval: rules.AwaitsPlatformApproval(op.TicketID, op.Status),
		Platform:             store.PlatformOr(op.Platform),
	}
}

func (f *CommandFlow) get(ctx context.Context, id string) (store.Operation, error) {
	op, err := f.st.GetOperation(ctx, f.st.DB(), id)
	if err != nil {
		return store.Operation{}, fmt.Errorf("reading the change: %w", err)
	}
	return op, nil
}

// FindByMR implements commands.Flow. The change says whether its approvals
// come from the external approval system, with the ticket and its page when
// known (so that /approve can point there).
func (f *CommandFlow) FindByMR(ctx context.Context, projectID, iid int64) (commands.Change, bool, error) {
	op, err := f.e.FindByMR(ctx, projectID, iid)
	if errors.Is(err, store.ErrNotFound) {
		return commands.Change{}, false, nil
	}
	if err != nil {
		return commands.Change{}, false, err
	}
	c := ChangeOf(op)
	if op.TicketID != rules.GitLabTicket && f.e.ApprovalProvider(op.Project) != rules.ProviderGitLab {
		c.ApprovalSystem, c.TicketID = true, op.TicketID
		if c.TicketURL, err = f.e.TicketURL(ctx, op); err != nil {
			return commands.Change{}, false, err
		}
	}
	return c, true, nil
}

// Act implements commands.Flow.
func (f *CommandFlow) Act(ctx context.Context, id string, a rules.Action, p rules.ActionParams) error {
	_, err := f.e.Act(ctx, id, a, p)
	return err
}

// Refuse implements commands.Flow.
func (f *CommandFlow) Refuse(ctx context.Context, id string, p rules.ActionParams, reason string) error {
	op, err := f.get(ctx, id)
	if err != nil {
		return err
	}
	return f.e.Refuse(ctx, op, p, reason)
}

// RefreshNow implements commands.Flow.
func (f *CommandFlow) RefreshNow(ctx context.Context, id string) error {
	op, err := f.get(ctx, id)
	if err != nil {
		return err
	}
	return f.e.RefreshNow(ctx, op)
}

// Reply implements commands.Flow.
func (f *CommandFlow) Reply(ctx context.Context, projectID, iid int64, body string) error {
	return f.e.Reply(ctx, projectID, iid, body)
}

// IsApprover implements commands.Flow.
func (f *CommandFlow) IsApprover(ctx context.Context, id string, user platform.User) (bool, error) {
	op, err := f.get(ctx, id)
	if err != nil {
		return false, err
	}
	return f.e.IsApprover(ctx, op, user)
}

// DecideInGitLab implements commands.Flow.
func (f *CommandFlow) DecideInGitLab(ctx context.Context, id string, user platform.User, decision, source string) error {
	op, err := f.get(ctx, id)
	if err != nil {
		return err
	}
	return f.e.DecideInGitLab(ctx, op, user, decision, source)
}

// FreezeQueue implements commands.Flow: the merge queue of the change's
// project and target branch (Engine.FreezeQueue, on the engine's
// platform).
func (f *CommandFlow) FreezeQueue(ctx context.Context, id string, frozen bool, actor, reason string) (commands.QueueState, error) {
	op, err := f.get(ctx, id)
	if err != nil {
		return commands.QueueState{}, err
	}
	q, err := f.e.FreezeQueue(ctx, op.ProjectID, op.TargetBranch, frozen, actor, reason)
	var nq *flows.NoQueueError
	if errors.As(err, &nq) {
		// A branch whose changes merge in parallel: the command is
		// answered with the reason, as any command that does not apply.
		return commands.QueueState{}, &rules.NotApplicableError{Reason: nq.Reason}
	}
	if err != nil {
		return commands.QueueState{}, err
	}
	return commands.QueueState{Branch: op.TargetBranch, Frozen: q.Frozen(), FrozenBy: q.FrozenBy, FrozenReason: q.FrozenReason}, nil
}

// NoteRecorder is what NoteStore needs from the store (implemented by
// *postgres.Store).
type NoteRecorder interface {
	DB() store.DBTX
	ClaimNote(ctx context.Context, db store.DBTX, platform string, projectID, noteID, iid int64, author string) (bool, error)
	SetNoteOutcome(ctx context.Context, db store.DBTX, platform string, projectID, noteID int64, outcome string) error
	NoteActivity(ctx context.Context, db store.DBTX, author string, since time.Time) (notes, limited int, err error)
	InsertCallbackRequest(ctx context.Context, db store.DBTX, requestID, kind, operationID, result string) error
}

// NoteStore implements commands.NoteStore over the store's pool, for the
// comments of one platform (a comment id is unique only within one).
type NoteStore struct {
	st       NoteRecorder
	platform string
}

var _ commands.NoteStore = NoteStore{}

// NewNoteStore returns the commands' note store over st for GitLab's
// notes; On names another platform.
func NewNoteStore(st NoteRecorder) NoteStore {
	return NoteStore{st: st, platform: store.PlatformGitLab}
}

// On returns the note store for the comments of platform
// (store.PlatformGitLab or store.PlatformGitHub).
func (n NoteStore) On(platform string) NoteStore {
	n.platform = store.PlatformOr(platform)
	return n
}

// ClaimNote implements commands.NoteStore.
func (n NoteStore) ClaimNote(ctx context.Context, projectID, noteID, iid int64, author string) (bool, error) {
	return n.st.ClaimNote(ctx, n.st.DB(), n.platform, projectID, noteID, iid, author)
}

// SetNoteOutcome implements commands.NoteStore.
func (n NoteStore) SetNoteOutcome(ctx context.Context, projectID, noteID int64, outcome string) error {
	return n.st.SetNoteOutcome(ctx, n.st.DB(), n.platform, projectID, noteID, outcome)
}

// NoteActivity implements commands.NoteStore.
func (n NoteStore) NoteActivity(ctx context.Context, author string, since time.Time) (int, int, error) {
	return n.st.NoteActivity(ctx, n.st.DB(), author, since)
}

// ClaimOnce implements commands.NoteStore with a one-off row of
// callback_requests (kind rate_limit).
func (n NoteStore) ClaimOnce(ctx context.Context, key string) (bool, error) {
	err := n.st.InsertCallbackRequest(ctx, n.st.DB(), key, "rate_limit", "", commands.OutcomeRateLimited)
	if errors.Is(err, store.ErrDuplicate) {
		return false, nil
	}
	return err == nil, err
}
