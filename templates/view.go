package templates

import (
	"fmt"
	"slices"
	"time"
)

// StatusView is everything the status comment shows about one change. The
// caller (flows) builds it from the operation, its binding, its events and
// the step catalogue; the renderer only formats it. User-controlled texts
// (Title, SubjectID, TargetKey, RequestedBy, Detail, actors) are escaped by
// the templates.
type StatusView struct {
	// OperationID is the change's operation id ("op_…"); it must not be
	// empty, and it goes into the hidden marker (see Marker).
	OperationID string
	// Title is the change's title as the requester wrote it.
	Title string
	// SubjectID and TargetKey identify the binding the change applies for.
	SubjectID, TargetKey string
	// RequestedBy names the requester (a username or a portal account).
	RequestedBy string
	// Status is the binding status, for example "MERGING".
	Status string
	// StepCode and StepName are the operation's step, for example 10101
	// "HANDLE_STARTED".
	StepCode int
	StepName string
	// Hint says what to do now, from the step catalogue.
	Hint string
	// Terminal reports that the change will not move again.
	Terminal bool
	// Failed reports a failure status (CREATE_FAILED, HANDLE_FAILED,
	// REJECTED); the comment then carries a warning line.
	Failed bool
	// Detail is the failure reason as GitLab or the approval system gave it;
	// it may be empty or span several lines.
	Detail string
	// MR is the change's merge request; IID 0 means none yet.
	MR MRView
	// PipelineURL links the merge request pipeline of the current head.
	PipelineURL string
	// TicketID and ApprovalURL identify the approval ticket: its id and,
	// when the approval system gave one (ticket_url, README "Approval
	// system contract"), its page, which the comment links.
	TicketID, ApprovalURL string
	// ApprovalInGitLab reports that approvals are given on the merge
	// request in GitLab (approval.provider gitlab), not by the external
	// approval system.
	ApprovalInGitLab bool
	// Decision is the approval decision once made: "approved", "rejected"
	// or "withdrawn"; "" while none is known.
	Decision string
	// DecidedBy names who made Decision (the approver of the approval
	// system's callback, or the GitLab approvers), once decided.
	DecidedBy []string
	// Approvals, in the in-platform approval mode (ApprovalInGitLab), is
	// who may approve the change and how many approvals it needs; the
	// comment shows it while the change waits for them ("needs 1 approval
	// from carol"). Nil otherwise.
	Approvals *ApprovalNeed
	// DeployURL links the deploy pipeline once the change is merged: the
	// pipeline that confirmed it once known, else the merge commit's
	// pipelines; "" before the merge.
	DeployURL string
	// Policy is the repository policy file that governs the change, nil
	// when its target branch holds none (issue 25 point 2).
	Policy *PolicyView
	// Timeline lists the change's events, oldest first, each saying what
	// happened, except the bookkeeping that is no step of the change
	// (merge-gate claims, a refusal's follow-up read) and the retried
	// calls (RetriedCalls).
	Timeline []TimelineEntry
	// RetriedCalls is how many calls the change's jobs made again after a
	// transient failure (a reviewer robot's approve, a merge GitLab
	// refused, a job retried after an error or a rate limit): the
	// timeline leaves them out and its summary counts them ("2 retried
	// calls not shown"). The change's page lists every event.
	RetriedCalls int
	// Commands are the commands usable now, on this change in its state.
	Commands []CommandHelp
	// HistoryURL is where the change's full history can be read (its API
	// URL, {external_url}/api/v1/changes/{id}); the comment links it when
	// it has to be shortened to fit GitLab's note limit.
	HistoryURL string
	// PageURL is the change's web page ({external_url}/ui/changes/{id},
	// issue 13 point 2); the footer links it. "" without an external URL.
	PageURL string
	// Seq is the sequence number of the last event this render reflects;
	// the footer shows it so that readers (and the coalescing edit job)
	// can tell an older render from a newer one.
	Seq int64
	// Platform is where the change's request lives: "gitlab" (also "")
	// or "github"; the comment speaks its words (MRNoun, MRRef,
	// PipelineNoun, PlatformName).
	Platform string
}

// onGitHub reports whether the view is of a GitHub pull request.
func (v StatusView) onGitHub() bool { return v.Platform == "github" }

// MRNoun is "merge request", or "pull request" on GitHub.
func (v StatusView) MRNoun() string { return mrNoun(v.Platform) }

// mrNoun is the request's noun on platform ("gitlab", also "", or
// "github").
func mrNoun(platform string) string {
	if platform == "github" {
		return "pull request"
	}
	return "merge request"
}

// platformName is platform's name: "GitLab" (also for ""), or "GitHub".
func platformName(platform string) string {
	if platform == "github" {
		return "GitHub"
	}
	return "GitLab"
}

// MRRef is the request's reference as the platform writes it: "!42", or
// "#42" on GitHub.
func (v StatusView) MRRef() string {
	if v.onGitHub() {
		return fmt.Sprintf("#%d", v.MR.IID)
	}
	return fmt.Sprintf("!%d", v.MR.IID)
}

// PipelineNoun is "pipeline", or "checks" on GitHub (check runs and
// commit statuses of the head).
func (v StatusView) PipelineNoun() string {
	if v.onGitHub() {
		return "checks"
	}
	return "pipeline"
}

// PlatformName is "GitLab", or "GitHub".
func (v StatusView) PlatformName() string { return platformName(v.Platform) }

// DeployNoun is "deploy pipeline", or "deploy run" on GitHub (the target
// branch's workflow run or check that applies a merge).
func (v StatusView) DeployNoun() string {
	if v.onGitHub() {
		return "deploy run"
	}
	return "deploy pipeline"
}

// ApprovalNeed is who may approve a change in the in-platform approval
// mode and how many must (the project's approval.* settings), and who has
// approved so far. Names are user text: the template escapes them.
type ApprovalNeed struct {
	// Required is how many distinct approvers must approve; at least 1.
	Required int
	// Approvers are the usernames allowed to approve (approval.approvers),
	// without the change's requester, who never approves their own change.
	Approvers []string
	// Groups are the groups (GitHub: organizations) whose members may
	// approve (approval.approver_groups).
	Groups []string
	// MinAccess, when not "", names the access that also makes a project
	// member an approver (approval.min_access): "Developer" or
	// "Maintainer" on GitLab, "write" or "maintain" on GitHub.
	MinAccess string
	// Given are the approvers whose approval is recorded, in order.
	Given []string
}

// Who lists who may still approve, in words: each approver's username
// but those who approved already, "a member of <group>" per group, "a
// project member with <access> access or more" (GitHub: "a collaborator
// with <permission> permission or more"); empty when nobody is.
func (a ApprovalNeed) Who(platform string) []string {
	var who []string
	for _, u := range a.Approvers {
		if !slices.Contains(a.Given, u) {
			who = append(who, u)
		}
	}
	for _, g := range a.Groups {
		who = append(who, "a member of "+g)
	}
	if a.MinAccess != "" {
		if platform == "github" {
			who = append(who, "a collaborator with "+a.MinAccess+" permission or more")
		} else {
			who = append(who, "a project member with "+a.MinAccess+" access or more")
		}
	}
	return who
}

// Missing is how many approvals are still needed (Required less those
// given), never below 0.
func (a ApprovalNeed) Missing() int { return max(a.Required-len(a.Given), 0) }

// PolicyView is the status comment's line about the target branch's
// `.changebot.yml`: which file governs the change, and, when the branch's
// current file is invalid, that it does not and its first problem.
type PolicyView struct {
	// Blob is the governing file's git blob id (short), "" when no valid
	// file was ever read and the server's settings govern.
	Blob string
	// InvalidBlob is the branch's current, invalid file's blob id
	// (short), "" when the current file is the governing one.
	InvalidBlob string
	// Problem is the invalid file's first problem ("line 3 `queue.mode`:
	// must be one of auto, on, off"); More counts the others.
	Problem string
	More    int
}

// MRView identifies a merge request in the status comment.
type MRView struct {
	// IID is the merge request's project-local number (the "!42"); 0 means
	// the merge request does not exist yet.
	IID int64
	// WebURL is the merge request's page.
	WebURL string
}

// TimelineEntry is one row of the status comment's timeline: one event of
// the change.
type TimelineEntry struct {
	// At is when the event happened; it is rendered in UTC as
	// "2006-01-02 15:04:05Z".
	At time.Time
	// What says what happened, in words, naming the person who acted:
	// "approved by carol", "/cancel refused: role — operators only",
	// "cancelled by olivia: wrong file", "pipeline passed", "merged".
	// Empty shows the step's name instead.
	What string
	// StepName and Status are the step and binding status the event moved
	// the change to.
	StepName, Status string
	// Actor is who caused the event (a username, "changebot", "sweeper").
	Actor string
	// Source says in words where the event came from, for example
	// "pipeline webhook", "comment by @dev-a", "approval system callback",
	// "sweeper" (never a raw "webhook:9" or "job:handle").
	Source string
}

// CommandHelp is one command as replies and the status comment list it.
type CommandHelp struct {
	// Usage is how to type the command, for example "/retry".
	Usage string
	// Description says what the command does.
	Description string
	// Who says who may run it, for example "operators only".
	Who string
}

// HelpReply is the data of the "help" reply: the commands the commenter may
// run now.
type HelpReply struct {
	// Commands are the commands the commenter may run now; empty means none.
	Commands []CommandHelp
	// BotUsername, when set, is the bot's username, to explain the mention
	// form "@<bot> <command>".
	BotUsername string
}

// UnknownCommandReply is the data of the "unknown_command" reply, one per
// note however many unknown commands it holds.
type UnknownCommandReply struct {
	// Names are the unknown command names as parsed (lower-case, no slash).
	Names []string
	// Commands are the valid commands.
	Commands []CommandHelp
}

// Why a command was refused (RefusedReply.Because).
const (
	// BecauseRole: the reader holds none of the command's roles.
	BecauseRole = "role"
	// BecauseAccess: the reader holds a role but lacks the access the
	// command needs (the right to merge into the target branch).
	BecauseAccess = "access"
	// BecauseState: the command does not apply to the change in its
	// current state, whoever asks.
	BecauseState = "state"
	// BecauseApprovalSystem: /approve or /reject on a change whose
	// approvals come from the external approval system.
	BecauseApprovalSystem = "approval_system"
)

// RefusedReply is the data of the "refused" reply to a command that was not
// run. It says which of the reader's role (or access), the change's state or
// the approval mode is the reason, once.
type RefusedReply struct {
	// Name is the refused command's name (lower-case, no slash).
	Name string
	// Because is why: BecauseRole, BecauseAccess, BecauseState or
	// BecauseApprovalSystem; "" is BecauseRole.
	Because string
	// Who says who may run it, for example "operators only"
	// (BecauseRole).
	Who string
	// Reason says what is missing in words, for example "this change is
	// VALIDATED (CALLED_BACK); /retry applies to a failed change"
	// (BecauseState, BecauseAccess).
	Reason string
	// TicketID and TicketURL are the change's approval ticket and its page
	// (BecauseApprovalSystem), "" when unknown.
	TicketID, TicketURL string
	// Platform is where the request lives: "gitlab" (also "") or "github"
	// (PlatformName).
	Platform string
}

// PlatformName is "GitLab", or "GitHub".
func (r RefusedReply) PlatformName() string { return platformName(r.Platform) }

// NoChangeReply is the data of the "no_change" reply to commands on a merge
// request that carries no changebot change.
type NoChangeReply struct {
	// Names are the commands of the note (lower-case, no slash).
	Names []string
	// Platform is where the request lives: "gitlab" (also "") or "github"
	// (MRNoun).
	Platform string
}

// MRNoun is "merge request", or "pull request" on GitHub.
func (r NoChangeReply) MRNoun() string { return mrNoun(r.Platform) }

// QueueReply is the data of the "queue" reply to /freeze and /unfreeze:
// the merge queue of Branch as the command left it.
type QueueReply struct {
	// Branch is the queue's target branch.
	Branch string
	// Frozen reports whether the queue is frozen now; By froze it, for
	// Reason ("" for none).
	Frozen     bool
	By, Reason string
	// Already reports that another freeze was in place, which stays
	// (By and Reason are its).
	Already bool
	// Platform is where the request lives: "gitlab" (also "") or "github"
	// (MRNoun).
	Platform string
}

// MRNoun is "merge request", or "pull request" on GitHub.
func (r QueueReply) MRNoun() string { return mrNoun(r.Platform) }

// RateLimitedReply is the data of the "rate_limited" reply, sent once when a
// user exceeds the per-user command rate.
type RateLimitedReply struct {
	// Limit is how many commands a user may send per Window.
	Limit int
	// Window is the rate limit's period.
	Window time.Duration
	// Until is when the user's commands are accepted again; rendered in UTC.
	Until time.Time
}
