// Package backend implements api's interfaces over the flow engine, the
// store and the settings cache, translating their types and errors into
// api's: bot mounts api with it, and changebot list, history and settings
// print the API's JSON through it, so that both say the same. It holds no
// HTTP and no rules of its own: what a change is and may do is flows',
// what the API answers is api's.
package backend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"changebot/api"
	"changebot/flows"
	"changebot/flows/rules"
	"changebot/settings"
	"changebot/store"
	"changebot/templates"
)

// FlowEngine is what the backend asks the flow engine (*flows.Engine).
type FlowEngine interface {
	Platform() string
	Submit(ctx context.Context, p flows.SubmitParams) (store.Operation, bool, error)
	Act(ctx context.Context, id string, a rules.Action, p rules.ActionParams) (store.Operation, error)
	Get(ctx context.Context, id string) (store.Operation, []store.Event, error)
	StatusView(op store.Operation, events []store.Event) templates.StatusView
}

// SettingsReader reads a setting in effect (*settings.Cache).
type SettingsReader interface {
	Get(key, project string) settings.Value
}

// Engine is api.Engine over the flow engine; a submission reads
// flow.approval_first and admission.max_active from Settings.
type Engine struct {
	Flows    FlowEngine
	Settings SettingsReader
}

var _ api.Engine = Engine{}

// Platform implements api.Engine.
func (e Engine) Platform() string { return e.Flows.Platform() }

// params is s as the engine takes it, on the engine's platform.
func (e Engine) params(s api.Submission) flows.SubmitParams {
	p := flows.SubmitParams{SubjectID: s.SubjectID, TargetKey: s.TargetKey, Project: s.Project, TargetBranch: s.TargetBranch,
		Title: s.Title, Description: s.Description, RequestedBy: s.RequestedBy, IdempotencyKey: s.IdempotencyKey,
		SubmittedBy: s.SubmittedBy, Platform: e.Flows.Platform(), RolloutID: s.RolloutID}
	for _, f := range s.Files {
		p.Files = append(p.Files, store.File{Path: f.Path, Content: f.Content, Action: f.Action})
	}
	return p
}

// Check implements api.Engine with flows.SubmitParams.Validate.
func (e Engine) Check(s api.Submission) []api.FieldError {
	if ve, ok := flows.IsValidation(e.params(s).Validate()); ok {
		return fieldsOf(ve.Fields)
	}
	return nil
}

// Submit implements api.Engine.
func (e Engine) Submit(ctx context.Context, s api.Submission) (api.Change, bool, error) {
	p := e.params(s)
	// Read for the project's path as the platform answers it (the engine
	// resolves the submitter's spelling first), not for what was typed.
	p.ApprovalFirstFunc = func(project string) bool { return e.Settings.Get(settings.FlowApprovalFirst, project).Bool() }
	p.MaxActive = e.Settings.Get(settings.AdmissionMaxActive, "").Int()
	op, created, err := e.Flows.Submit(ctx, p)
	if err != nil {
		return api.Change{}, false, Error(err)
	}
	c := ChangeOf(op)
	c.SubmittedBy = s.SubmittedBy
	return c, created, nil
}

// Act implements api.Engine.
func (e Engine) Act(ctx context.Context, id string, a rules.Action, p rules.ActionParams) (api.Change, error) {
	op, err := e.Flows.Act(ctx, id, a, p)
	if err != nil {
		return api.Change{}, Error(err)
	}
	return ChangeOf(op), nil
}

// Get implements api.Engine.
func (e Engine) Get(ctx context.Context, id string) (api.Change, []api.Event, error) {
	op, events, err := e.Flows.Get(ctx, id)
	if err != nil {
		return api.Change{}, nil, Error(err)
	}
	c := ChangeOf(op)
	c.SubmittedBy = submittedBy(events)
	return c, EventsOf(events, ""), nil
}

// Page implements api.Engine.
func (e Engine) Page(ctx context.Context, id string) (api.Change, []api.Event, templates.StatusView, error) {
	op, events, err := e.Flows.Get(ctx, id)
	if err != nil {
		return api.Change{}, nil, templates.StatusView{}, Error(err)
	}
	c := ChangeOf(op)
	c.SubmittedBy = submittedBy(events)
	return c, EventsOf(events, store.PlatformOr(op.Platform)), e.Flows.StatusView(op, events), nil
}

// Replay implements api.Engine with flows.Replay.
func (e Engine) Replay(events []api.Event, at time.Time) api.Replayed {
	rs := flows.Replay(storeEvents(events), at)
	return api.Replayed{Seq: rs.Seq, Step: int(rs.Step), Status: rs.Status}
}

// submittedBy is the id of the API token that submitted the change whose
// events these are (its submitted event's submitted_by), "" when none did
// (or its payload, which the engine writes, is not an object: then only
// an operator may cancel it).
func submittedBy(events []store.Event) string {
	for _, ev := range events {
		if ev.Type == store.EventSubmitted {
			var p struct {
				SubmittedBy string `json:"submitted_by"`
			}
			_ = json.Unmarshal(ev.Payload, &p)
			return p.SubmittedBy
		}
	}
	return ""
}

// ChangeReader is what Store reads and writes (the store): the changes,
// and the one-off claims (callback_requests) the logged-out web sessions
// are kept in.
type ChangeReader interface {
	DB() store.DBTX
	ListChanges(ctx context.Context, db store.DBTX, p store.ListParams) ([]store.Operation, error)
	CountByStatusWithAge(ctx context.Context, db store.DBTX, statuses []string) ([]store.StatusAge, error)
	ReadOverview(ctx context.Context, db store.DBTX, statuses []string, discardedSince time.Time) (store.Overview, error)
	ReadHistory(ctx context.Context, id string) (store.History, error)
	InsertCallbackRequest(ctx context.Context, db store.DBTX, requestID, kind, operationID, result string) error
	CallbackResult(ctx context.Context, db store.DBTX, kind, requestID string) (string, error)
}

// Store is api.Store over the store; stuck=true reads the step deadlines
// from Settings (global values).
type Store struct {
	Store    ChangeReader
	Settings SettingsReader
	// BudgetLeft, when set, is the call budget's calls left per account
	// (budget.Budget.Left), for the overview.
	BudgetLeft func() map[string]float64
}

// ReadOverview implements api.Store: every status's count, the active
// changes by project, the last stored webhook delivery and the jobs
// retrying, or discarded in the hour before now; the budget left.
func (s Store) ReadOverview(ctx context.Context, now time.Time) (api.Overview, error) {
	var o api.Overview
	counts, err := s.Store.CountByStatusWithAge(ctx, s.Store.DB(), rules.Statuses())
	if err != nil {
		return o, Error(err)
	}
	for _, c := range counts {
		o.ByStatus = append(o.ByStatus, api.StatusCount{Status: c.Status, Count: c.Count})
	}
	ov, err := s.Store.ReadOverview(ctx, s.Store.DB(), store.ActiveStatuses(), now.Add(-time.Hour))
	if err != nil {
		return o, Error(err)
	}
	for _, c := range ov.ByProject {
		o.ByProject = append(o.ByProject, api.ProjectCount{Project: c.Project, Status: c.Status, Count: c.Count})
	}
	o.LastDeliveryAt, o.RetryingJobs, o.DiscardedJobs = ov.LastDeliveryAt, ov.RetryingJobs, ov.DiscardedJobs
	if s.BudgetLeft != nil {
		o.BudgetLeft = s.BudgetLeft()
	}
	return o, nil
}

var _ api.Store = Store{}

// ListChanges implements api.Store; p.StuckAt becomes each step's
// threshold at that moment (flows.StuckBounds).
func (s Store) ListChanges(ctx context.Context, p api.ListParams) ([]api.Change, error) {
	sp := store.ListParams{Statuses: p.Statuses, Steps: p.Steps, Project: p.Project, SubjectID: p.SubjectID, TargetKey: p.TargetKey,
		RequestedBy: p.RequestedBy, RolloutID: p.RolloutID, UpdatedAfter: p.UpdatedAfter, UpdatedBefore: p.UpdatedBefore, Before: p.Before, Limit: p.Limit}
	if !p.StuckAt.IsZero() {
		get := func(key string) time.Duration { return s.Settings.Get(key, "").Duration() }
		sp.StuckOnly, sp.Stuck = true, flows.StuckBounds(p.StuckAt, flows.StuckLimits{
			PipelineDeadline: get(settings.PipelineDeadline), RebaseDeadline: get(settings.RebaseDeadline),
			DeployDeadline: get(settings.DeployDeadline), SweeperAfter: get(settings.SweeperAfter)})
	}
	ops, err := s.Store.ListChanges(ctx, s.Store.DB(), sp)
	if err != nil {
		return nil, Error(err)
	}
	out := make([]api.Change, 0, len(ops))
	for _, op := range ops {
		out = append(out, ChangeOf(op))
	}
	return out, nil
}

// sessionRevoked is the result column of a logged-out web session's row.
const sessionRevoked = "REVOKED"

// RevokeSession implements api.Sessions: a callback_requests row of kind
// api.SessionRevokedKind whose request_id is the nonce and operation_id
// the token's id, kept as long as the other intake claims
// (retention.MinMaxAge at least, longer than api.MaxSessionTTL); every
// replica reads the same table.
func (s Store) RevokeSession(ctx context.Context, nonce, tokenID string) error {
	err := s.Store.InsertCallbackRequest(ctx, s.Store.DB(), nonce, api.SessionRevokedKind, tokenID, sessionRevoked)
	if err != nil && !errors.Is(err, store.ErrDuplicate) {
		return fmt.Errorf("recording a logged-out web session: %w", err)
	}
	return nil
}

// SessionRevoked implements api.Sessions.
func (s Store) SessionRevoked(ctx context.Context, nonce string) (bool, error) {
	_, err := s.Store.CallbackResult(ctx, s.Store.DB(), api.SessionRevokedKind, nonce)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading whether a web session was logged out: %w", err)
	}
	return true, nil
}

// ReadHistory implements api.Store.
func (s Store) ReadHistory(ctx context.Context, id string) (api.History, error) {
	h, err := s.Store.ReadHistory(ctx, id)
	if err != nil {
		return api.History{}, Error(err)
	}
	return HistoryOf(h), nil
}

// QueueEngine is what Queues asks the flow engine (*flows.Engine) of the
// merge queues.
type QueueEngine interface {
	Queue(ctx context.Context, projectID int64, branch string) (flows.Queue, error)
	Queues(ctx context.Context) ([]store.QueueSummary, error)
	FreezeQueue(ctx context.Context, projectID int64, branch string, frozen bool, actor, reason string) (store.Queue, error)
	MoveToQueueFront(ctx context.Context, op store.Operation, actor, reason string) error
}

// OperationReader reads one operation (the store).
type OperationReader interface {
	DB() store.DBTX
	GetOperation(ctx context.Context, db store.DBTX, id string) (store.Operation, error)
}

// Queues is api.Queues over the flow engine; Store reads the changes a
// queue names (its head's merge request, the project's path).
type Queues struct {
	Flows QueueEngine
	Store OperationReader
}

var _ api.Queues = Queues{}

// ListQueues implements api.Queues. A queue's project path is its head's;
// for a project none of whose queues has a head, the first waiting
// change's of one of them; else "" (a queue frozen before anyone used it).
func (q Queues) ListQueues(ctx context.Context) ([]api.Queue, error) {
	sums, err := q.Flows.Queues(ctx)
	if err != nil {
		return nil, Error(err)
	}
	out := make([]api.Queue, 0, len(sums))
	paths := map[int64]string{}
	for _, s := range sums {
		aq := QueueOf(s.Queue, nil)
		aq.WaitingCount = s.WaitingCount
		if s.HeadOperationID != "" {
			if op, err := q.Store.GetOperation(ctx, q.Store.DB(), s.HeadOperationID); err == nil {
				aq.Head = headOf(s.Queue, &op)
				paths[s.Key.ProjectID] = op.Project
			} else if !errors.Is(err, store.ErrNotFound) {
				return nil, Error(err)
			}
		}
		out = append(out, aq)
	}
	for _, s := range sums {
		if _, known := paths[s.Key.ProjectID]; known || s.WaitingCount == 0 {
			continue
		}
		full, err := q.Flows.Queue(ctx, s.Key.ProjectID, s.Key.TargetBranch)
		if err != nil {
			return nil, Error(err)
		}
		if path := q.projectOf(ctx, QueueOf(full.Queue, full.Head)); path != "" {
			paths[s.Key.ProjectID] = path
		}
	}
	for i := range out {
		out[i].Project = paths[out[i].ProjectID]
	}
	return out, nil
}

// projectOf is the project path of aq's head or first waiting change, ""
// when neither can be read.
func (q Queues) projectOf(ctx context.Context, aq api.Queue) string {
	if aq.Project != "" {
		return aq.Project
	}
	if len(aq.Waiting) == 0 {
		return ""
	}
	op, err := q.Store.GetOperation(ctx, q.Store.DB(), aq.Waiting[0].OperationID)
	if err != nil {
		return ""
	}
	return op.Project
}

// Queue implements api.Queues.
func (q Queues) Queue(ctx context.Context, projectID int64, branch string) (api.Queue, error) {
	full, err := q.Flows.Queue(ctx, projectID, branch)
	if err != nil {
		return api.Queue{}, Error(err)
	}
	aq := QueueOf(full.Queue, full.Head)
	aq.Project = q.projectOf(ctx, aq)
	return aq, nil
}

// FreezeQueue implements api.Queues: the freeze, then the queue read
// again with its waiting changes.
func (q Queues) FreezeQueue(ctx context.Context, projectID int64, branch string, frozen bool, actor, reason string) (api.Queue, error) {
	if _, err := q.Flows.FreezeQueue(ctx, projectID, branch, frozen, actor, reason); err != nil {
		return api.Queue{}, Error(err)
	}
	return q.Queue(ctx, projectID, branch)
}

// MoveToFront implements api.Queues; a change that is not waiting in a
// queue is an *api.NotQueuedError naming its step.
func (q Queues) MoveToFront(ctx context.Context, id, actor, reason string) (api.Queue, error) {
	op, err := q.Store.GetOperation(ctx, q.Store.DB(), id)
	if err != nil {
		return api.Queue{}, Error(err)
	}
	if err := q.Flows.MoveToQueueFront(ctx, op, actor, reason); err != nil {
		if errors.Is(err, flows.ErrNotQueued) {
			return api.Queue{}, &api.NotQueuedError{OperationID: op.ID, Step: rules.StepCode(op.Step).String(), Err: err}
		}
		return api.Queue{}, Error(err)
	}
	return q.Queue(ctx, op.ProjectID, op.TargetBranch)
}

// QueueOf is sq as api reads it, with head the change at its head when
// read (nil: only its id and since are known); Project is head's.
func QueueOf(sq store.Queue, head *store.Operation) api.Queue {
	aq := api.Queue{ProjectID: sq.Key.ProjectID, TargetBranch: sq.Key.TargetBranch, Head: headOf(sq, head),
		FrozenAt: sq.FrozenAt, FrozenBy: sq.FrozenBy, FrozenReason: sq.FrozenReason, WaitingCount: len(sq.Waiting)}
	if head != nil {
		aq.Project = head.Project
	}
	for _, w := range sq.Waiting {
		aq.Waiting = append(aq.Waiting, api.QueuedChange{OperationID: w.ID, MRIID: w.MRIID, MRWebURL: w.MRWebURL, Title: w.Title,
			SubjectID: w.SubjectID, TargetKey: w.TargetKey, ReadyAt: w.ReadyAt, FrontAt: w.FrontAt, FrontBy: w.FrontBy})
	}
	return aq
}

// headOf is sq's head, nil when none; op is the head's change when read.
func headOf(sq store.Queue, op *store.Operation) *api.QueueHead {
	if sq.HeadOperationID == "" {
		return nil
	}
	h := &api.QueueHead{OperationID: sq.HeadOperationID, Since: sq.HeadSince}
	if op != nil {
		h.MRIID, h.MRWebURL = op.MRIID, op.MRWebURL
	}
	return h
}

// Settings is api.Settings over the settings cache.
type Settings struct {
	Cache *settings.Cache
}

var _ api.Settings = Settings{}

// List implements api.Settings.
func (s Settings) List(project string) []api.SettingView {
	var out []api.SettingView
	for _, v := range s.Cache.List(project) {
		out = append(out, SettingOf(v))
	}
	return out
}

// Lookup implements api.Settings.
func (s Settings) Lookup(key, project string) (api.SettingView, error) {
	// A project spelled so that no change reads its scope (a numeric id
	// for a key read by path) is refused as a write would be: answering
	// the global value would hide the project's own (settings.CheckScope).
	if err := settings.CheckScope(key, project); err != nil {
		return api.SettingView{}, &api.RefusedError{Err: err}
	}
	v, err := s.Cache.Lookup(key, project)
	if err != nil {
		return api.SettingView{}, &api.RefusedError{Err: err}
	}
	return SettingOf(v), nil
}

// Set implements api.Settings.
func (s Settings) Set(ctx context.Context, key, project string, rawJSON json.RawMessage, updatedBy string) (string, error) {
	err := s.Cache.Set(ctx, key, project, rawJSON, updatedBy)
	switch {
	case errors.Is(err, settings.ErrInvalidValue), errors.Is(err, settings.ErrUnknownKey), errors.Is(err, settings.ErrGlobalOnly),
		errors.Is(err, settings.ErrConflict), errors.Is(err, settings.ErrProjectScope):
		return "", &api.RefusedError{Err: err}
	case err != nil:
		return "", err
	}
	return settings.Scope(project), nil
}

// SettingOf is v as the API shows it, its time in UTC.
func SettingOf(v settings.Value) api.SettingView {
	sv := api.SettingView{Key: v.Key, Scope: v.Scope, Value: v.JSON(), UpdatedBy: v.UpdatedBy, Source: v.Source}
	if !v.UpdatedAt.IsZero() {
		t := v.UpdatedAt.UTC()
		sv.UpdatedAt = &t
	}
	return sv
}

// ChangeOf is op as api reads it (SubmittedBy is not an operation's: it
// stays empty).
func ChangeOf(op store.Operation) api.Change {
	return api.Change{ID: op.ID, Platform: op.Platform, SubjectID: op.SubjectID, TargetKey: op.TargetKey, Project: op.Project,
		Title: op.Title, RequestedBy: op.RequestedBy, Status: op.Status, Step: op.Step, Detail: op.Detail,
		ProjectID: op.ProjectID, MRIID: op.MRIID, MRWebURL: op.MRWebURL, ApprovalFirst: op.ApprovalFirst,
		StepStartedAt: op.StepStartedAt, CreatedAt: op.CreatedAt, UpdatedAt: op.UpdatedAt, Files: filesOf(op.Files),
		RolloutID: op.RolloutID, Adopted: op.Adopted}
}

// heldReason says, for people (the API's 409), that the binding already
// has an open change, which, and what frees it: "payments-api /
// prod/us-west-2 already has an open change op_… (!6, APPROVAL_SENT): wait
// for it or cancel it"; a failed one must be retried or cancelled.
func heldReason(e *store.ActiveChangeError) string {
	which := e.Status
	if e.MRIID > 0 {
		which = rules.WordsOf(e.Platform).Ref(e.MRIID) + ", " + e.Status
	}
	if e.Failed() {
		return fmt.Sprintf("%s / %s already has a change that failed, %s (%s): retry it or cancel it first", e.SubjectID, e.TargetKey, e.OperationID, which)
	}
	return fmt.Sprintf("%s / %s already has an open change %s (%s): wait for it or cancel it", e.SubjectID, e.TargetKey, e.OperationID, which)
}

// filesOf is files as api reads them; nil for none.
func filesOf(files []store.File) []api.File {
	var out []api.File
	for _, f := range files {
		out = append(out, api.File{Path: f.Path, Content: f.Content, Action: f.Action})
	}
	return out
}

// EventsOf is events as api answers them; with platform set, each one's
// SourceWords is its source and What what it did, in that platform's words
// (flows.DescribeSource, flows.DescribeEvent).
func EventsOf(events []store.Event, platform string) []api.Event {
	if events == nil {
		return nil
	}
	out := make([]api.Event, len(events))
	for i, ev := range events {
		out[i] = api.Event{OperationID: ev.OperationID, Seq: ev.Seq, Type: ev.Type, FromStep: ev.FromStep, ToStep: ev.ToStep,
			FromStatus: ev.FromStatus, ToStatus: ev.ToStatus, Actor: ev.Actor, Source: ev.Source, Payload: ev.Payload,
			SchemaVersion: ev.SchemaVersion, OccurredAt: ev.OccurredAt, PrevHash: ev.PrevHash, Hash: ev.Hash}
		if platform != "" {
			out[i].SourceWords = flows.DescribeSource(ev, platform)
			out[i].What = flows.DescribeEvent(ev, platform)
		}
	}
	return out
}

// storeEvents is EventsOf's inverse.
func storeEvents(events []api.Event) []store.Event {
	out := make([]store.Event, len(events))
	for i, ev := range events {
		out[i] = store.Event{OperationID: ev.OperationID, Seq: ev.Seq, Type: ev.Type, FromStep: ev.FromStep, ToStep: ev.ToStep,
			FromStatus: ev.FromStatus, ToStatus: ev.ToStatus, Actor: ev.Actor, Source: ev.Source, Payload: ev.Payload,
			SchemaVersion: ev.SchemaVersion, OccurredAt: ev.OccurredAt, PrevHash: ev.PrevHash, Hash: ev.Hash}
	}
	return out
}

// HistoryOf is h as api reads it: its events as stored and upcast.
func HistoryOf(h store.History) api.History {
	return api.History{Change: ChangeOf(h.Operation), Stored: EventsOf(h.Stored, ""), Current: EventsOf(h.Events(), "")}
}

// fieldsOf is fs as api names them.
func fieldsOf(fs []flows.FieldError) []api.FieldError {
	out := make([]api.FieldError, len(fs))
	for i, f := range fs {
		out[i] = api.FieldError{Field: f.Field, Message: f.Message}
	}
	return out
}

// Error translates what the engine and the store answer into api's
// errors (see api.Engine), in the order the API tells them apart; any
// other error is returned as it is. The original stays in the chain.
func Error(err error) error {
	var (
		check *flows.GitLabCheckError
		down  *flows.GitLabUnavailableError
		idem  *flows.IdempotencyConflictError
		held  *store.ActiveChangeError
	)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("%w: %w", api.ErrNotFound, err)
	case errors.Is(err, flows.ErrOverloaded):
		return fmt.Errorf("%w: %w", api.ErrOverloaded, err)
	case errors.Is(err, flows.ErrNotQueued):
		return &api.NotQueuedError{Err: err}
	}
	var noQueue *flows.NoQueueError
	if errors.As(err, &noQueue) {
		return &api.NoQueueError{Reason: noQueue.Reason, Unknown: noQueue.Unknown, Err: err}
	}
	if ve, ok := flows.IsValidation(err); ok {
		return &api.ValidationError{Fields: fieldsOf(ve.Fields)}
	}
	switch {
	case errors.As(err, &check):
		return &api.CheckError{Fields: fieldsOf(check.Fields)}
	case errors.As(err, &down):
		return &api.UnavailableError{RetryAfter: down.RetryAfter, Err: err}
	case errors.As(err, &idem):
		return &api.IdempotencyConflictError{OperationID: idem.OperationID, Fields: idem.Fields, Message: idem.Error()}
	case errors.As(err, &held):
		return &api.BindingHeldError{OperationID: held.OperationID, Status: held.Status, Failed: held.Failed(), Reason: heldReason(held)}
	}
	return err
}
