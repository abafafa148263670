package commands

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"changebot/flows"
	"changebot/platform"
	"changebot/store"
	"changebot/templates"
)

// Engine is what the executor needs from the flow engine.
type Engine interface {
	FindByMR(ctx context.Context, projectID, iid int64) (store.Operation, error)
	Retry(ctx context.Context, op store.Operation, p flows.ActionParams) (store.Operation, error)
	Resume(ctx context.Context, op store.Operation, p flows.ActionParams) (store.Operation, error)
	Cancel(ctx context.Context, op store.Operation, p flows.ActionParams) (store.Operation, error)
	Refuse(ctx context.Context, op store.Operation, p flows.ActionParams, reason string) error
	RefreshNow(ctx context.Context, op store.Operation) error
	Reply(ctx context.Context, projectID, iid int64, body string) error
	IsApprover(ctx context.Context, op store.Operation, user platform.User) (bool, error)
	DecideInGitLab(ctx context.Context, op store.Operation, user platform.User, decision, source string) error
}

// NoteStore records which notes ran (once per note id) and per-user activity.
type NoteStore interface {
	ClaimNote(ctx context.Context, db store.DBTX, projectID, noteID, iid int64, author string) (bool, error)
	SetNoteOutcome(ctx context.Context, db store.DBTX, projectID, noteID int64, outcome string) error
	NoteActivity(ctx context.Context, db store.DBTX, author string, since time.Time) (notes, limited int, err error)
	// InsertCallbackRequest claims a one-off key (ErrDuplicate when taken).
	InsertCallbackRequest(ctx context.Context, db store.DBTX, requestID, kind, operationID, result string) error
}

// Access answers GitLab permission questions.
type Access interface {
	CurrentUser(ctx context.Context) (platform.User, error)
	ReviewerCount() int
	Reviewer(ctx context.Context, i int) (platform.User, error)
	MemberAccess(ctx context.Context, projectID, userID int64) (int, error)
	MergeRequest(ctx context.Context, projectID, iid int64, includeRebase bool) (platform.MergeRequest, error)
	MergeAccessLevel(ctx context.Context, projectID int64, branch string) (level int, protected bool, err error)
}

// Replier renders replies (implemented by *templates.Renderer).
type Replier interface {
	Reply(kind string, data any) (string, error)
}

// ExecutorConfig wires an Executor.
type ExecutorConfig struct {
	Engine   Engine
	Notes    NoteStore
	DB       store.DBTX
	Access   Access
	Renderer Replier
	// Operators are GitLab usernames with the operator role.
	Operators []string
	// BotUsers are other bots whose notes are ignored (the robot and the
	// reviewer robots always are).
	BotUsers []string
	// RateLimit commands per user per RateWindow; 0 means 20 per minute.
	RateLimit  int
	RateWindow time.Duration
	// RateLimitFunc, when set, is read at every note instead of RateLimit
	// (the runtime setting commands.rate_limit, per minute).
	RateLimitFunc func() int
	Logger        *slog.Logger
	NowFunc       func() time.Time
}

// Executor runs the commands of MR comments (issue 3): once per note id,
// never on edits, never for bots, with permissions checked when they run.
type Executor struct {
	cfg ExecutorConfig
	log *slog.Logger
	now func() time.Time
}

// NewExecutor returns an executor.
func NewExecutor(cfg ExecutorConfig) *Executor {
	x := &Executor{cfg: cfg, log: cfg.Logger, now: cfg.NowFunc}
	if x.log == nil {
		x.log = slog.New(slog.DiscardHandler)
	}
	if x.now == nil {
		x.now = time.Now
	}
	if x.cfg.RateLimit <= 0 {
		x.cfg.RateLimit = 20
	}
	if x.cfg.RateWindow <= 0 {
		x.cfg.RateWindow = time.Minute
	}
	return x
}

// Note outcomes (webhook_deliveries.outcome and note_commands.outcome).
const (
	OutcomeIgnored     = "ignored"
	OutcomeSeen        = "already_seen"
	OutcomeNoCommand   = "no_command"
	OutcomeRan         = "commands_ran"
	OutcomeNoChange    = "no_change"
	OutcomeRateLimited = "rate_limited"
)

// HandleNote implements flows.NoteHandler.
func (x *Executor) HandleNote(ctx context.Context, deliveryID int64, ev platform.HookEvent) (string, error) {
	n := ev.Note
	if n == nil || n.NoteableType != "MergeRequest" || n.System || n.MRIID == 0 {
		return OutcomeIgnored, nil
	}
	if n.Action == "update" {
		return OutcomeIgnored, nil // edits never run commands
	}
	if bot, err := x.isBot(ctx, ev.User); err != nil {
		return "", err
	} else if bot {
		return OutcomeIgnored, nil
	}
	robot, err := x.cfg.Access.CurrentUser(ctx)
	if err != nil {
		return "", err
	}
	invs := Parse(n.Body, robot.Username)
	if len(invs) == 0 {
		return OutcomeNoCommand, nil
	}
	claimed, err := x.cfg.Notes.ClaimNote(ctx, x.cfg.DB, ev.ProjectID, n.ID, n.MRIID, ev.User.Username)
	if err != nil {
		return "", err
	}
	if !claimed {
		return OutcomeSeen, nil
	}
	outcome, err := x.run(ctx, ev, invs)
	if err != nil {
		return "", err
	}
	if err := x.cfg.Notes.SetNoteOutcome(ctx, x.cfg.DB, ev.ProjectID, n.ID, outcome); err != nil {
		return "", err
	}
	return outcome, nil
}

func (x *Executor) isBot(ctx context.Context, u platform.User) (bool, error) {
	if slices.Contains(x.cfg.BotUsers, u.Username) {
		return true, nil
	}
	robot, err := x.cfg.Access.CurrentUser(ctx)
	if err != nil {
		return false, err
	}
	if u.ID == robot.ID || u.Username == robot.Username {
		return true, nil
	}
	for i := range x.cfg.Access.ReviewerCount() {
		r, err := x.cfg.Access.Reviewer(ctx, i)
		if err != nil {
			return false, err
		}
		if u.ID == r.ID || u.Username == r.Username {
			return true, nil
		}
	}
	return false, nil
}

func (x *Executor) run(ctx context.Context, ev platform.HookEvent, invs []Invocation) (string, error) {
	n := ev.Note
	reply := func(kind string, data any) error {
		body, err := x.cfg.Renderer.Reply(kind, data)
		if err != nil {
			return err
		}
		return x.cfg.Engine.Reply(ctx, ev.ProjectID, n.MRIID, body)
	}
	// Per-user rate limit; the excess is answered once per window.
	notes, limited, err := x.cfg.Notes.NoteActivity(ctx, x.cfg.DB, ev.User.Username, x.now().Add(-x.cfg.RateWindow))
	if err != nil {
		return "", err
	}
	limit := x.cfg.RateLimit
	if x.cfg.RateLimitFunc != nil {
		if n := x.cfg.RateLimitFunc(); n > 0 {
			limit = n
		}
	}
	if notes > limit {
		// One reply per user and window, decided atomically: concurrent
		// notes race for the same claim key.
		window := x.now().UTC().Truncate(x.cfg.RateWindow)
		key := fmt.Sprintf("rate_limit:%s:%d", ev.User.Username, window.Unix())
		err := x.cfg.Notes.InsertCallbackRequest(ctx, x.cfg.DB, key, "rate_limit", "", OutcomeRateLimited)
		if err != nil && !errors.Is(err, store.ErrDuplicate) {
			return "", err
		}
		if err == nil && limited == 0 {
			if err := reply(templates.ReplyRateLimited, templates.RateLimitedReply{Limit: limit,
				Window: x.cfg.RateWindow, Until: x.now().Add(x.cfg.RateWindow).UTC()}); err != nil {
				return "", err
			}
		}
		return OutcomeRateLimited, nil
	}
	var unknown []string
	var known []Invocation
	for _, inv := range invs {
		if _, ok := Lookup(inv.Name); ok {
			known = append(known, inv)
		} else {
			unknown = append(unknown, inv.Name)
		}
	}
	if len(unknown) > 0 {
		if err := reply(templates.ReplyUnknownCommand, templates.UnknownCommandReply{Names: unknown, Commands: helpOf(Registry())}); err != nil {
			return "", err
		}
	}
	if len(known) == 0 {
		return OutcomeRan, nil
	}
	op, err := x.cfg.Engine.FindByMR(ctx, ev.ProjectID, n.MRIID)
	if errors.Is(err, store.ErrNotFound) {
		names := make([]string, len(known))
		for i, k := range known {
			names[i] = k.Name
		}
		return OutcomeNoChange, reply(templates.ReplyNoChange, templates.NoChangeReply{Names: names})
	}
	if err != nil {
		return "", err
	}
	for _, inv := range known {
		if err := x.runOne(ctx, ev, op, inv, reply); err != nil {
			return "", err
		}
		if op2, err := x.cfg.Engine.FindByMR(ctx, ev.ProjectID, n.MRIID); err == nil {
			op = op2
		}
	}
	return OutcomeRan, nil
}

func (x *Executor) runOne(ctx context.Context, ev platform.HookEvent, op store.Operation, inv Invocation,
	reply func(string, any) error) error {
	cmd, _ := Lookup(inv.Name)
	p := flows.ActionParams{Actor: ev.User.Username, Source: fmt.Sprintf("command:%d", ev.Note.ID), Command: cmd.Name}
	ok, reason, err := x.allowed(ctx, ev, op, cmd)
	if err != nil {
		return err
	}
	if !ok {
		if err := x.cfg.Engine.Refuse(ctx, op, p, reason); err != nil {
			return err
		}
		return reply(templates.ReplyRefused, templates.RefusedReply{Name: cmd.Name, Who: cmd.WhoText, Reason: reason})
	}
	var actErr error
	switch cmd.Name {
	case NameRetry:
		_, actErr = x.cfg.Engine.Retry(ctx, op, p)
	case NameResume:
		_, actErr = x.cfg.Engine.Resume(ctx, op, p)
	case NameCancel:
		_, actErr = x.cfg.Engine.Cancel(ctx, op, p)
	case NameStatus:
		actErr = x.cfg.Engine.RefreshNow(ctx, op)
	case NameHelp:
		return reply(templates.ReplyHelp, templates.HelpReply{Commands: helpOf(x.usable(ctx, ev, op)), BotUsername: x.robotName(ctx)})
	case NameApprove:
		actErr = x.cfg.Engine.DecideInGitLab(ctx, op, ev.User, flows.GitLabApprove, p.Source)
	case NameReject:
		actErr = x.cfg.Engine.DecideInGitLab(ctx, op, ev.User, flows.GitLabReject, p.Source)
	}
	var na *flows.NotApplicableError
	if errors.As(actErr, &na) {
		if err := x.cfg.Engine.Refuse(ctx, op, p, na.Reason); err != nil {
			return err
		}
		return reply(templates.ReplyRefused, templates.RefusedReply{Name: cmd.Name, Who: cmd.WhoText, Reason: na.Reason})
	}
	return actErr
}

func (x *Executor) robotName(ctx context.Context) string {
	u, err := x.cfg.Access.CurrentUser(ctx)
	if err != nil {
		return ""
	}
	return u.Username
}

// usable lists the commands the commenter may run now on op.
func (x *Executor) usable(ctx context.Context, ev platform.HookEvent, op store.Operation) []Command {
	var out []Command
	for _, c := range Registry() {
		if ok, _, err := x.allowed(ctx, ev, op, c); err == nil && ok {
			out = append(out, c)
		}
	}
	return out
}

// Access levels (GitLab doc/api/members.md).
const (
	accessDeveloper = 30
)

// allowed decides whether the commenter holds one of cmd's roles. GitLab
// is read only when a role needs it. Commands that lead to a merge (/retry)
// also need Developer access or more, whoever asks, unless an operator.
func (x *Executor) allowed(ctx context.Context, ev platform.HookEvent, op store.Operation, cmd Command) (bool, string, error) {
	user := ev.User
	operator := slices.Contains(x.cfg.Operators, user.Username)
	access := -1
	memberAccess := func() (int, error) {
		if access < 0 {
			a, err := x.cfg.Access.MemberAccess(ctx, ev.ProjectID, user.ID)
			if err != nil {
				return 0, fmt.Errorf("reading access of %s: %w", user.Username, err)
			}
			access = a
		}
		return access, nil
	}
	holds := false
	for _, r := range cmd.Who {
		switch r {
		case RoleAnyone:
			holds = true
		case RoleOperator:
			holds = holds || operator
		case RoleRequester:
			holds = holds || user.Username == op.RequestedBy
		case RoleDeveloper:
			if !holds {
				a, err := memberAccess()
				if err != nil {
					return false, "", err
				}
				holds = a >= accessDeveloper
			}
		case RoleApprover:
			if !holds {
				ok, err := x.cfg.Engine.IsApprover(ctx, op, user)
				if err != nil {
					return false, "", err
				}
				holds = ok
			}
		case RoleAuthor:
			if !holds && op.MRIID > 0 {
				mr, err := x.cfg.Access.MergeRequest(ctx, ev.ProjectID, op.MRIID, false)
				if err != nil {
					return false, "", fmt.Errorf("reading merge request author: %w", err)
				}
				holds = mr.Author.ID == user.ID
			}
		}
	}
	reason := fmt.Sprintf("/%s needs: %s", cmd.Name, cmd.WhoText)
	if !holds {
		return false, reason, nil
	}
	if leadsToMerge(cmd) && !operator {
		// The right to merge into the target branch: Developer access, or
		// the protected branch's merge level when that is higher.
		need := accessDeveloper
		if op.TargetBranch != "" {
			level, protected, err := x.cfg.Access.MergeAccessLevel(ctx, ev.ProjectID, op.TargetBranch)
			if err != nil {
				return false, "", err
			}
			if protected && level > need {
				need = level
			}
		}
		a, err := memberAccess()
		if err != nil {
			return false, "", err
		}
		if a < need {
			return false, fmt.Sprintf("/%s leads to a merge into %s, which needs access level %d (%s) or more",
				cmd.Name, op.TargetBranch, need, accessName(need)), nil
		}
	}
	return true, "", nil
}

func accessName(level int) string {
	switch {
	case level >= 50:
		return "Owner"
	case level >= 40:
		return "Maintainer"
	case level >= 30:
		return "Developer"
	case level >= 20:
		return "Reporter"
	}
	return "Guest"
}

func leadsToMerge(c Command) bool { return c.Name == NameRetry || c.Name == NameResume }

func helpOf(cmds []Command) []templates.CommandHelp {
	out := make([]templates.CommandHelp, 0, len(cmds))
	for _, c := range cmds {
		out = append(out, templates.CommandHelp{Usage: c.Usage, Description: c.Description, Who: c.WhoText})
	}
	return out
}

// CommandsFor lists the commands usable now on op (status comment), by
// step alone (who may run each is shown beside it).
func CommandsFor(op store.Operation, st flows.Step) []templates.CommandHelp {
	var out []Command
	for _, c := range Registry() {
		switch c.Name {
		case NameRetry:
			if st.Retryable() {
				out = append(out, c)
			}
		case NameResume:
			if st.Resumable() {
				out = append(out, c)
			}
		case NameCancel:
			if st.Cancellable() {
				out = append(out, c)
			}
		case NameStatus, NameHelp:
			out = append(out, c)
		case NameApprove, NameReject:
			if op.TicketID == flows.GitLabTicket && op.Status == store.StatusApprovalSent {
				out = append(out, c)
			}
		}
	}
	return helpOf(out)
}
