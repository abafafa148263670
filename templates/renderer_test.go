package templates

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// setup returns a renderer with the embedded templates.
func setup(t *testing.T) *Renderer {
	t.Helper()
	r, err := NewRenderer(nil)
	if err != nil {
		t.Fatalf("NewRenderer: %v", err)
	}
	return r
}

// checkGolden compares got with testdata/name.golden, or rewrites the file
// under -update.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run go test ./templates -update to create it): %v", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the rendering (run go test ./templates -update if the change is intended)\n--- got:\n%s\n--- want:\n%s", path, got, want)
	}
}

// Commands as bot would list them from the commands registry.
var (
	cmdRetry   = CommandHelp{Usage: "/retry", Description: "Re-run the failed step of this merge request's change.", Who: "the change's requester, the MR author, project members with Developer access or more"}
	cmdResume  = CommandHelp{Usage: "/resume", Description: "Continue a change parked in a pending step by running its current step again.", Who: "operators only"}
	cmdStatus  = CommandHelp{Usage: "/status", Description: "Re-render the status comment now.", Who: "anyone who can see the MR"}
	cmdCancel  = CommandHelp{Usage: "/cancel", Description: "Close the change; it may be submitted again.", Who: "the change's requester and operators"}
	cmdApprove = CommandHelp{Usage: "/approve", Description: "Approve the change (in-GitLab approval mode).", Who: "approvers"}
	cmdReject  = CommandHelp{Usage: "/reject", Description: "Reject the change (in-GitLab approval mode).", Who: "approvers"}
	cmdHelp    = CommandHelp{Usage: "/help", Description: "List the commands you may run now.", Who: "anyone"}
)

var t0 = time.Date(2026, 3, 9, 14, 0, 0, 0, time.UTC)

func at(minutes int) time.Time { return t0.Add(time.Duration(minutes) * time.Minute) }

// base is a change with its merge request and approval ticket.
func base() StatusView {
	return StatusView{
		OperationID: "op_01JNZK6W4X7Q2V9M3H8T5R1C0D",
		Title:       "Raise the payments API rate limit to 500 rps",
		SubjectID:   "payments-api",
		TargetKey:   "prod/eu-west-1",
		RequestedBy: "alice",
		MR:          MRView{IID: 42, WebURL: "https://gitlab.example.com/platform/config/-/merge_requests/42"},
		PipelineURL: "https://gitlab.example.com/platform/config/-/pipelines/9001",
		TicketID:    "APR-1234",
		ApprovalURL: "https://approvals.example.com/tickets/APR-1234",
	}
}

// timeline returns the first n events of a change's happy path.
func timeline(n int) []TimelineEntry {
	all := []TimelineEntry{
		{At: at(0), What: "submitted by alice (1 file)", StepName: "APPROVAL_SENDING", Status: "APPROVAL_SENDING", Actor: "alice", Source: "API request"},
		{At: at(0).Add(2 * time.Second), What: "approval requested: ticket APR-1234", StepName: "APPROVAL_SENT", Status: "APPROVAL_SENT", Actor: "changebot", Source: "approval request"},
		{At: at(31), What: "approved by bob", StepName: "CREATE_STARTED", Status: "MR_CREATING", Actor: "bob", Source: "approval system callback"},
		{At: at(31).Add(4 * time.Second), What: "merge request !42 opened", StepName: "CREATE_MR_OPENED", Status: "MR_CREATING", Actor: "changebot", Source: "merge request creation"},
		{At: at(39), What: "pipeline 9001 passed", StepName: "CREATE_SUCCEEDED", Status: "MR_CREATED", Actor: "gitlab", Source: "pipeline webhook"},
		{At: at(39).Add(time.Second), What: "merging started", StepName: "HANDLE_STARTED", Status: "MERGING", Actor: "changebot", Source: "merge request handling"},
		{At: at(40), What: "merged", StepName: "HANDLE_MERGED", Status: "MERGED", Actor: "changebot", Source: "merge request handling"},
		{At: at(52), What: "applied: deploy pipeline 9002 passed", StepName: "CALLED_BACK", Status: "VALIDATED", Actor: "gitlab", Source: "pipeline webhook"},
	}
	return all[:n]
}

func statusCases() []struct {
	name string
	view StatusView
} {
	waiting := base()
	waiting.MR, waiting.PipelineURL = MRView{}, ""
	waiting.Status, waiting.StepCode, waiting.StepName = "APPROVAL_SENT", 10402, "APPROVAL_SENT"
	waiting.Hint = "Waiting for an approver to decide."
	waiting.Timeline, waiting.Seq = timeline(2), 2
	waiting.Commands = []CommandHelp{cmdStatus, cmdCancel, cmdApprove, cmdReject, cmdHelp}

	running := base()
	running.Status, running.StepCode, running.StepName = "MR_CREATING", 10003, "CREATE_MR_OPENED"
	running.Hint = "Keep waiting: the merge request pipeline is running."
	running.Timeline, running.Seq = timeline(4), 4
	running.Commands = []CommandHelp{cmdStatus, cmdCancel, cmdHelp}

	waitingGitLab := base()
	waitingGitLab.TicketID, waitingGitLab.ApprovalURL, waitingGitLab.ApprovalInGitLab = "gitlab", "", true
	waitingGitLab.Status, waitingGitLab.StepCode, waitingGitLab.StepName = "APPROVAL_SENT", 10402, "APPROVAL_SENT"
	waitingGitLab.Hint = "Waiting for an approver to decide."
	// MR-first: the merge request and its pipeline, then the wait for
	// approvers on it, who are named with the count needed.
	waitingGitLab.Timeline = []TimelineEntry{
		{At: at(0), What: "submitted by alice (1 file)", StepName: "CREATE_STARTED", Status: "MR_CREATING", Actor: "alice", Source: "API request"},
		{At: at(0).Add(4 * time.Second), What: "merge request !42 opened", StepName: "CREATE_MR_OPENED", Status: "MR_CREATING", Actor: "changebot", Source: "merge request creation"},
		{At: at(8), What: "pipeline 9001 passed", StepName: "CREATE_SUCCEEDED", Status: "MR_CREATED", Actor: "gitlab", Source: "pipeline webhook"},
		{At: at(8).Add(time.Second), What: "waiting for 1 approval in GitLab", StepName: "APPROVAL_SENT", Status: "APPROVAL_SENT", Actor: "changebot", Source: "approval request"},
	}
	waitingGitLab.Seq = 4
	waitingGitLab.Approvals = &ApprovalNeed{Required: 1, Approvers: []string{"carol"}}
	waitingGitLab.Commands = []CommandHelp{cmdStatus, cmdCancel, cmdApprove, cmdReject, cmdHelp}

	// Two approvals needed from named people, a group and an access
	// level; carol's is in, and /approve refused to the requester reads
	// as what it was.
	partlyApproved := waitingGitLab
	partlyApproved.Approvals = &ApprovalNeed{Required: 2, Approvers: []string{"carol", "dave"}, Groups: []string{"platform/sre"},
		MinAccess: "Maintainer", Given: []string{"carol"}}
	partlyApproved.Timeline = append(slices.Clone(waitingGitLab.Timeline),
		TimelineEntry{At: at(9), What: "/approve refused: alice requested this change and cannot decide on it", StepName: "APPROVAL_SENT", Status: "APPROVAL_SENT", Actor: "alice", Source: "comment by @alice"},
		TimelineEntry{At: at(10), What: "approved by carol (1 of 2)", StepName: "APPROVAL_SENT", Status: "APPROVAL_SENT", Actor: "carol", Source: "comment by @carol"})
	partlyApproved.Seq = 6

	// Nobody is configured to approve: the comment says which settings
	// name approvers instead of naming nobody.
	noApprover := waitingGitLab
	noApprover.Approvals = &ApprovalNeed{Required: 1}

	merging := base()
	merging.Decision, merging.DecidedBy = "approved", []string{"bob"}
	merging.Status, merging.StepCode, merging.StepName = "MERGING", 10101, "HANDLE_STARTED"
	merging.Hint = "Keep waiting: changebot is working on it."
	merging.Timeline, merging.Seq = timeline(6), 8
	merging.RetriedCalls = 2 // two retried approve calls: the footer's event 8 is not a timeline row
	merging.Commands = []CommandHelp{cmdStatus, cmdCancel, cmdHelp}

	// HANDLE_DRAFT merges nothing: it waits for a person to mark the draft
	// ready, and the headline says so rather than "Merging".
	draft := merging
	draft.StepCode, draft.StepName = 10110, "HANDLE_DRAFT"
	draft.Hint = "The merge request is a draft: mark it ready in GitLab; changebot then merges by itself."
	draft.Timeline = append(timeline(6), TimelineEntry{At: at(40), What: "draft: waiting for a person to mark it ready", StepName: "HANDLE_DRAFT", Status: "MERGING", Actor: "changebot", Source: "merge request handling"})
	draft.Seq, draft.RetriedCalls = 7, 0

	failed := base()
	failed.Status, failed.StepCode, failed.StepName = "CREATE_FAILED", 10004, "CREATE_PIPELINE_FAILED"
	failed.Hint = "The pipeline failed. Fix the cause and comment /retry, or contact the maintainers."
	failed.Failed = true
	failed.Detail = "Pipeline #9001 failed: job validate-config (stage test) exited with code 1."
	failed.Decision, failed.DecidedBy = "approved", []string{"bob"}
	failed.Timeline = append(timeline(4), TimelineEntry{At: at(38), What: "pipeline 9001 failed", StepName: "CREATE_PIPELINE_FAILED", Status: "CREATE_FAILED", Actor: "gitlab", Source: "pipeline webhook"})
	failed.Seq = 5
	failed.Commands = []CommandHelp{cmdRetry, cmdStatus, cmdCancel, cmdHelp}

	pending := base()
	pending.Status, pending.StepCode, pending.StepName = "MERGING", 10501, "HANDLE_PIPELINE_PENDING"
	pending.Hint = "Outcome unknown: keep waiting; an operator can /resume."
	pending.Decision, pending.DecidedBy = "approved", []string{"bob"}
	pending.Timeline = append(timeline(6), TimelineEntry{At: at(99), What: "parked: no pipeline result in time", StepName: "HANDLE_PIPELINE_PENDING", Status: "MERGING", Actor: "sweeper", Source: "sweeper"})
	pending.Seq = 7
	pending.Commands = []CommandHelp{cmdResume, cmdStatus, cmdCancel, cmdHelp}

	conflict := base()
	conflict.Status, conflict.StepCode, conflict.StepName = "HANDLE_FAILED", 10105, "HANDLE_REBASE_CONFLICT"
	conflict.Hint = "The rebase has conflicts: resolve them on the source branch and comment /retry, or contact the maintainers."
	conflict.Failed = true
	conflict.Detail = "Rebase failed: conflicts in\nconfig/payments/limits.yaml\nconfig/payments/routes.yaml"
	conflict.Decision, conflict.DecidedBy = "approved", []string{"bob"}
	conflict.Timeline = append(timeline(6),
		TimelineEntry{At: at(40), What: "rebase started", StepName: "HANDLE_REBASING", Status: "MERGING", Actor: "changebot", Source: "merge request handling"},
		TimelineEntry{At: at(41), What: "rebase failed: conflicts", StepName: "HANDLE_REBASE_CONFLICT", Status: "HANDLE_FAILED", Actor: "changebot", Source: "merge request handling"})
	conflict.Seq = 8
	conflict.Commands = []CommandHelp{cmdRetry, cmdStatus, cmdCancel, cmdHelp}

	merged := base()
	merged.Decision, merged.DecidedBy = "approved", []string{"bob"}
	merged.Status, merged.StepCode, merged.StepName = "MERGED", 10103, "HANDLE_MERGED"
	merged.Hint = "Keep waiting: the deploy pipeline applies the change."
	merged.DeployURL = "https://gitlab.example.com/platform/config/-/commit/4f2a9c1/pipelines"
	merged.Timeline, merged.Seq = timeline(7), 7
	merged.Commands = []CommandHelp{cmdStatus, cmdHelp}

	validated := base()
	validated.Decision, validated.DecidedBy = "approved", []string{"bob"}
	validated.DeployURL = "https://gitlab.example.com/platform/config/-/pipelines/9002"
	validated.Status, validated.StepCode, validated.StepName = "VALIDATED", 10301, "CALLED_BACK"
	validated.Hint = "Nothing to do: the change is applied."
	validated.Terminal = true
	validated.Timeline, validated.Seq = timeline(8), 8
	validated.Commands = []CommandHelp{cmdStatus, cmdHelp}

	closed := base()
	closed.Status, closed.StepCode, closed.StepName = "CLOSED", 10201, "CLOSED"
	closed.Hint = "Nothing to do here; the change may be submitted again."
	closed.Terminal = true
	closed.Decision, closed.DecidedBy = "approved", []string{"bob"}
	closed.Timeline = append(timeline(4), TimelineEntry{At: at(35), What: "cancelled by alice: wrong file", StepName: "CLOSED", Status: "CLOSED", Actor: "alice", Source: "comment by @alice"})
	closed.Seq = 5

	// A branch whose .changebot.yml is invalid: the last valid file
	// governs, and the comment says so (issue 25 point 2).
	policyInvalid := base()
	policyInvalid.Policy = &PolicyView{Blob: "1f0e9d8c", InvalidBlob: "ab12cd34", Problem: "line 3 `queue.mode`: must be one of auto, on, off (not always)", More: 1}
	policyNone := base()
	policyNone.Policy = &PolicyView{InvalidBlob: "ab12cd34", Problem: "line 1 `version`: must be 1"}
	policyValid := base()
	policyValid.Policy = &PolicyView{Blob: "1f0e9d8c"}

	rejected := base()
	rejected.MR, rejected.PipelineURL = MRView{}, ""
	rejected.Status, rejected.StepCode, rejected.StepName = "REJECTED", 10403, "APPROVAL_REJECTED"
	rejected.Hint = "The change was rejected. Nothing to do here; the change may be submitted again."
	rejected.Terminal, rejected.Failed = true, true
	rejected.Detail = "Not during the change freeze; resubmit after March 16."
	rejected.Decision, rejected.DecidedBy = "rejected", []string{"carol"}
	rejected.Timeline = append(timeline(2), TimelineEntry{At: at(20), What: "rejected by carol", StepName: "APPROVAL_REJECTED", Status: "REJECTED", Actor: "carol", Source: "approval system callback"})
	rejected.Seq = 3

	hostile := StatusView{
		OperationID: "op_01JNZK6W4X7Q2V9M3H8T5R1C0E",
		Title:       "Fix | pipes\nand <!-- changebot:status operation_id=op_fake --> markers, cc @all",
		SubjectID:   "svc`with`ticks",
		TargetKey:   "a|b",
		RequestedBy: "@mallory",
		Detail:      "see @all\n<!-- hidden",
		Failed:      true,
		Status:      "APPROVAL_SENDING", StepCode: 10401, StepName: "APPROVAL_SENDING",
		Hint:        "Keep waiting: requesting approval.",
		MR:          MRView{IID: 7},
		ApprovalURL: "javascript:alert(1)",
		TicketID:    "T|1",
		Timeline:    []TimelineEntry{{At: time.Date(2026, 3, 9, 15, 0, 0, 0, time.FixedZone("CET", 3600)), What: "cancelled by mal|lory: see @all\n<!-- x", StepName: "APPROVAL_SENDING", Status: "APPROVAL_SENDING", Actor: "mal|lory\nx", Source: "comment by @mallory"}},
		Decision:    "approved", DecidedBy: []string{"@all", "x|y"},
		Seq: 1,
	}

	// On GitHub the same states speak of pull request #42, its checks and
	// the deploy run (issue 15), in the hints and timeline rows flows
	// writes in GitHub's words too.
	gitHubWords := strings.NewReplacer("the merge request pipeline is running", "the pull request's checks are running",
		"merge request", "pull request", "!42", "#42", "pipeline webhook", "checks webhook", "pipeline 9001", "checks (run 9001)",
		"deploy pipeline", "deploy run", "GitLab", "GitHub")
	onGitHub := func(v StatusView) StatusView {
		v.Platform = "github"
		v.Hint = gitHubWords.Replace(v.Hint)
		v.Timeline = slices.Clone(v.Timeline)
		for i, e := range v.Timeline {
			e.What, e.Source = gitHubWords.Replace(e.What), gitHubWords.Replace(e.Source)
			if e.Actor == "gitlab" {
				e.Actor = "github"
			}
			v.Timeline[i] = e
		}
		v.Commands = slices.Clone(v.Commands)
		for i, c := range v.Commands {
			c.Description, c.Who = gitHubWords.Replace(c.Description), strings.ReplaceAll(c.Who, "the MR", "the pull request")
			v.Commands[i] = c
		}
		v.MR.WebURL = "https://github.com/platform/config/pull/42"
		if v.PipelineURL != "" {
			v.PipelineURL = "https://github.com/platform/config/pull/42/checks"
		}
		if v.DeployURL != "" {
			v.DeployURL = "https://github.com/platform/config/actions/runs/77"
		}
		return v
	}
	githubApproval := onGitHub(waitingGitLab)
	githubApproval.MR = MRView{IID: 42, WebURL: "https://github.com/platform/config/pull/42"}

	return []struct {
		name string
		view StatusView
	}{
		{name: "github_checks_running", view: onGitHub(running)},
		{name: "github_merged", view: onGitHub(merged)},
		{name: "github_waiting_for_approval_on_github", view: githubApproval},
		{name: "waiting_for_approval", view: waiting},
		{name: "waiting_for_approval_in_gitlab", view: waitingGitLab},
		{name: "waiting_for_approvals_in_gitlab_partly_given", view: partlyApproved},
		{name: "waiting_for_approval_in_gitlab_no_approver", view: noApprover},
		{name: "pipeline_running", view: running},
		{name: "merging", view: merging},
		{name: "waiting_for_draft_ready", view: draft},
		{name: "github_waiting_for_draft_ready", view: onGitHub(draft)},
		{name: "create_pipeline_failed", view: failed},
		{name: "pipeline_pending", view: pending},
		{name: "rebase_conflict", view: conflict},
		{name: "merged", view: merged},
		{name: "validated", view: validated},
		{name: "closed", view: closed},
		{name: "rejected", view: rejected},
		{name: "user_text_escaped", view: hostile},
		{name: "policy_invalid_last_valid_governs", view: policyInvalid},
		{name: "policy_invalid_none_valid", view: policyNone},
		{name: "policy_valid", view: policyValid},
	}
}

func TestStatusGolden(t *testing.T) {
	t.Parallel()
	r := setup(t)
	for _, tc := range statusCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := r.Status(tc.view)
			if err != nil {
				t.Fatalf("Status: %v", err)
			}
			first, _, _ := strings.Cut(got, "\n")
			if first != Marker(tc.view.OperationID) {
				t.Errorf("first line = %q, want the marker %q", first, Marker(tc.view.OperationID))
			}
			if id, ok := ParseMarker(got); !ok || id != tc.view.OperationID {
				t.Errorf("ParseMarker = %q, %v, want %q", id, ok, tc.view.OperationID)
			}
			if n := strings.Count(got, MarkerPrefix); n != 1 {
				t.Errorf("the marker prefix appears %d times, want once", n)
			}
			if strings.HasPrefix(tc.name, "github_") {
				for _, never := range []string{"merge request", "GitLab", "!42", "pipeline"} {
					if strings.Contains(got, never) {
						t.Errorf("the GitHub comment says %q, not GitHub's words", never)
					}
				}
			}
			checkGolden(t, "status_"+tc.name, got)
		})
	}
}

func TestStatusRequiresOperationID(t *testing.T) {
	t.Parallel()
	r := setup(t)
	if got, err := r.Status(StatusView{Status: "MERGING"}); err == nil {
		t.Fatalf("Status without operation id = %q, want an error", got)
	}
}

func TestReplyGolden(t *testing.T) {
	t.Parallel()
	r := setup(t)
	all := []CommandHelp{cmdRetry, cmdResume, cmdStatus, cmdCancel, cmdApprove, cmdReject, cmdHelp}
	tests := []struct {
		name string
		kind string
		data any
	}{
		{name: "help", kind: ReplyHelp, data: HelpReply{Commands: []CommandHelp{cmdRetry, cmdStatus, cmdHelp}, BotUsername: "changebot"}},
		{name: "help_none", kind: ReplyHelp, data: HelpReply{}},
		{name: "unknown_command", kind: ReplyUnknownCommand, data: UnknownCommandReply{Names: []string{"retyr"}, Commands: all}},
		{name: "unknown_commands", kind: ReplyUnknownCommand, data: &UnknownCommandReply{Names: []string{"retyr", "merge-now"}, Commands: all}},
		{name: "refused", kind: ReplyRefused, data: RefusedReply{Name: "resume", Because: BecauseRole, Who: "operators only"}},
		{name: "refused_access", kind: ReplyRefused, data: RefusedReply{Name: "retry", Because: BecauseAccess, Who: "the change's requester, the MR author, project members with Developer access or more", Reason: "it leads to a merge into main, which needs access level 40 (Maintainer) or more"}},
		{name: "refused_state", kind: ReplyRefused, data: RefusedReply{Name: "retry", Because: BecauseState, Who: "the change's requester", Reason: "it applies to a failed change; this one is VALIDATED (CALLED_BACK)"}},
		{name: "refused_approval_system", kind: ReplyRefused, data: RefusedReply{Name: "approve", Because: BecauseApprovalSystem, Who: "approvers", TicketID: "APR-1001", TicketURL: "https://approvals.example.com/tickets/APR-1001"}},
		{name: "refused_approval_system_no_ticket", kind: ReplyRefused, data: RefusedReply{Name: "reject", Because: BecauseApprovalSystem, Who: "approvers"}},
		{name: "no_change", kind: ReplyNoChange, data: NoChangeReply{Names: []string{"retry", "status"}}},
		// On GitHub the replies name the pull request and GitHub (issue 15).
		{name: "refused_approval_system_github", kind: ReplyRefused, data: RefusedReply{Name: "approve", Because: BecauseApprovalSystem, Who: "approvers", TicketID: "APR-1001", TicketURL: "https://approvals.example.com/tickets/APR-1001", Platform: "github"}},
		{name: "no_change_github", kind: ReplyNoChange, data: NoChangeReply{Names: []string{"retry", "status"}, Platform: "github"}},
		{name: "queue_frozen", kind: ReplyQueue, data: QueueReply{Branch: "main", Frozen: true, By: "olivia", Reason: "main is red @all"}},
		{name: "queue_already_frozen", kind: ReplyQueue, data: QueueReply{Branch: "release/1.0", Frozen: true, Already: true, By: "api:0123456789abcdef", Reason: "release freeze", Platform: "github"}},
		{name: "queue_unfrozen", kind: ReplyQueue, data: QueueReply{Branch: "main"}},
		{name: "rate_limited", kind: ReplyRateLimited, data: RateLimitedReply{Limit: 10, Window: time.Minute, Until: time.Date(2026, 3, 9, 14, 5, 0, 0, time.UTC)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := r.Reply(tc.kind, tc.data)
			if err != nil {
				t.Fatalf("Reply: %v", err)
			}
			if strings.Contains(got, MarkerPrefix) {
				t.Errorf("reply carries the status marker:\n%s", got)
			}
			checkGolden(t, "reply_"+tc.name, got)
		})
	}
}

func TestReplyErrors(t *testing.T) {
	t.Parallel()
	r := setup(t)
	tests := []struct {
		name string
		kind string
		data any
		want string
	}{
		{name: "unknown kind", kind: "hello", data: HelpReply{}, want: `unknown reply kind "hello"`},
		{name: "wrong data type", kind: ReplyHelp, data: RefusedReply{}, want: "want templates.HelpReply"},
		{name: "nil data", kind: ReplyHelp, data: nil, want: "want templates.HelpReply"},
		{name: "nil pointer", kind: ReplyHelp, data: (*HelpReply)(nil), want: "want templates.HelpReply"},
		{name: "map data", kind: ReplyNoChange, data: map[string]any{"Names": []string{"x"}}, want: "want templates.NoChangeReply"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := r.Reply(tc.kind, tc.data)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Reply = %q, %v; want an error containing %q", got, err, tc.want)
			}
		})
	}
}

func TestNewRendererDir(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		files   map[string]string
		noDir   bool
		wantErr string
		// check runs on a renderer built without error.
		check func(t *testing.T, r *Renderer)
	}{
		{
			name:  "empty directory keeps the embedded templates",
			files: map[string]string{"README.md": "not a template"},
			check: func(t *testing.T, r *Renderer) {
				got, err := r.Status(base())
				if err != nil || !strings.Contains(got, "**Links:**") {
					t.Errorf("Status = %q, %v; want the embedded rendering", got, err)
				}
			},
		},
		{
			name:  "status override is used and keeps the marker",
			files: map[string]string{"status.md.tmpl": "Custom: {{.Status}} ({{.StepName}})\n"},
			check: func(t *testing.T, r *Renderer) {
				v := base()
				v.Status, v.StepName = "MERGING", "HANDLE_STARTED"
				got, err := r.Status(v)
				want := Marker(v.OperationID) + "\nCustom: MERGING (HANDLE_STARTED)\n"
				if err != nil || got != want {
					t.Errorf("Status = %q, %v; want %q", got, err, want)
				}
			},
		},
		{
			name:  "reply override is used",
			files: map[string]string{"reply_no_change.md.tmpl": "No change here.\n"},
			check: func(t *testing.T, r *Renderer) {
				got, err := r.Reply(ReplyNoChange, NoChangeReply{Names: []string{"retry"}})
				if err != nil || got != "No change here.\n" {
					t.Errorf("Reply = %q, %v", got, err)
				}
			},
		},
		{
			name:  "partial override is used by every template",
			files: map[string]string{"commands_table.md.tmpl": `{{define "commands_table"}}{{range .}}* {{.Usage}}{{"\n"}}{{end}}{{end}}`},
			check: func(t *testing.T, r *Renderer) {
				got, err := r.Reply(ReplyHelp, HelpReply{Commands: []CommandHelp{cmdStatus}})
				if err != nil || !strings.Contains(got, "* /status\n") {
					t.Errorf("Reply = %q, %v", got, err)
				}
			},
		},
		{
			name:    "status parse error",
			files:   map[string]string{"status.md.tmpl": "{{if .Status}}unclosed"},
			wantErr: "status.md.tmpl",
		},
		{
			name:    "reply parse error",
			files:   map[string]string{"reply_help.md.tmpl": "{{.Commands"},
			wantErr: "reply_help.md.tmpl",
		},
		{
			name:    "partial parse error",
			files:   map[string]string{"commands_table.md.tmpl": "{{define \"commands_table\"}}{{range .}}"},
			wantErr: "commands_table.md.tmpl",
		},
		{
			name:    "unknown function",
			files:   map[string]string{"status.md.tmpl": "{{shout .Status}}"},
			wantErr: `function "shout" not defined`,
		},
		{
			name:    "unknown field fails at start-up",
			files:   map[string]string{"status.md.tmpl": "{{.Colour}}"},
			wantErr: "can't evaluate field Colour",
		},
		{
			name:    "misspelt file name",
			files:   map[string]string{"stauts.md.tmpl": "x"},
			wantErr: "unknown template name",
		},
		{
			name:    "missing directory",
			noDir:   true,
			wantErr: "reading template directory",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			for name, text := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if tc.noDir {
				dir = filepath.Join(dir, "absent")
			}
			r, err := NewRenderer(&RendererOpts{Dir: dir})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("NewRenderer error = %v, want one containing %q", err, tc.wantErr)
				}
				if r != nil {
					t.Errorf("NewRenderer returned a renderer with its error")
				}
				return
			}
			if err != nil {
				t.Fatalf("NewRenderer: %v", err)
			}
			tc.check(t, r)
		})
	}
}

func TestParseMarker(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		body   string
		wantID string
		wantOK bool
	}{
		{name: "marker alone", body: Marker("op_1"), wantID: "op_1", wantOK: true},
		{name: "marker then body", body: Marker("op_1") + "\n**State:** MERGING", wantID: "op_1", wantOK: true},
		{name: "marker with CRLF", body: Marker("op_1") + "\r\nx", wantID: "op_1", wantOK: true},
		{name: "marker not on the first line", body: "hello\n" + Marker("op_1")},
		{name: "empty id", body: Marker("")},
		{name: "unterminated", body: MarkerPrefix + " operation_id=op_1"},
		{name: "other comment", body: "<!-- something -->"},
		{name: "empty body"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			id, ok := ParseMarker(tc.body)
			if id != tc.wantID || ok != tc.wantOK {
				t.Errorf("ParseMarker(%q) = %q, %v; want %q, %v", tc.body, id, ok, tc.wantID, tc.wantOK)
			}
		})
	}
}

func TestFuncs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		got  string
		want string
	}{
		{name: "cell escapes pipes and newlines", got: escapeCell("a|b\nc\r\nd"), want: `a\|b c d`},
		{name: "text hides no comment", got: escapeText("x <!-- y"), want: "x &lt;!-- y"},
		{name: "text renders no tag", got: escapeCell("wrong </details> <b>file</b>"), want: "wrong &lt;/details> &lt;b>file&lt;/b>"},
		{name: "code plain", got: codeSpan("svc"), want: "`svc`"},
		{name: "code with backticks", got: codeSpan("a``b"), want: "```a``b```"},
		{name: "code starting with a backtick", got: codeSpan("`a"), want: "`` `a ``"},
		{name: "code with a pipe", got: codeSpan("a|b"), want: "`a\\|b`"},
		{name: "quote one line", got: quoteBlock("failed"), want: "> failed"},
		{name: "quote several lines", got: quoteBlock("a\r\n\nb\n"), want: "> a\n>\n> b"},
		{name: "text neutralises mentions", got: escapeText("ping @all"), want: "ping @\u200ball"},
		{name: "quote neutralises mentions", got: quoteBlock("@alice <!--"), want: "> @\u200balice &lt;!--"},
		{name: "url keeps https", got: escapeURL("https://x.example/a b(c)"), want: "https://x.example/a%20b%28c%29"},
		{name: "url drops javascript", got: escapeURL("javascript:alert(1)"), want: ""},
		{name: "url drops relative", got: escapeURL("/path"), want: ""},
		{name: "url drops host-less", got: escapeURL("https:///x"), want: ""},
		{name: "linkto links", got: linkTo("ticket [1]", "https://x.example/t"), want: `[ticket \[1\]](https://x.example/t)`},
		{name: "linkto without url", got: linkTo("!7", ""), want: "!7"},
		{name: "linkto with unsafe url", got: linkTo("x", "javascript:alert(1)"), want: "x"},
		{name: "utc converts", got: formatUTC(time.Date(2026, 1, 2, 4, 5, 6, 0, time.FixedZone("X", 3600))), want: "2026-01-02 03:05:06Z"},
		{name: "utc zero", got: formatUTC(time.Time{}), want: "-"},
		{name: "duration minute", got: formatDuration(time.Minute), want: "1 minute"},
		{name: "duration hours", got: formatDuration(2 * time.Hour), want: "2 hours"},
		{name: "duration seconds", got: formatDuration(90 * time.Second), want: "90 seconds"},
		{name: "duration odd", got: formatDuration(1500 * time.Millisecond), want: "1.5s"},
		{name: "tidy", got: tidy("\n\na  \n\n\n\nb\t\n\n"), want: "a\n\nb\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.got != tc.want {
				t.Errorf("got %q, want %q", tc.got, tc.want)
			}
		})
	}
}

// TestDraftHeadlineSaysItWaitsForReady: a change in HANDLE_DRAFT waits for
// a person to mark its draft ready; its headline says so, not "Merging …"
// (on GitLab and GitHub alike).
func TestDraftHeadlineSaysItWaitsForReady(t *testing.T) {
	t.Parallel()
	r := setup(t)
	for _, tc := range statusCases() {
		if tc.view.StepName != "HANDLE_DRAFT" {
			continue
		}
		got, err := r.Status(tc.view)
		if err != nil {
			t.Fatalf("%s: Status: %v", tc.name, err)
		}
		lines := strings.SplitN(got, "\n", 3)
		if len(lines) < 2 || strings.Contains(lines[1], "Merging") || !strings.Contains(lines[1], "is a draft: waiting for a person to mark it ready") {
			t.Errorf("%s: headline %q, want it to say the draft waits to be marked ready", tc.name, lines[1])
		}
	}
}
