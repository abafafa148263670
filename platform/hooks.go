package platform

import (
	"errors"
	"fmt"
	"strings"
)

// ErrMalformedHook reports a webhook body the bot cannot read: not a JSON
// object, a field of the wrong JSON type, or an object_kind that contradicts
// the X-Gitlab-Event header. Adapters wrap it (DecodeHook in
// platform/gitlab, platform/github) with MalformedHook; the webhook intake
// answers 400 with the error's text and stores nothing.
var ErrMalformedHook = errors.New("malformed webhook payload")

// MalformedHook returns an error wrapping ErrMalformedHook and err whose
// text says it once: "malformed <event> payload: <err>", where event names
// the delivery as the adapter words it (`"Merge Request Hook"`, `GitHub
// "pull_request"`). err names a field or a position, never a value of the
// body: the text is the intake's answer to the sender.
func MalformedHook(event string, err error) error {
	return &malformedHookError{event: event, err: err}
}

type malformedHookError struct {
	event string
	err   error
}

func (e *malformedHookError) Error() string {
	return fmt.Sprintf("malformed %s payload: %v", e.event, e.err)
}

func (e *malformedHookError) Unwrap() []error { return []error{ErrMalformedHook, e.err} }

// Hook kinds (HookEvent.Kind). They are persisted in logs and metrics, so
// they are explicit strings (STYLE 4).
const (
	// HookMergeRequest is a Merge Request Hook (fixtures
	// webhook-merge_request-*.json).
	HookMergeRequest = "merge_request"
	// HookPipeline is a Pipeline Hook (fixture webhook-pipeline-mr-success.json).
	HookPipeline = "pipeline"
	// HookNote is a Note Hook or Confidential Note Hook, on any noteable
	// (fixture webhook-note-mr.json).
	HookNote = "note"
	// HookEmoji is an Emoji Hook (fixture webhook-emoji-award-note.json).
	HookEmoji = "emoji"
	// HookJob is a Job Hook, object_kind "build" (fixture webhook-job.json).
	HookJob = "job"
	// HookPush is a Push Hook.
	HookPush = "push"
	// HookOther is every other event (Tag Push, Issue, System Hook, …) and
	// any X-Gitlab-Event the adapter does not know.
	HookOther = "other"
)

// NoteableMergeRequest is the noteable_type of a comment on a merge request
// (fixture webhook-note-mr.json); the other values GitLab sends are Issue,
// Commit and Snippet.
const NoteableMergeRequest = "MergeRequest"

// Note hook actions (NoteHook.Action, GITLAB-FACTS §1.5). GitLab before
// 16.11 sends no action and fires no hook on edits.
const (
	NoteActionCreate = "create"
	NoteActionUpdate = "update"
)

// HookEvent is one GitLab webhook decoded into the project's terms (STYLE 20).
// Exactly one of MergeRequest, Pipeline and Note is set, matching Kind, for
// the kinds that carry one; the other kinds only carry the envelope
// (ProjectID, ProjectPath, User) as far as the payload has it.
type HookEvent struct {
	// Kind is one of HookMergeRequest, HookPipeline, HookNote, HookEmoji,
	// HookJob, HookPush and HookOther.
	Kind string
	// ProjectID is payload project.id (else the top-level project_id, as in
	// fixture webhook-job.json); 0 when the payload has neither. For a merge
	// request hook this is the MR's target project.
	ProjectID int64
	// ProjectPath is project.path_with_namespace, "" when absent.
	ProjectPath string
	// User is who caused the event (payload "user"). For an edited note it
	// is the note's author, not the editor (GITLAB-FACTS §1.5).
	User User
	// MergeRequest is set when Kind is HookMergeRequest.
	MergeRequest *MergeRequestHook
	// Pipeline is set when Kind is HookPipeline.
	Pipeline *PipelineHook
	// Note is set when Kind is HookNote.
	Note *NoteHook
}

// MergeRequestHook is object_attributes of a Merge Request Hook (fixtures
// webhook-merge_request-open.json, -merge.json, -update-push.json, …).
type MergeRequestHook struct {
	// ID is the global MR id; IID the per-project number used in REST paths.
	ID, IID int64
	// Action is open, close, reopen, update, approved, unapproved, approval,
	// unapproval or merge (GITLAB-FACTS §1.3). On Free an approval arrives
	// as "approved"; on Premium as "approval" until the last required one.
	Action string
	// State is opened, closed, locked or merged.
	State string
	// SHA is last_commit.id, the MR's head sha when the hook was built.
	SHA string
	// OldRev is set only when the head changed (push, rebase, applied
	// suggestion): fixture webhook-merge_request-update-push.json.
	OldRev string
	// MergeCommitSHA is set on "merge" (fixture webhook-merge_request-merge.json).
	MergeCommitSHA string
	SourceBranch   string
	TargetBranch   string
	// DetailedMergeStatus is "checking" at open time on recent GitLab
	// (fixture webhook-merge_request-open-gitlabcom.json): never final there.
	DetailedMergeStatus string
	Title               string
	// AuthorID is object_attributes.author_id, the MR's author.
	AuthorID int64
	// Draft is object_attributes.draft, the MR's draft flag when the hook
	// was built.
	Draft bool
	// DraftChanged reports that this hook toggled the draft flag:
	// changes.draft {"previous", "current"} is present on an "update"
	// (GitLab 16.3+, gitlab-org/gitlab!126899).
	DraftChanged bool
	// TargetChanged reports that this hook changed the branch the merge
	// request merges into (TargetBranch is the new one): on GitLab an
	// "update" whose changes.target_branch {"previous", "current"} differ
	// (doc/user/project/integrations/webhook_events.md, Merge request
	// events); on GitHub pull_request "edited" with changes.base
	// (docs.github.com "Webhook events and payloads", pull_request edited).
	TargetChanged bool
	// QueueChanged reports that the merge request's entry in the
	// platform's own merge queue changed, on an "update": on GitHub a
	// merge_group webhook of the group testing it (checks_requested,
	// destroyed; its head_ref gh-readonly-queue/<base>/pr-<number>-<sha>
	// names the pull request) or pull_request "dequeued" (docs.github.com
	// "Webhook events and payloads", merge_group and pull_request). It
	// says only "look now": the entry is read from the platform.
	QueueChanged bool
	// Labels are the titles of the merge request's labels when the hook
	// was built: GitLab's top-level "labels" (fixture
	// webhook-merge_request-open.json), GitHub's pull_request.labels[].name.
	Labels []string
	// LabelsChanged reports that this hook added or removed a label, with
	// LabelsBefore the titles before it: GitLab's changes.labels
	// {"previous", "current"} (fixture webhook-merge_request-open.json,
	// doc/user/project/integrations/webhook_events.md), GitHub's
	// pull_request "labeled"/"unlabeled" (LabelsBefore is Labels without,
	// or with, the hook's label).
	LabelsChanged bool
	LabelsBefore  []string
	// ReviewersAdded are the usernames this hook requested as reviewers
	// (GitLab changes.reviewers current minus previous; GitHub
	// pull_request "review_requested" requested_reviewer.login).
	ReviewersAdded []string
}

// HasLabel reports whether the merge request carries label (compared
// without regard to case, as both platforms match label names).
func (h *MergeRequestHook) HasLabel(label string) bool {
	return containsFold(h.Labels, label)
}

// LabelAdded reports whether this hook shows label newly on the merge
// request: added by this hook, or present on an open or reopen.
func (h *MergeRequestHook) LabelAdded(label string) bool {
	if !h.HasLabel(label) {
		return false
	}
	if h.LabelsChanged {
		return !containsFold(h.LabelsBefore, label)
	}
	return h.Action == "open" || h.Action == "reopen"
}

// LabelRemoved reports whether this hook took label off the merge request.
func (h *MergeRequestHook) LabelRemoved(label string) bool {
	return h.LabelsChanged && !h.HasLabel(label) && containsFold(h.LabelsBefore, label)
}

// MayAdopt reports whether the hook may start or end an adoption by label
// (issue 25 point 1): it shows label newly (LabelAdded), takes it off
// (LabelRemoved), or requests reviewers (the robot may be one). The intake
// stores such hooks of the projects where adoption is on even when
// MovesChanges is false.
func (h *MergeRequestHook) MayAdopt(label string) bool {
	return h.LabelAdded(label) || h.LabelRemoved(label) || len(h.ReviewersAdded) > 0
}

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}

// PipelineHook is a Pipeline Hook (fixture webhook-pipeline-mr-success.json).
type PipelineHook struct {
	ID int64
	// Ref is the branch or tag; for MR pipelines refs/merge-requests/<iid>/head
	// or /merge (merged results), whose SHA is not the MR's head sha.
	Ref       string
	SHA       string
	BeforeSHA string
	// Status is GitLab's pipeline status (created … success, failed,
	// canceled, skipped, manual, scheduled).
	Status string
	// Source is, for example, merge_request_event or push.
	Source string
	Tag    bool
	// MRIID is merge_request.iid; 0 when the payload has no merge_request
	// block (a branch or tag pipeline, such as a deploy pipeline).
	MRIID int64
	// MRSourceBranch is merge_request.source_branch, "" without the block.
	MRSourceBranch string
	// WebURL is object_attributes.url when GitLab sends it, else
	// project.web_url + "/-/pipelines/<id>" (older payloads, like the fixture,
	// have no url).
	WebURL string
	// Partial reports that the event is one check of SHA, not the CI state
	// of SHA as a whole: GitHub's check_run, check_suite, status and
	// workflow_run events (platform/github DecodeHook). Its ID is then 0
	// (no pipeline id can match it) and Status is that one check's state
	// mapped onto the pipeline statuses; before deciding on a pull
	// request, read the head's pipeline again (MergeRequest.HeadPipeline,
	// synthesized from every check run and commit status of the head sha
	// and the branch protection's required contexts). On the target
	// branch (MRIID 0) one successful check is deploy evidence on its own.
	// Always false for GitLab.
	Partial bool
	// Name is the check run's or workflow's name, or the commit status's
	// context, of a Partial event; "" for GitLab.
	Name string
}

// NoteHook is a Note Hook or Confidential Note Hook (fixture
// webhook-note-mr.json). System notes never fire it (GITLAB-FACTS §1.5).
type NoteHook struct {
	ID   int64
	Body string
	// Action is NoteActionCreate or NoteActionUpdate, "" on GitLab before
	// 16.11. A command runs once per note id, never on an edit.
	Action string
	// NoteableType is NoteableMergeRequest, Issue, Commit or Snippet.
	NoteableType string
	System       bool
	// Confidential is true for an internal note: the header was
	// "Confidential Note Hook", event_type "confidential_note", or
	// object_attributes.confidential/internal was true.
	Confidential bool
	// MRIID is merge_request.iid and MRID merge_request.id (the noteable_id);
	// both 0 when the note is not on a merge request.
	MRIID int64
	MRID  int64
	// Author is the payload user: the note's author, also for edits.
	Author User
	// AuthorID is object_attributes.author_id.
	AuthorID int64
}

// MayChangePolicy reports whether the hook may bring a new
// `.changebot.yml` to check (issue 25 point 2): the merge request opened,
// reopened, or its head moved (an update with OldRev).
func (h *MergeRequestHook) MayChangePolicy() bool {
	return h.Action == "open" || h.Action == "reopen" || (h.Action == "update" && h.OldRev != "")
}

// MovesChanges reports whether changebot acts on a merge request webhook of
// this action and these changes (flows' applyMergeRequestHook): a merge, a
// close, an approval given or taken back, or an update that retargets the
// merge request, marks it ready, moves its head (OldRev) or changes its
// entry in the platform's merge queue (QueueChanged). Any other (an open,
// a reopen, an edit of the title, description, labels or assignees) moves
// no change: the intake does not store it (issue 24 point 4).
func (h *MergeRequestHook) MovesChanges() bool {
	if h.Approval() {
		return true
	}
	switch h.Action {
	case "merge", "close":
		return true
	case "update":
		return h.TargetChanged || (h.DraftChanged && !h.Draft) || h.OldRev != "" || h.QueueChanged
	}
	return false
}

// Approval reports whether the webhook is an approval given or taken back:
// GitLab's approved, approval, unapproved or unapproval (GITLAB-FACTS
// §1.3; Free sends approved, Premium approval until the last required one).
func (h *MergeRequestHook) Approval() bool {
	switch h.Action {
	case "approved", "approval", "unapproved", "unapproval":
		return true
	}
	return false
}
