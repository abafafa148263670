package rules

// The comment commands' vocabulary (issue 20 point 2): their persisted
// names, what a person reads about each (usage, what it does, who may run
// it) in each platform's words, and when each applies to a change. Package
// commands runs them (their handlers and the permission checks); the
// status comment lists the ones that apply now from here, with no callback
// into commands.

// Command names. They are persisted (in events, job arguments and
// configuration) as these exact strings: lower-case, without the slash.
const (
	CommandRetry   = "retry"
	CommandResume  = "resume"
	CommandStatus  = "status"
	CommandCancel  = "cancel"
	CommandApprove = "approve"
	CommandReject  = "reject"
	CommandHelp    = "help"
	// CommandFreeze and CommandUnfreeze act on the merge queue of the
	// change's target branch, not on the change (QueueCommand).
	CommandFreeze   = "freeze"
	CommandUnfreeze = "unfreeze"
	// CommandMerge ("@robot merge") asks the robot to adopt a merge
	// request a developer opened (issue 25 point 1): it applies only to a
	// merge request no change carries (AdoptCommand).
	CommandMerge = "merge"
)

// CommandDoc is what a person reads about one command: Usage ("/retry"),
// Description (one sentence) and WhoText (who may run it, in words).
type CommandDoc struct {
	Name, Usage, Description, WhoText string
}

// gitlabCommands are the commands in GitLab's words, in the order the
// README's command table and /help list them.
var gitlabCommands = []CommandDoc{
	{Name: CommandRetry, Usage: "/retry",
		Description: "Re-run the failed step of this merge request's change: after CREATE_FAILED a new pipeline " +
			"for the head (or recreate what is missing), after HANDLE_FAILED handle it again " +
			"(for example once a rebase conflict is resolved).",
		WhoText: "the change's requester, the MR author, project members with Developer access or more"},
	{Name: CommandResume, Usage: "/resume",
		Description: "Continue a change parked in a pending step (pipeline outcome unknown, rebase stuck, " +
			"interrupted job) by running its current step again; or a change whose merge request a person closed " +
			"(MR_CLOSED), once it is reopened: a new pipeline and fresh approvals of its head, then the merge.",
		WhoText: "operators only"},
	{Name: CommandStatus, Usage: "/status", Description: "Re-render the status comment now.",
		WhoText: "anyone who can see the MR"},
	{Name: CommandCancel, Usage: "/cancel",
		Description: "Close the change: close the merge request unless it is already closed or merged; " +
			"the change ends CLOSED and may be submitted again.",
		WhoText: "the change's requester and operators"},
	{Name: CommandApprove, Usage: "/approve", Description: "Approve the change (in-GitLab approval mode).",
		WhoText: "approvers"},
	{Name: CommandReject, Usage: "/reject", Description: "Reject the change (in-GitLab approval mode).",
		WhoText: "approvers"},
	{Name: CommandFreeze, Usage: "/freeze [reason]",
		Description: "Freeze the merge queue of this merge request's target branch: no change of the project takes its head " +
			"(to be rebased, tested and merged) until it is unfrozen; the one merging finishes. The words after the command " +
			"are the reason, recorded with the freeze.",
		WhoText: "operators only"},
	{Name: CommandUnfreeze, Usage: "/unfreeze [reason]",
		Description: "Unfreeze the merge queue of this merge request's target branch: the first change waiting moves on.",
		WhoText:     "operators only"},
	{Name: CommandHelp, Usage: "/help", Description: "List the commands you may run now, on this change, in its current state.",
		WhoText: "anyone"},
	{Name: CommandMerge, Usage: "@changebot merge",
		Description: "Hand a merge request you opened over to changebot (in a project where adoption is on): it becomes a change " +
			"like any other, approved, tested on its head, queued and merged; removing the label or /cancel lets it go " +
			"without closing it.",
		WhoText: "project members with Developer access or more"},
}

// githubCommandTexts are the descriptions and who-texts of the commands
// that speak of GitLab's things, in GitHub's words: the pull request, its
// checks, collaborators' repository permissions (issue 15). "" keeps
// GitLab's.
var githubCommandTexts = map[string]struct{ Description, WhoText string }{
	CommandRetry: {
		Description: "Re-run the failed step of this pull request's change: after CREATE_FAILED a re-run of the checks " +
			"of the head (or recreate what is missing), after HANDLE_FAILED handle it again " +
			"(for example once a conflict is resolved).",
		WhoText: "the change's requester, the pull request's author, collaborators with write permission or more",
	},
	CommandResume: {
		Description: "Continue a change parked in a pending step (checks outcome unknown, update of the branch stuck, " +
			"interrupted job) by running its current step again; or a change whose pull request a person closed " +
			"(MR_CLOSED), once it is reopened: a re-run of the checks and fresh approvals of its head, then the merge.",
	},
	CommandStatus: {WhoText: "anyone who can see the pull request"},
	CommandCancel: {
		Description: "Close the change: close the pull request unless it is already closed or merged; " +
			"the change ends CLOSED and may be submitted again.",
	},
	CommandApprove: {Description: "Approve the change (in-GitHub approval mode)."},
	CommandReject:  {Description: "Reject the change (in-GitHub approval mode)."},
	CommandFreeze: {
		Description: "Freeze the merge queue of this pull request's base branch: no change of the repository takes its head " +
			"(to be updated, checked and merged) until it is unfrozen; the one merging finishes. The words after the command " +
			"are the reason, recorded with the freeze.",
	},
	CommandUnfreeze: {Description: "Unfreeze the merge queue of this pull request's base branch: the first change waiting moves on."},
	CommandMerge: {
		Description: "Hand a pull request you opened over to changebot (in a repository where adoption is on): it becomes a change " +
			"like any other, approved, checked on its head, queued and merged; removing the label or /cancel lets it go " +
			"without closing it.",
		WhoText: "collaborators with write permission or more",
	},
}

// CommandDocs returns every command in the words of platform ("gitlab",
// also "", or "github"), in the README's order; a fresh slice per call.
func CommandDocs(platform string) []CommandDoc {
	out := make([]CommandDoc, len(gitlabCommands))
	copy(out, gitlabCommands)
	if platform != "github" {
		return out
	}
	for i, c := range out {
		t := githubCommandTexts[c.Name]
		if t.Description != "" {
			out[i].Description = t.Description
		}
		if t.WhoText != "" {
			out[i].WhoText = t.WhoText
		}
	}
	return out
}

// CommandApplies reports whether command name may run on a change at step
// (as far as the step table tells: the flow re-checks under its lock):
// /retry on a retryable step, /resume on a resumable one, /cancel on a
// cancellable one, /approve and /reject while the change waits for an
// approval given on the platform (awaitsPlatformApproval,
// AwaitsPlatformApproval); the others always (/freeze and /unfreeze act on
// the branch's merge queue, whatever the change's state).
func CommandApplies(name string, step Step, awaitsPlatformApproval bool) bool {
	switch name {
	case CommandRetry:
		return step.Retryable()
	case CommandResume:
		return step.Resumable()
	case CommandCancel:
		return step.Cancellable()
	case CommandApprove, CommandReject:
		return awaitsPlatformApproval
	case CommandMerge:
		// It adopts a merge request no change carries yet.
		return false
	}
	return true
}

// AdoptCommand reports whether command name adopts a merge request rather
// than acting on its change: "merge", run where no change carries it.
func AdoptCommand(name string) bool { return name == CommandMerge }

// QueueCommand reports whether command name acts on the merge queue of
// the change's target branch rather than on the change: /freeze and
// /unfreeze.
func QueueCommand(name string) bool { return name == CommandFreeze || name == CommandUnfreeze }

// CommandsNow lists, in platform's words, the commands that apply to a
// change at step now: the status comment's list, which names the queue
// commands (QueueCommand) only while the change waits in its branch's
// merge queue (HANDLE_QUEUED), where a freeze is what holds it; /help
// lists them whenever its reader may run them.
func CommandsNow(step Step, awaitsPlatformApproval bool, platform string) []CommandDoc {
	var out []CommandDoc
	for _, c := range CommandDocs(platform) {
		if QueueCommand(c.Name) && step.Code != HandleQueued {
			continue
		}
		if CommandApplies(c.Name, step, awaitsPlatformApproval) {
			out = append(out, c)
		}
	}
	return out
}

// AwaitsPlatformApproval reports whether a change with ticketID and status
// waits for an approval given on the platform itself (in-GitLab approval
// mode: the ticket is GitLabTicket) rather than by the approval system.
func AwaitsPlatformApproval(ticketID, status string) bool {
	return ticketID == GitLabTicket && status == StatusApprovalSent
}
