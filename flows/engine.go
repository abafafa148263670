// Package flows is the change flow's engine: the one function that moves
// an operation (Engine.Transition), the steps as River job workers, the
// approval and deploy callbacks, the application of pipeline and merge
// request webhooks (ApplyHook), the status comment, the reconciler and the
// sweeper. It runs the rules of package flows/rules (the step table, the
// transition table, the flow's vocabulary and its pure decisions) and does
// their I/O; it declares the interfaces it needs from the store, the
// platform and the approval system. It must not import bot, webhooks,
// commands or routing (the delivery router above it hands it its events:
// flows never calls up), and it never talks HTTP itself.
package flows

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"changebot/flows/commitgate"
	"changebot/flows/rules"
	"changebot/internal/guard"
	"changebot/platform"
	"changebot/platform/approval"
	"changebot/settings"
	"changebot/store"
	"changebot/templates"
)

// Store is what flows needs from the store (implemented by *postgres.Store).
// Transactions are opaque (store.Tx): flows never sees the database driver.
type Store interface {
	InTx(ctx context.Context, fn func(tx store.Tx) error) error
	DB() store.DBTX
	Now() time.Time
	GetOperation(ctx context.Context, db store.DBTX, id string) (store.Operation, error)
	GetBinding(ctx context.Context, db store.DBTX, subjectID, targetKey string) (store.Binding, error)
	OperationExists(ctx context.Context, db store.DBTX, id string) (bool, error)
	FindOperationByMR(ctx context.Context, db store.DBTX, platform string, projectID, iid int64) (store.Operation, error)
	FindOperationByIdempotencyKey(ctx context.Context, db store.DBTX, key string) (store.Operation, error)
	ListMergedByProject(ctx context.Context, db store.DBTX, platform string, projectID int64, limit int) ([]store.Operation, error)
	ListOperationsByStatus(ctx context.Context, db store.DBTX, statuses []string, from, to time.Time, limit int) ([]store.Operation, error)
	CreateOperation(ctx context.Context, p store.CreateParams) (store.Operation, bool, error)
	ApplyTransition(ctx context.Context, p store.TransitionParams) (store.Operation, store.Event, error)
	AppendEvent(ctx context.Context, operationID string, p store.EventParams, jobs ...river.InsertManyParams) (store.Event, error)
	ResumeStep(ctx context.Context, p store.ResumeStepParams) (bool, error)
	RetireStepJobs(ctx context.Context, db store.DBTX, operationID string, step int, kinds []string) (int, error)
	WakeStep(ctx context.Context, db store.DBTX, operationID string, step int, kinds []string) (bool, error)
	PostponeStepJobs(ctx context.Context, db store.DBTX, operationID string, step int, kinds []string, until time.Time) (int, error)
	AddGitLabApproval(ctx context.Context, db store.DBTX, operationID, username, source string) (bool, int, error)
	RemoveGitLabApproval(ctx context.Context, db store.DBTX, operationID, username string) (bool, error)
	CountGitLabApprovals(ctx context.Context, db store.DBTX, operationID string) (int, error)
	ClearGitLabApprovals(ctx context.Context, db store.DBTX, operationID string) (int, error)
	ListEvents(ctx context.Context, db store.DBTX, operationID string) ([]store.Event, error)
	InsertCallbackRequest(ctx context.Context, db store.DBTX, requestID, kind, operationID, result string) error
	CallbackResult(ctx context.Context, db store.DBTX, kind, requestID string) (string, error)
	RecordDeployConfirmation(ctx context.Context, db store.DBTX, c store.DeployConfirmation) error
	GetStatusNote(ctx context.Context, db store.DBTX, platform string, projectID, iid int64) (store.StatusNote, error)
	StatusNoteState(ctx context.Context, db store.DBTX, id string) (store.NoteState, error)
	ClaimStatusNote(ctx context.Context, platform string, projectID, iid int64, lease time.Duration) (store.NoteClaim, bool, error)
	RenewStatusNote(ctx context.Context, c store.NoteClaim, lease time.Duration) (bool, error)
	RecordStatusNote(ctx context.Context, c store.NoteClaim, n store.StatusNote) (bool, error)
	ReleaseStatusNote(ctx context.Context, db store.DBTX, c store.NoteClaim) error
	ReadHistory(ctx context.Context, id string) (store.History, error)
	SaveRepoPolicy(ctx context.Context, db store.DBTX, p store.RepoPolicy) (bool, error)
	RepoPolicy(ctx context.Context, db store.DBTX, platform string, projectID int64, branch string) (store.RepoPolicy, error)
	CountActive(ctx context.Context, db store.DBTX) (int, error)
	// Claims are the commit gate's rows (commitgate.DBStore).
	commitgate.Claims
	Queues
}

// Platform is what flows needs from a code-hosting platform's adapter:
// *platform/gitlab.Client (exercised against gitlabfake) and
// *platform/github.Client (against githubfake), both checked by one
// conformance suite (platform/platformtest). The method names keep GitLab's
// words; on GitHub a merge request is a pull request, an iid its number, a
// pipeline the head's checks and statuses together, a note an issue comment,
// a rebase an update-branch, and access levels the collaborator permission
// mapped onto GitLab's scale (docs/github.md).
type Platform interface {
	CurrentUser(ctx context.Context) (platform.User, error)
	ReviewerCount() int
	Reviewer(ctx context.Context, i int) (platform.User, error)
	Project(ctx context.Context, project string) (platform.Project, error)
	Branch(ctx context.Context, projectID int64, name string) (platform.Branch, error)
	CreateBranch(ctx context.Context, projectID int64, name, ref string) (platform.Branch, error)
	DeleteBranch(ctx context.Context, projectID int64, name string) error
	CreateCommit(ctx context.Context, projectID int64, p platform.CommitParams) (platform.Commit, error)
	BranchCommits(ctx context.Context, projectID int64, base, branch string) ([]platform.Commit, error)
	TreeFiles(ctx context.Context, projectID int64, ref, dir string) (map[string]bool, error)
	FindOpenMergeRequest(ctx context.Context, projectID int64, sourceBranch string) (platform.MergeRequest, error)
	CreateMergeRequest(ctx context.Context, projectID int64, p platform.CreateMRParams) (platform.MergeRequest, error)
	MergeRequest(ctx context.Context, projectID, iid int64, includeRebase bool) (platform.MergeRequest, error)
	CloseMergeRequest(ctx context.Context, projectID, iid int64) (platform.MergeRequest, error)
	CreateMergeRequestPipeline(ctx context.Context, projectID, iid int64) (platform.Pipeline, error)
	MemberAccess(ctx context.Context, projectID, userID int64) (int, error)
	GroupMemberAccess(ctx context.Context, group string, userID int64) (int, error)
	Approvals(ctx context.Context, projectID, iid int64) ([]platform.User, error)
	Approve(ctx context.Context, reviewer int, projectID, iid int64, sha string) error
	Unapprove(ctx context.Context, reviewer int, projectID, iid int64) error
	Merge(ctx context.Context, projectID, iid int64, p platform.MergeParams) (platform.MergeRequest, error)
	Rebase(ctx context.Context, projectID, iid int64) error
	AddToMergeTrain(ctx context.Context, projectID, iid int64, sha string, squash bool) error
	MergeTrainCar(ctx context.Context, projectID, iid int64) (platform.TrainCar, error)
	Pipelines(ctx context.Context, projectID int64, ref, sha string) ([]platform.Pipeline, error)
	IsAncestor(ctx context.Context, projectID int64, ancestor, descendant string) (bool, error)
	CreateNote(ctx context.Context, projectID, iid int64, body string) (platform.Note, error)
	UpdateNote(ctx context.Context, projectID, iid, noteID int64, body string) (platform.Note, error)
	FindNote(ctx context.Context, projectID, iid int64, marker string) (platform.Note, error)
}

// ApprovalRequest is what the bot sends to the external approval system
// (README "Approval system contract"); the HTTP client owns its shape.
type ApprovalRequest = approval.Request

// ApprovalTicket is the approval system's answer: the ticket id and,
// optionally, the ticket's page (README "Approval system contract").
type ApprovalTicket = approval.Ticket

// ApprovalSystem asks an approver for a decision. It must be idempotent per
// operation id (a crash between the call and our write repeats the call).
// Every error but a refusal (platform.IsRefused: a *platform.Error of a
// kind other than rate limited or unavailable) is treated as transient and
// retried.
type ApprovalSystem interface {
	RequestApproval(ctx context.Context, r ApprovalRequest) (ApprovalTicket, error)
}

// Renderer renders status comments (implemented by *templates.Renderer).
type Renderer interface {
	Status(v templates.StatusView) (string, error)
}

// PollConfig is the stepped polling schedule of every wait (DESIGN §3
// step 5): ShortCount polls every ShortInterval, then every LongInterval,
// until the wait's deadline.
type PollConfig struct {
	ShortInterval    time.Duration
	ShortCount       int
	LongInterval     time.Duration
	PipelineDeadline time.Duration
	RebaseDeadline   time.Duration
	DeployDeadline   time.Duration
	// NoteDelay is how long a status-note refresh waits so that several
	// transitions coalesce into one edit.
	NoteDelay time.Duration
	// MaxRounds bounds rebase/merge rounds of one change (setting
	// merge.max_rounds): each rebase, each return to approvals because GitLab
	// says not_approved, each return to the pipeline wait because GitLab
	// says ci_still_running counts one.
	MaxRounds int
	// ApproveMaxRetries is how many times one reviewer robot's approve is
	// retried after a 429, a 5xx or a network error, on its own exponential
	// backoff (ShortInterval doubling up to LongInterval, or longer when
	// GitLab asks with Retry-After); after the last failure the approvals are
	// read once more (setting approve.max_retries). Zero means
	// DefaultApproveMaxRetries; a negative value means no retry.
	ApproveMaxRetries int
}

// DefaultApproveMaxRetries is PollConfig.ApproveMaxRetries when zero: the
// registry default of approve.max_retries.
var DefaultApproveMaxRetries = settings.DefaultValue(settings.ApproveMaxRetries).Int()

// DefaultPollConfig is the schedule used when EngineConfig.Poll is zero: the
// settings registry's defaults (package settings is their one source).
var DefaultPollConfig = PollConfig{
	ShortInterval:     settings.DefaultValue(settings.PollShortInterval).Duration(),
	ShortCount:        settings.DefaultValue(settings.PollShortCount).Int(),
	LongInterval:      settings.DefaultValue(settings.PollLongInterval).Duration(),
	PipelineDeadline:  settings.DefaultValue(settings.PipelineDeadline).Duration(),
	RebaseDeadline:    settings.DefaultValue(settings.RebaseDeadline).Duration(),
	DeployDeadline:    settings.DefaultValue(settings.DeployDeadline).Duration(),
	NoteDelay:         settings.DefaultValue(settings.NoteDelay).Duration(),
	MaxRounds:         settings.DefaultValue(settings.MergeMaxRounds).Int(),
	ApproveMaxRetries: DefaultApproveMaxRetries,
}

// EngineConfig wires an Engine.
type EngineConfig struct {
	Store Store
	// Adapter is the platform adapter: platform/gitlab's client, or
	// platform/github's with the same methods in GitHub's meanings.
	Adapter Platform
	// Platform names the platform Adapter speaks to: store.PlatformGitLab
	// (the default when "") or store.PlatformGitHub. One installation
	// serves one platform: every change it submits records it, every
	// lookup by project id and request number names it, and a job or
	// action meeting a change of another platform (a database shared
	// with another installation) refuses it with ErrOtherPlatform.
	Platform  string
	Approvals ApprovalSystem
	Renderer  Renderer
	// ExternalURL is the bot's public base URL (callback_url is built from it).
	ExternalURL string
	// BranchPrefix prefixes source branches; default "changebot/".
	BranchPrefix string
	Poll         PollConfig
	// PollFunc, when set, returns the polling schedule for a project (its
	// path as the platform answered it at submit, whatever the submitter
	// typed: store.Operation.Project), read on every use so runtime
	// settings apply without restart; a zero result means Poll. See
	// Engine.pollFor.
	PollFunc func(project string) PollConfig
	// QueueFunc, when set, returns the merge queue configuration of a
	// project (its path, as PollFunc), read on every use; nil means
	// DefaultQueueConfig.
	QueueFunc func(project string) QueueConfig
	// ApprovalPolicyFunc returns a project's approval mode, for the
	// project's path as the platform answered it (as PollFunc); nil means
	// the external approval system everywhere.
	ApprovalPolicyFunc func(project string) ApprovalPolicy
	// AllowOverrideFunc, when set, lists the keys of a repository's
	// `.changebot.yml` whose values replace the server's settings for the
	// project (its path, as PollFunc; runtime setting
	// policy.allow_override); nil lets none.
	AllowOverrideFunc func(project string) []string
	Logger            *slog.Logger
	Metrics           *Metrics
	NowFunc           func() time.Time
	// StepHookFunc, when set, is called with the job kind at the start of
	// every step job, inside the runner's panic recovery. It exists for
	// tests (inject a panic into one kind of step and check that the change
	// ends in the kind's declared failure step); nil in production.
	StepHookFunc func(kind string)
	// EventJobsFunc, when set, returns jobs to enqueue in the transaction
	// of every move Transition makes, from the operation as written and
	// the event appended (store.TransitionParams.EventJobsFunc): the
	// notifications of issue 25 (notify.Router.Jobs); nil enqueues none.
	EventJobsFunc func(op store.Operation, ev store.Event) []river.InsertManyParams
	// RolloutNotice, when set, tells the state of a rollout in the
	// transaction of every move Transition makes of one of its changes
	// (store.TransitionParams.Rollout): the rollout summaries of issue 25
	// (notify.Router.RolloutNotice); nil tells none.
	RolloutNotice *store.RolloutNotice
	// JobTimeout is how long one job may run (River's JobTimeout); 0 means
	// DefaultJobTimeout. A merge claim in the commit gate older than this,
	// on a merge request GitLab still shows open, was left by a replica
	// that died between its claim and its merge call, and is taken over.
	JobTimeout time.Duration
	// Adopt turns on adopting developers' merge requests in the projects
	// it lists (issue 25 point 1); the zero value adopts nothing.
	Adopt AdoptConfig
}

// DefaultJobTimeout is EngineConfig.JobTimeout's default.
const DefaultJobTimeout = time.Minute

// Engine runs the change flow.
type Engine struct {
	cfg EngineConfig
	st  Store
	gl  Platform
	// platform is cfg.Platform, store.PlatformGitLab when empty.
	platform string
	log      *slog.Logger
	m        *Metrics
	now      func() time.Time
	poll     PollConfig
	prefix   string
	// gate guards the merge: one successful merge call per (operation,
	// head sha) across replicas (DESIGN §6, issue 10 point 7).
	gate *commitgate.Guard
	// reads shares recent project reads between the submit check and the
	// create steps (projectReadTTL).
	reads projectReads
	// policies are the repository policies of the target branches this
	// replica has met (repo_policy.go).
	policies repoPolicies
	// guesses remembers, per project id, the file action that last fitted
	// a change's one file submitted without an action (actionGuesses).
	guesses actionGuesses
	// jobs is the job panic guard the step runner runs each step under.
	jobs *guard.Jobs
}

// NewEngine validates cfg and returns an engine.
func NewEngine(cfg EngineConfig) (*Engine, error) {
	var errs []error
	if cfg.Store == nil {
		errs = append(errs, errors.New("store is required"))
	}
	if cfg.Adapter == nil {
		errs = append(errs, errors.New("platform adapter is required"))
	}
	if cfg.Approvals == nil {
		errs = append(errs, errors.New("approval system is required"))
	}
	if p := store.PlatformOr(cfg.Platform); p != store.PlatformGitLab && p != store.PlatformGitHub {
		errs = append(errs, fmt.Errorf("platform %q: want %s or %s", cfg.Platform, store.PlatformGitLab, store.PlatformGitHub))
	}
	if cfg.Renderer == nil {
		errs = append(errs, errors.New("renderer is required"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("configuring flow engine: %w", err)
	}
	e := &Engine{cfg: cfg, st: cfg.Store, gl: cfg.Adapter, log: cfg.Logger, m: cfg.Metrics, now: cfg.NowFunc,
		poll: cfg.Poll, prefix: cfg.BranchPrefix, platform: store.PlatformOr(cfg.Platform)}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if e.m == nil {
		e.m = NewMetrics(nil)
	}
	if e.now == nil {
		e.now = time.Now
	}
	if e.poll == (PollConfig{}) {
		e.poll = DefaultPollConfig
	}
	if e.poll.ApproveMaxRetries == 0 {
		e.poll.ApproveMaxRetries = DefaultApproveMaxRetries
	}
	if e.prefix == "" {
		e.prefix = "changebot/"
	}
	if e.cfg.JobTimeout <= 0 {
		e.cfg.JobTimeout = DefaultJobTimeout
	}
	e.jobs = guard.NewJobs(guard.Config{Panics: e.m.panics, Logger: e.log})
	e.gate = commitgate.NewGuardWithStore(commitgate.NewDBStore(e.st, e.st.DB()).WithClock(e.now), nil)
	return e, nil
}

// pollFor returns the polling schedule that applies to op now:
// EngineConfig.PollFunc for op's project when set (runtime settings), else
// the static schedule, with the branch's `.changebot.yml` merge.max_rounds
// where the server allows it. Every wait reads it when it schedules its
// next poll.
func (e *Engine) pollFor(op store.Operation) PollConfig {
	p := e.poll
	if e.cfg.PollFunc != nil {
		if q := e.cfg.PollFunc(op.Project); q != (PollConfig{}) {
			p = q
		}
	}
	return e.applyPollPolicy(op, p)
}

// Platform is the platform this engine acts on (EngineConfig.Platform):
// store.PlatformGitLab or store.PlatformGitHub.
func (e *Engine) Platform() string { return e.platform }

// ErrOtherPlatform is returned (wrapped) when a job or an action meets a
// change recorded on another platform than the engine's: one installation
// serves one platform (EngineConfig.Platform) and never acts on another's
// changes.
var ErrOtherPlatform = errors.New("change belongs to another platform")

// ownPlatform returns nil when op is a change of the engine's platform,
// else an error wrapping ErrOtherPlatform naming both.
func (e *Engine) ownPlatform(op store.Operation) error {
	if p := store.PlatformOr(op.Platform); p != e.platform {
		return fmt.Errorf("%s is a %s change, this installation serves %s: %w", op.ID, p, e.platform, ErrOtherPlatform)
	}
	return nil
}

// Log attribute keys (STYLE 9).
const (
	attrOperationID = "operation_id"
	attrProjectID   = "project_id"
	attrMRIID       = "mr_iid"
	attrStep        = "step"
	attrJobKind     = "job_kind"
)

func (e *Engine) opLog(op store.Operation) *slog.Logger {
	return e.log.With(attrOperationID, op.ID, attrProjectID, op.ProjectID, attrMRIID, op.MRIID)
}

// TransitionOpts are the optional parts of a transition.
type TransitionOpts struct {
	Actor, Source string
	Payload       map[string]any
	// Update sets operation fields in the same write.
	Update func(op *store.Operation)
	// Guard runs in the transaction after the rows are locked.
	Guard func(ctx context.Context, tx store.Tx, op store.Operation, b store.Binding) error
	// IgnoreVersion checks only the step (for idempotent flips that several
	// sources race to make, such as MERGED -> VALIDATED).
	IgnoreVersion bool
	// Delay schedules the follow-up job that far in the future.
	Delay time.Duration
	// Jobs are enqueued in the same transaction, beside the step's own
	// follow-ups (for example the cleanup job of a cancel).
	Jobs []river.InsertManyParams
}

// Transition is the one function that moves an operation (DESIGN §2): it
// checks the transition table, then in one database transaction compares
// the version it read, updates operation and binding, appends the event and
// enqueues the next step's job (in place of any job still queued for that
// step from an earlier visit: one job per operation and step), a
// status-note refresh and the jobs EngineConfig.EventJobsFunc makes of the
// move (its notifications). Errors:
// ErrIllegalTransition (nothing written), store.ErrStepMismatch /
// ErrVersionConflict / ErrBindingNotOwned (someone else moved first).
func (e *Engine) Transition(ctx context.Context, op store.Operation, to rules.StepCode, o TransitionOpts) (store.Operation, error) {
	from := rules.StepCode(op.Step)
	if err := rules.CheckTransition(from, to); err != nil {
		e.m.transitions.WithLabelValues(flowName(op), from.String(), to.String(), "illegal").Inc()
		return op, fmt.Errorf("moving %s: %w", op.ID, err)
	}
	ts := rules.MustStep(to)
	if o.Actor == "" {
		o.Actor = ActorBot
	}
	update := o.Update
	if from != to {
		// A new step starts without the last one's detail (a retry note, a
		// failure reason) unless the move sets its own.
		update = func(x *store.Operation) {
			x.Detail = ""
			if o.Update != nil {
				o.Update(x)
			}
		}
	}
	guard := o.Guard
	if rules.HoldsQueueHead(from) && !rules.HoldsQueueHead(to) {
		// Leaving the head's steps gives the head of the merge queue back
		// in this move's transaction, and wakes the next change.
		inner := guard
		guard = func(ctx context.Context, tx store.Tx, cur store.Operation, b store.Binding) error {
			if inner != nil {
				if err := inner(ctx, tx, cur, b); err != nil {
					return err
				}
			}
			return e.releaseHeadGuard(ctx, tx, cur)
		}
	}
	if ts.JobFor(op.ApprovalFirst).Kind != "" {
		// One job per (operation, step): a job left queued from an earlier
		// visit of the step (a snoozed poll, say) gives way to the new one.
		withQueue := guard
		guard = func(ctx context.Context, tx store.Tx, cur store.Operation, b store.Binding) error {
			if withQueue != nil {
				if err := withQueue(ctx, tx, cur, b); err != nil {
					return err
				}
			}
			_, err := e.st.RetireStepJobs(ctx, tx, op.ID, int(to), rules.StepJobKinds())
			return err
		}
	}
	if poll := rules.MustStep(from).JobFor(op.ApprovalFirst).Kind; from != to && slices.Contains(backgroundKinds, poll) && workingKind(ctx) != poll {
		// Leaving a wait retires its scheduled poll in the same
		// transaction: run later, it would only find the change moved on
		// (a job fetched and an operation read for nothing, issue 24).
		// Not when a poll job moves the change: the step's one poll is
		// the job being worked, its own row.
		withPoll := guard
		guard = func(ctx context.Context, tx store.Tx, cur store.Operation, b store.Binding) error {
			if withPoll != nil {
				if err := withPoll(ctx, tx, cur, b); err != nil {
					return err
				}
			}
			_, err := e.st.RetireStepJobs(ctx, tx, op.ID, int(from), []string{poll})
			return err
		}
	}
	p := store.TransitionParams{
		OperationID: op.ID, ExpectStep: op.Step, ToStep: int(to), ToStatus: ts.Status,
		Update: update, Guard: guard,
		Event: store.EventParams{Type: store.EventTransition, Actor: o.Actor, Source: o.Source, Payload: o.Payload},
	}
	if !o.IgnoreVersion {
		p.ExpectVersion = op.Version
	}
	p.Jobs = append(e.followUps(op, to, op.Version+1, o.Delay), o.Jobs...)
	p.EventJobsFunc, p.Rollout = e.cfg.EventJobsFunc, e.cfg.RolloutNotice
	next, _, err := e.st.ApplyTransition(ctx, p)
	if err != nil {
		e.m.transitions.WithLabelValues(flowName(op), from.String(), to.String(), "conflict").Inc()
		return op, err
	}
	e.m.transitions.WithLabelValues(flowName(op), from.String(), to.String(), "ok").Inc()
	if from != to {
		e.m.stateSeconds.WithLabelValues(from.String()).Observe(next.UpdatedAt.Sub(op.StepStartedAt).Seconds())
	}
	e.opLog(next).Info("transition", "from", from.String(), "to", to.String(), "status", next.Status, "actor", o.Actor, "source", o.Source)
	return next, nil
}

// recordInStep is the same-step bookkeeping write (no move): in one
// transaction, with compare-and-set on the version op was read at, it
// applies update to the operation (its detail, the pipeline it waits for),
// appends an attempt event with payload from source, and enqueues jobs
// (the status-note refresh, or none). It returns the operation as written;
// a writer that moved the change first wins (store.ErrStepMismatch,
// ErrVersionConflict: isConflict).
func (e *Engine) recordInStep(ctx context.Context, op store.Operation, source string, payload map[string]any,
	update func(*store.Operation), jobs []river.InsertManyParams) (store.Operation, error) {
	next, _, err := e.st.ApplyTransition(ctx, store.TransitionParams{
		OperationID: op.ID, ExpectStep: op.Step, ExpectVersion: op.Version, ToStep: op.Step, ToStatus: op.Status,
		KeepStepClock: true, Update: update,
		Event: store.EventParams{Type: store.EventAttempt, Actor: ActorBot, Source: source, Payload: payload},
		Jobs:  jobs,
	})
	return next, err
}

func flowName(op store.Operation) string {
	if op.ApprovalFirst {
		return "approval_first"
	}
	return "mr_first"
}

// Actors recorded on events written by the bot itself.
const (
	ActorBot     = "changebot"
	ActorSweeper = "sweeper"
)

// uniqueActive deduplicates a job per args (operation, step, version) while
// one is waiting or running. Completed jobs are left out so that /resume can
// enqueue the current step again; the version makes every transition's job
// distinct, so a job finishing late never swallows the next one.
var uniqueActive = &river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
	rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRetryable,
	rivertype.JobStateRunning, rivertype.JobStateScheduled,
}}

// pollPriority is the River priority of poll jobs (backgroundKinds): the
// lowest of River's four (1 is the default and the highest).
const pollPriority = 4

// followUps returns the jobs a move to step `to` makes due: the job of
// to's row in the step table for op's flow order (a polling job first looks
// after the short interval) and a status-note refresh; version is the
// operation version the move writes (it makes each transition's job unique).
func (e *Engine) followUps(op store.Operation, to rules.StepCode, version int64, delay time.Duration) []river.InsertManyParams {
	var jobs []river.InsertManyParams
	s, ok := rules.Lookup(to)
	if j := s.JobFor(op.ApprovalFirst); ok && j.Kind != "" {
		opts := &river.InsertOpts{UniqueOpts: *uniqueActive, MaxAttempts: MaxAttempts}
		if slices.Contains(backgroundKinds, j.Kind) {
			// Polls come after every other due job (River fetches lower
			// priority numbers first): a thousand due polls must not queue
			// a /retry's step behind them (issue 12 point 4).
			opts.Priority = pollPriority
		}
		if delay == 0 && s.Polls() {
			delay = e.pollFor(op).ShortInterval
		}
		if delay > 0 {
			opts.ScheduledAt = e.now().Add(delay)
		}
		args := stepJobArgs(j.Kind, OperationArgs{OperationID: op.ID, Step: int(to), Version: version})
		jobs = append(jobs, river.InsertManyParams{Args: args, InsertOpts: opts})
	}
	if op.MRIID > 0 || to == rules.CreateMROpened || to == rules.CreateStarted {
		jobs = append(jobs, e.refreshNoteJobs(op, version)...)
	}
	return jobs
}

// noteBackstopAfter is how long after a transition's refresh its backstop
// refresh is due: past the claim lease the first one took, so that a
// replica dying in the middle of the first (its job left running until
// River's rescuer, jobs.rescue_after, releases it minutes later) delays
// the comment by seconds only.
const noteBackstopAfter = noteClaimLease + time.Second

// noteMinWindow is the shortest coalescing window of status note refreshes
// (River's UniqueOpts.ByPeriod is at least a second).
const noteMinWindow = time.Second

// refreshNoteJobs are the status note refreshes of op's transition to
// version: one due once note.delay (read now, for op's project) has let
// transitions coalesce, and its backstop noteBackstopAfter later (see
// RefreshNoteArgs.Backstop).
//
// With a note.delay of 2 s or more the transitions of op coalesce into one
// job each: the coalescing window is half of note.delay, and the
// transitions whose due time falls in the same window share the job the
// first of them inserted (River's uniqueness by args and period of the
// scheduled time; the job names no version). The shared job is due
// note.delay after the first transition, after every later one of its
// window (they came less than a window later, and a window is shorter than
// note.delay), so no transition can find its window's refresh already
// running, which River's uniqueness would swallow; every transition still
// waits at most note.delay for its edit. A shorter note.delay keeps one job
// per transition (unique per version).
func (e *Engine) refreshNoteJobs(op store.Operation, version int64) []river.InsertManyParams {
	delay := e.pollFor(op).NoteDelay
	due := e.now().Add(delay)
	args := RefreshNoteArgs{OperationID: op.ID, Version: version}
	unique := *uniqueActive
	if window := delay / 2; window >= noteMinWindow {
		args.Version = 0
		unique.ByPeriod = window
	}
	backstop := args
	backstop.Backstop = true
	return []river.InsertManyParams{
		{Args: args, InsertOpts: &river.InsertOpts{Queue: rules.QueueNotes, ScheduledAt: due, UniqueOpts: unique}},
		{Args: backstop, InsertOpts: &river.InsertOpts{Queue: rules.QueueNotes, ScheduledAt: due.Add(noteBackstopAfter), UniqueOpts: unique}},
	}
}

// Get returns an operation and its events (upcast), read in one snapshot
// so they agree while the change moves; store.ErrNotFound (wrapped) when
// there is no such operation.
func (e *Engine) Get(ctx context.Context, id string) (store.Operation, []store.Event, error) {
	h, err := e.st.ReadHistory(ctx, id)
	if err != nil {
		return store.Operation{}, nil, err
	}
	return h.Operation, h.Events(), nil
}

// isConflict reports whether err means "someone else moved this operation
// first": the caller's work is stale and it should stop quietly.
func isConflict(err error) bool {
	return errors.Is(err, store.ErrStepMismatch) || errors.Is(err, store.ErrVersionConflict) ||
		errors.Is(err, store.ErrBindingNotOwned)
}
