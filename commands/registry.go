package commands

import (
	"context"
	"strings"

	"changebot/flows/rules"
	"changebot/templates"
)

// Role names a group of people who may run a command. Roles are persisted
// (in refusal events and configuration) as these exact strings; never rename
// one.
type Role string

// The roles of issue 3's command table. Whether a commenter holds a role is
// decided by the caller when the command runs, from configuration (operators,
// approvers per project) and GitLab access (membership, protected branches).
const (
	// RoleAnyone is anyone who can see the merge request.
	RoleAnyone Role = "anyone"
	// RoleRequester is the person (or portal account) who submitted the change.
	RoleRequester Role = "requester"
	// RoleAuthor is the merge request's author. Issue 3 lets the MR author
	// /retry; it differs from the requester when a developer opens the MR in
	// a watched project.
	RoleAuthor Role = "author"
	// RoleDeveloper is a project member with Developer access or more
	// (inherited membership included).
	RoleDeveloper Role = "developer"
	// RoleApprover is a configured approver of the project (in-GitLab
	// approval mode).
	RoleApprover Role = "approver"
	// RoleOperator is a configured changebot operator.
	RoleOperator Role = "operator"
)

// Command names (flows/rules' vocabulary). They are persisted (in events,
// job arguments and configuration) as these exact strings: lower-case,
// without the slash.
const (
	NameRetry   = rules.CommandRetry
	NameResume  = rules.CommandResume
	NameStatus  = rules.CommandStatus
	NameCancel  = rules.CommandCancel
	NameApprove = rules.CommandApprove
	NameReject  = rules.CommandReject
	NameHelp    = rules.CommandHelp
	// NameFreeze and NameUnfreeze act on the merge queue of the change's
	// target branch.
	NameFreeze   = rules.CommandFreeze
	NameUnfreeze = rules.CommandUnfreeze
	// NameMerge adopts a developer's merge request (issue 25 point 1).
	NameMerge = rules.CommandMerge
)

// Command is one entry of the command registry: what a person types, what it
// does, who may run it and the handler that runs it (STYLE rule 21).
type Command struct {
	// Name is the persisted command name, lower-case without the slash,
	// for example "retry".
	Name string
	// Usage is how to type the command, for example "/retry".
	Usage string
	// Description says what the command does, in one sentence for people.
	Description string
	// Who lists the roles that may run the command; holding any one of
	// them is enough. RoleAnyone means no check.
	Who []Role
	// WhoText says who may run the command in words, for help replies,
	// refusals and the README.
	WhoText string
	// ChangesState reports whether the command moves the change (through
	// the one transition function) rather than only reading it.
	ChangesState bool
	// Run runs the command once its caller's permission was checked. A
	// *rules.NotApplicableError means "not in the change's current state"
	// and is answered with a refusal; other errors make the note's
	// delivery job retry.
	Run Handler
}

// Handler runs one command of a note on the change of its merge request.
type Handler func(ctx context.Context, r *Request) error

// act is the handler of retry, resume and cancel: flows.Engine.Act, the
// one dispatch the REST API uses too.
// act runs a on the change, with the words after the command as the
// person's reason ("/cancel wrong file": "cancelled by olivia: wrong
// file").
func act(a rules.Action) Handler {
	return func(ctx context.Context, r *Request) error {
		p := r.Params
		p.Reason = r.Reason()
		return r.Flow.Act(ctx, r.Change.OperationID, a, p)
	}
}

func refreshStatus(ctx context.Context, r *Request) error {
	return r.Flow.RefreshNow(ctx, r.Change.OperationID)
}

func decide(decision string) Handler {
	return func(ctx context.Context, r *Request) error {
		return r.Flow.DecideInGitLab(ctx, r.Change.OperationID, r.User, decision, r.Params.Source)
	}
}

// freeze is the handler of /freeze (frozen) and /unfreeze: the merge queue
// of the change's project and target branch, frozen or unfrozen by the
// commenter for the words after the command (Reason), and a reply saying
// how the queue is now.
func freeze(frozen bool) Handler {
	return func(ctx context.Context, r *Request) error {
		if r.Change.TargetBranch == "" {
			return &rules.NotApplicableError{Reason: "/" + r.Params.Command + " acts on the merge queue of the change's target branch, which is not known yet"}
		}
		reason := r.Reason()
		if reason == "" && frozen {
			reason = "/freeze on " + rules.WordsOf(r.Change.Platform).Ref(r.Change.MRIID)
		}
		q, err := r.Flow.FreezeQueue(ctx, r.Change.OperationID, frozen, r.Params.Actor, reason)
		if err != nil {
			return err
		}
		return r.Reply(templates.ReplyQueue, templates.QueueReply{Branch: q.Branch, Frozen: q.Frozen, By: q.FrozenBy,
			Reason: q.FrozenReason, Already: q.Frozen && (q.FrozenBy != r.Params.Actor || q.FrozenReason != reason), Platform: r.Change.Platform})
	}
}

// adoptedAlready is the handler of "merge" on a merge request a change
// carries already: nothing to adopt (the executor's runMerge adopts one no
// change carries).
func adoptedAlready(_ context.Context, r *Request) error {
	return &rules.NotApplicableError{Reason: "merge hands over a merge request no change carries; this one's change is " + r.Change.Status}
}

func help(ctx context.Context, r *Request) error {
	return r.Reply(templates.ReplyHelp, templates.HelpReply{Commands: helpOf(r.Usable(ctx)), BotUsername: r.BotUsername})
}

// Registry returns every command changebot understands, in the order help
// lists them: retry, resume, status, cancel, approve, reject, freeze,
// unfreeze, help. The texts follow the command table of issue 3 and live
// in flows/rules (rules.CommandDocs); who may run each and its handler are
// here (runs).
// Each call returns a fresh slice the caller may modify; registration is
// explicit (STYLE rule 21): adding a command means adding it to both.
func Registry() []Command { return RegistryOn("") }

// runOf is who may run command name, whether it changes the change's
// state, and its handler; the texts are flows/rules' (rules.CommandDocs).
func runOf(name string) (who []Role, changesState bool, run Handler) {
	switch name {
	case NameRetry:
		return []Role{RoleRequester, RoleAuthor, RoleDeveloper}, true, act(rules.ActionRetry)
	case NameResume:
		return []Role{RoleOperator}, true, act(rules.ActionResume)
	case NameStatus:
		return []Role{RoleAnyone}, false, refreshStatus
	case NameCancel:
		return []Role{RoleRequester, RoleOperator}, true, act(rules.ActionCancel)
	case NameApprove:
		return []Role{RoleApprover}, true, decide(rules.GitLabApprove)
	case NameReject:
		return []Role{RoleApprover}, true, decide(rules.GitLabReject)
	case NameFreeze:
		// As /resume: operators only (a freeze holds every change of the
		// branch).
		return []Role{RoleOperator}, false, freeze(true)
	case NameUnfreeze:
		return []Role{RoleOperator}, false, freeze(false)
	case NameHelp:
		return []Role{RoleAnyone}, false, help
	case NameMerge:
		// Run by the executor where no change exists (runMerge); on a
		// change it refuses as not applicable.
		return []Role{RoleDeveloper}, true, adoptedAlready
	}
	return nil, false, nil
}

// RegistryOn is Registry in the words of platform ("gitlab", also "", or
// "github"): on GitHub the texts in GitHub's words (rules.CommandDocs).
// Registry itself is GitLab's (the README's command table).
func RegistryOn(platform string) []Command {
	docs := rules.CommandDocs(platform)
	out := make([]Command, 0, len(docs))
	for _, d := range docs {
		who, changes, run := runOf(d.Name)
		out = append(out, Command{Name: d.Name, Usage: d.Usage, Description: d.Description, Who: who,
			WhoText: d.WhoText, ChangesState: changes, Run: run})
	}
	return out
}

// lookupOn is Lookup in the words of platform (RegistryOn).
func lookupOn(platform, name string) (Command, bool) {
	name = strings.ToLower(strings.TrimPrefix(name, "/"))
	for _, c := range RegistryOn(platform) {
		if c.Name == name {
			return c, true
		}
	}
	return Command{}, false
}

// Lookup returns the registry entry for name and whether it exists. Name is
// matched case-insensitively and may carry a leading slash ("/Retry" finds
// "retry").
func Lookup(name string) (Command, bool) { return lookupOn("", name) }

// Known reports whether name is a registered command (see Lookup for how the
// name is matched). The parser returns unknown names too, so that the caller
// can answer them with one reply listing the valid commands (issue 3).
func Known(name string) bool {
	_, ok := Lookup(name)
	return ok
}

// HelpMarkdown renders cmds as a Markdown table with the columns
// "| command | what it does | who |", one row per command in the given order,
// ending with a newline. Pipes and line breaks in the texts are escaped so
// that a row never breaks the table. An empty cmds gives the header alone.
func HelpMarkdown(cmds []Command) string {
	var b strings.Builder
	b.WriteString("| command | what it does | who |\n")
	b.WriteString("| --- | --- | --- |\n")
	for _, c := range cmds {
		b.WriteString("| `")
		b.WriteString(cell(c.Usage))
		b.WriteString("` | ")
		b.WriteString(cell(c.Description))
		b.WriteString(" | ")
		b.WriteString(cell(c.WhoText))
		b.WriteString(" |\n")
	}
	return b.String()
}

// ReadmeTable returns the command table of the README: HelpMarkdown of the
// whole Registry. A test of the README compares its command section with it.
func ReadmeTable() string {
	return HelpMarkdown(Registry())
}

// cell makes s safe inside one Markdown table cell: pipes are escaped and
// line breaks become spaces.
func cell(s string) string {
	s = strings.ReplaceAll(s, "\r\n", " ")
	s = strings.ReplaceAll(s, "\n", " ")
	s = strings.ReplaceAll(s, "\r", " ")
	return strings.ReplaceAll(s, "|", `\|`)
}
