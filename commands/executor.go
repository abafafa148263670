package commands

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"changebot/flows/rules"
	"changebot/internal/textcheck"
	"changebot/platform"
	"changebot/templates"
)

// Change is what the command layer knows of a change: enough to decide who
// may run a command and which commands apply now. The delivery router fills
// it from the stored operation.
type Change struct {
	// OperationID is the change's id ("op_…").
	OperationID string
	// RequestedBy is the requester's GitLab username.
	RequestedBy string
	// TargetBranch is the branch the MR merges into ("" before it is known).
	TargetBranch string
	// Status is the binding status, for refusal texts.
	Status string
	// Step is the change's current step.
	Step rules.Step
	// MRIID is the merge request's iid, 0 before it is opened.
	MRIID int64
	// AwaitsGitLabApproval reports that the change waits for approvers in
	// GitLab (in-GitLab approval mode, approval sent).
	AwaitsGitLabApproval bool
	// ApprovalSystem reports that the change's approvals come from the
	// external approval system (approval.provider external), where
	// /approve and /reject in a comment cannot decide.
	ApprovalSystem bool
	// TicketID and TicketURL are the change's ticket in the approval
	// system and its page (the system's optional ticket_url); "" while
	// unknown.
	TicketID, TicketURL string
	// Platform is where the change's request lives: "gitlab" (also "") or
	// "github"; the commands' texts follow it (RegistryOn).
	Platform string
}

// QueueState is the merge queue of a change's target branch as /freeze
// and /unfreeze left it.
type QueueState struct {
	// Branch is the queue's target branch.
	Branch string
	// Frozen reports whether it is frozen; FrozenBy froze it (the first
	// freeze stays), for FrozenReason.
	Frozen                 bool
	FrozenBy, FrozenReason string
}

// Flow is what the executor needs from the flow engine; every method
// takes the change's operation id. The delivery router implements it over
// *flows.Engine.
type Flow interface {
	// FindByMR returns the newest change of merge request iid in projectID
	// and whether there is one.
	FindByMR(ctx context.Context, projectID, iid int64) (Change, bool, error)
	// Act runs retry, resume or cancel (flows.Engine.Act).
	Act(ctx context.Context, operationID string, a rules.Action, p rules.ActionParams) error
	// Refuse records a refused command in the change's history.
	Refuse(ctx context.Context, operationID string, p rules.ActionParams, reason string) error
	// RefreshNow re-renders the change's status comment at once.
	RefreshNow(ctx context.Context, operationID string) error
	// Reply posts a comment on the merge request as the robot.
	Reply(ctx context.Context, projectID, iid int64, body string) error
	// IsApprover reports whether user approves the change in GitLab.
	IsApprover(ctx context.Context, operationID string, user platform.User) (bool, error)
	// DecideInGitLab records an approver's /approve or /reject.
	DecideInGitLab(ctx context.Context, operationID string, user platform.User, decision, source string) error
	// FreezeQueue freezes (frozen) or unfreezes the merge queue of the
	// change's project and target branch as actor for reason
	// (flows.Engine.FreezeQueue).
	FreezeQueue(ctx context.Context, operationID string, frozen bool, actor, reason string) (QueueState, error)
}

// Adopter adopts a developer's merge request for the "merge" command
// (flows.Engine.Adopt behind routing's adapter).
type Adopter interface {
	// AdoptsIn reports whether adoption is on in project projectID.
	AdoptsIn(ctx context.Context, projectID int64) (bool, error)
	// Adopt adopts merge request iid for by from source ("command:<note
	// id>"); refusal, when not "", is the reply saying why it was not
	// adopted (nothing was created).
	Adopt(ctx context.Context, projectID, iid int64, by, source string) (refusal string, err error)
}

// NoteStore records which notes ran (once per note id) and per-user
// activity. The delivery router implements it over the store.
type NoteStore interface {
	// ClaimNote records note noteID as seen; false when it already was.
	ClaimNote(ctx context.Context, projectID, noteID, iid int64, author string) (bool, error)
	// SetNoteOutcome records what a claimed note did.
	SetNoteOutcome(ctx context.Context, projectID, noteID int64, outcome string) error
	// NoteActivity counts author's notes with commands since, and how many
	// of them were rate limited.
	NoteActivity(ctx context.Context, author string, since time.Time) (notes, limited int, err error)
	// ClaimOnce claims the one-off key; false when it was claimed before
	// (one rate-limit reply per user and window, across replicas).
	ClaimOnce(ctx context.Context, key string) (bool, error)
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
	Flow     Flow
	Notes    NoteStore
	Access   Access
	Renderer Replier
	// Adopter adopts a developer's merge request on "@robot merge" (issue
	// 25 point 1); nil: the command is answered as on any merge request
	// without a change.
	Adopter Adopter
	// Platform is the installation's platform, "gitlab" (also "") or
	// "github": the replies speak its words (templates' Platform).
	Platform string
	// Operators are the usernames (GitLab) or logins (GitHub) with the operator role.
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

// HandleNote runs the commands of one MR comment (a decoded Note Hook of
// stored delivery deliveryID) and returns the delivery's outcome (one of the
// Outcome constants).
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
	// A merge request changebot did not open: a bare slash word there is
	// most likely meant for another bot of the project (/lgtm, /hold), so
	// only commands that address changebot by name ("@changebot status")
	// are answered, and the others are not claimed or counted against the
	// author's rate limit (issue 21.10).
	op, found, err := x.cfg.Flow.FindByMR(ctx, ev.ProjectID, n.MRIID)
	if err != nil {
		return "", err
	}
	if !found {
		invs = slices.DeleteFunc(invs, func(inv Invocation) bool { return !inv.Addressed })
		if len(invs) == 0 {
			return OutcomeIgnored, nil
		}
	}
	claimed, err := x.cfg.Notes.ClaimNote(ctx, ev.ProjectID, n.ID, n.MRIID, ev.User.Username)
	if err != nil {
		return "", err
	}
	if !claimed {
		return OutcomeSeen, nil
	}
	outcome, err := x.run(ctx, ev, invs, op, found)
	if err != nil {
		return "", err
	}
	if err := x.cfg.Notes.SetNoteOutcome(ctx, ev.ProjectID, n.ID, outcome); err != nil {
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

// run answers the claimed invocations of one note; op is the merge
// request's change when found.
func (x *Executor) run(ctx context.Context, ev platform.HookEvent, invs []Invocation, op Change, found bool) (string, error) {
	n := ev.Note
	reply := func(kind string, data any) error {
		body, err := x.cfg.Renderer.Reply(kind, data)
		if err != nil {
			return err
		}
		return x.cfg.Flow.Reply(ctx, ev.ProjectID, n.MRIID, body)
	}
	// Per-user rate limit; the excess is answered once per window.
	notes, limited, err := x.cfg.Notes.NoteActivity(ctx, ev.User.Username, x.now().Add(-x.cfg.RateWindow))
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
		first, err := x.cfg.Notes.ClaimOnce(ctx, key)
		if err != nil {
			return "", err
		}
		if first && limited == 0 {
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
		if err := reply(templates.ReplyUnknownCommand, templates.UnknownCommandReply{Names: unknown, Commands: helpOf(RegistryOn(x.cfg.Platform))}); err != nil {
			return "", err
		}
	}
	if len(known) == 0 {
		return OutcomeRan, nil
	}
	if !found && x.cfg.Adopter != nil && slices.ContainsFunc(known, func(inv Invocation) bool { return rules.AdoptCommand(inv.Name) }) {
		on, err := x.cfg.Adopter.AdoptsIn(ctx, ev.ProjectID)
		if err != nil {
			return "", err
		}
		if on {
			return x.runMerge(ctx, ev, reply)
		}
	}
	if !found {
		names := make([]string, len(known))
		for i, k := range known {
			names[i] = k.Name
		}
		return OutcomeNoChange, reply(templates.ReplyNoChange, templates.NoChangeReply{Names: names, Platform: x.cfg.Platform})
	}
	for _, inv := range known {
		if err := x.runOne(ctx, ev, op, inv, reply); err != nil {
			return "", err
		}
		if op2, found, err := x.cfg.Flow.FindByMR(ctx, ev.ProjectID, n.MRIID); err == nil && found {
			op = op2
		}
	}
	return OutcomeRan, nil
}

// Request is one command to run, handed to its registry entry's handler.
type Request struct {
	// Flow acts on the change.
	Flow Flow
	// Change is the change of the note's merge request, as read before
	// this command.
	Change Change
	// User is the note's author.
	User platform.User
	// Params say who asked and from which note (recorded on events).
	Params rules.ActionParams
	// BotUsername is the robot's username (help replies show mentions).
	BotUsername string
	// Args are the words after the command's name (Invocation.Args).
	Args  []string
	x     *Executor
	ev    platform.HookEvent
	reply func(kind string, data any) error
}

// maxReasonChars bounds the reason a command records (Request.Reason), in
// characters, as the REST API bounds its reasons.
const maxReasonChars = 500

// Reason is the words after the command's name as one line of text: joined
// by single spaces, without control or bidirectional formatting characters
// (which would show as other text on a page or a terminal), cut to
// maxReasonChars with "…"; "" when there are none.
func (r *Request) Reason() string {
	s := strings.Map(func(c rune) rune {
		if textcheck.KindOf(c) != "" {
			return -1
		}
		return c
	}, strings.Join(r.Args, " "))
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) > maxReasonChars {
		s = string([]rune(s)[:maxReasonChars-1]) + "…"
	}
	return s
}

// Reply answers on the note's merge request with the reply template kind.
func (r *Request) Reply(kind string, data any) error { return r.reply(kind, data) }

// Usable lists the commands the note's author may run now on the change.
func (r *Request) Usable(ctx context.Context) []Command { return r.x.usable(ctx, r.ev, r.Change) }

func (x *Executor) runOne(ctx context.Context, ev platform.HookEvent, op Change, inv Invocation,
	reply func(string, any) error) error {
	cmd, _ := lookupOn(x.cfg.Platform, inv.Name)
	p := rules.ActionParams{Actor: ev.User.Username, Source: fmt.Sprintf("command:%d", ev.Note.ID), Command: cmd.Name}
	refuse := func(r templates.RefusedReply, recorded string) error {
		if err := x.cfg.Flow.Refuse(ctx, op.OperationID, p, recorded); err != nil {
			return err
		}
		r.Name, r.Who, r.Platform = cmd.Name, cmd.WhoText, x.cfg.Platform
		// The reply names the command once: "/retry applies to …" reads
		// "it applies to …" after "`/retry` was not run …".
		if rest, ok := strings.CutPrefix(r.Reason, "/"+cmd.Name+" "); ok {
			r.Reason = "it " + rest
		}
		return reply(templates.ReplyRefused, r)
	}
	if (cmd.Name == NameApprove || cmd.Name == NameReject) && op.ApprovalSystem {
		return refuse(templates.RefusedReply{Because: templates.BecauseApprovalSystem, TicketID: op.TicketID, TicketURL: op.TicketURL},
			"approvals of this change come from the approval system")
	}
	if reason := stateRefusal(op, cmd); reason != "" {
		return refuse(templates.RefusedReply{Because: templates.BecauseState, Reason: reason}, reason)
	}
	ok, because, reason, err := x.allowed(ctx, ev, op, cmd)
	if err != nil {
		return err
	}
	if !ok {
		return refuse(templates.RefusedReply{Because: because, Reason: reason}, reason)
	}
	req := &Request{Flow: x.cfg.Flow, Change: op, User: ev.User, Params: p, Args: inv.Args, x: x, ev: ev, reply: reply}
	if cmd.Name == NameHelp {
		req.BotUsername = x.robotName(ctx)
	}
	err = cmd.Run(ctx, req)
	var na *rules.NotApplicableError
	if errors.As(err, &na) {
		return refuse(templates.RefusedReply{Because: templates.BecauseState, Reason: na.Reason}, na.Reason)
	}
	return err
}

// appliesNow reports whether cmd applies to c in its current state, whoever
// asks (the step table's Retryable, Resumable and Cancellable; /approve and
// /reject while the change waits for approvers in GitLab). /status and
// /help always apply.
func appliesNow(c Change, cmd Command) bool {
	return rules.CommandApplies(cmd.Name, c.Step, c.AwaitsGitLabApproval)
}

// stateRefusal says why cmd cannot run on c in its state, or "" when it may
// (as far as the step table tells: the flow re-checks under its lock).
// /approve and /reject are left to the flow, which records an approval given
// before the change waits for it.
func stateRefusal(c Change, cmd Command) string {
	if appliesNow(c, cmd) {
		return ""
	}
	state := fmt.Sprintf("%s (%s)", c.Status, c.Step.Name)
	switch cmd.Name {
	case NameRetry:
		return "/retry applies to a failed change; this one is " + state
	case NameResume:
		return "/resume applies to a waiting or interrupted change; this one is " + state
	case NameCancel:
		return "/cancel applies to a change in progress; this one is " + state
	case NameMerge:
		return "merge hands over a merge request no change carries; this one's change is " + state
	}
	return ""
}

// runMerge runs "@robot merge" on a merge request no change carries, in a
// project where adoption is on: a commenter without write access (GitLab
// Developer, access level 30, or GitHub's write permission: MemberAccess)
// gets one reply refusing it, naming why, and nothing else happens;
// otherwise the merge request is adopted (Adopter.Adopt), and a refused
// adoption is answered with its reason.
func (x *Executor) runMerge(ctx context.Context, ev platform.HookEvent, reply func(string, any) error) (string, error) {
	cmd, _ := lookupOn(x.cfg.Platform, NameMerge)
	a, err := x.cfg.Access.MemberAccess(ctx, ev.ProjectID, ev.User.ID)
	if err != nil {
		return "", fmt.Errorf("reading access of %s: %w", ev.User.Username, err)
	}
	if a < accessDeveloper {
		reason := fmt.Sprintf("merge needs access level %d (%s) or more on the project", accessDeveloper, accessName(accessDeveloper))
		if x.cfg.Platform == "github" {
			reason = fmt.Sprintf("merge needs %s permission on the repository or more", githubPermission(accessDeveloper))
		}
		return OutcomeRan, reply(templates.ReplyRefused, templates.RefusedReply{Name: cmd.Name, Because: templates.BecauseAccess,
			Who: cmd.WhoText, Reason: reason, Platform: x.cfg.Platform})
	}
	refusal, err := x.cfg.Adopter.Adopt(ctx, ev.ProjectID, ev.Note.MRIID, ev.User.Username, fmt.Sprintf("command:%d", ev.Note.ID))
	if err != nil {
		return "", err
	}
	if refusal != "" {
		return OutcomeRan, x.cfg.Flow.Reply(ctx, ev.ProjectID, ev.Note.MRIID, refusal)
	}
	return OutcomeRan, nil
}

func (x *Executor) robotName(ctx context.Context) string {
	u, err := x.cfg.Access.CurrentUser(ctx)
	if err != nil {
		return ""
	}
	return u.Username
}

// usable lists the commands the commenter may run now on op: those that
// apply in its state (appliesNow) and that the commenter's role and access
// allow; /approve and /reject never when approvals come from the approval
// system.
func (x *Executor) usable(ctx context.Context, ev platform.HookEvent, op Change) []Command {
	var out []Command
	for _, c := range RegistryOn(x.cfg.Platform) {
		if !appliesNow(op, c) || (c.Name == NameApprove || c.Name == NameReject) && op.ApprovalSystem {
			continue
		}
		if ok, _, _, err := x.allowed(ctx, ev, op, c); err == nil && ok {
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
// also need Developer access or more, whoever asks, unless an operator. A
// refusal comes with its kind (templates.BecauseRole or BecauseAccess) and
// the reason recorded in the change's history.
func (x *Executor) allowed(ctx context.Context, ev platform.HookEvent, op Change, cmd Command) (ok bool, because, reason string, err error) {
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
					return false, "", "", err
				}
				holds = a >= accessDeveloper
			}
		case RoleApprover:
			if !holds {
				ok, err := x.cfg.Flow.IsApprover(ctx, op.OperationID, user)
				if err != nil {
					return false, "", "", err
				}
				holds = ok
			}
		case RoleAuthor:
			if !holds && op.MRIID > 0 {
				mr, err := x.cfg.Access.MergeRequest(ctx, ev.ProjectID, op.MRIID, false)
				if err != nil {
					return false, "", "", fmt.Errorf("reading merge request author: %w", err)
				}
				holds = mr.Author.ID == user.ID
			}
		}
	}
	if !holds {
		return false, templates.BecauseRole, fmt.Sprintf("/%s needs: %s", cmd.Name, cmd.WhoText), nil
	}
	if leadsToMerge(cmd) && !operator {
		// The right to merge into the target branch: Developer access, or
		// the protected branch's merge level when that is higher.
		need := accessDeveloper
		if op.TargetBranch != "" {
			level, protected, err := x.cfg.Access.MergeAccessLevel(ctx, ev.ProjectID, op.TargetBranch)
			if err != nil {
				return false, "", "", err
			}
			if protected && level > need {
				need = level
			}
		}
		a, err := memberAccess()
		if err != nil {
			return false, "", "", err
		}
		if a < need {
			if x.cfg.Platform == "github" {
				return false, templates.BecauseAccess, fmt.Sprintf("/%s leads to a merge into %s, which needs %s permission on the repository or more",
					cmd.Name, op.TargetBranch, githubPermission(need)), nil
			}
			return false, templates.BecauseAccess, fmt.Sprintf("/%s leads to a merge into %s, which needs access level %d (%s) or more",
				cmd.Name, op.TargetBranch, need, accessName(need)), nil
		}
	}
	return true, "", "", nil
}

// githubPermission names the GitHub repository permission that maps onto
// access level (platform/github.AccessLevelOf: read and triage 20, write
// 30, maintain 40, admin 50).
func githubPermission(level int) string {
	switch {
	case level >= 50:
		return "admin"
	case level >= 40:
		return "maintain"
	case level >= 30:
		return "write"
	}
	return "read"
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

// CommandsFor lists the commands usable now on c (the status comment's
// list: rules.CommandsNow), by its step alone (who may run each is shown
// beside it).
func CommandsFor(c Change) []templates.CommandHelp {
	return commandHelpOf(rules.CommandsNow(c.Step, c.AwaitsGitLabApproval, c.Platform))
}

// commandHelpOf is docs as the templates show them.
func commandHelpOf(docs []rules.CommandDoc) []templates.CommandHelp {
	out := make([]templates.CommandHelp, 0, len(docs))
	for _, d := range docs {
		out = append(out, templates.CommandHelp{Usage: d.Usage, Description: d.Description, Who: d.WhoText})
	}
	return out
}
