package flows_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"changebot/flows/flowtest"
	"changebot/flows/rules"
	"changebot/platform/gitlab/gitlabfake"
)

// Endpoints (gitlabfake's Call.Endpoint) of a happy-path change.
const (
	epBranchCreate = "POST /projects/:id/repository/branches"
	epCommitCreate = "POST /projects/:id/repository/commits"
	epMRCreate     = "POST /projects/:id/merge_requests"
	epApprove      = "POST /projects/:id/merge_requests/:iid/approve"
	epMerge        = "PUT /projects/:id/merge_requests/:iid/merge"
	epNoteCreate   = "POST /projects/:id/merge_requests/:iid/notes"
	epNoteUpdate   = "PUT /projects/:id/merge_requests/:iid/notes/:note_id"
	epProject      = "GET /projects/:id"
	epBranch       = "GET /projects/:id/repository/branches/:branch"
	epTree         = "GET /projects/:id/repository/tree"
	epMR           = "GET /projects/:id/merge_requests/:iid"
	epApprovals    = "GET /projects/:id/merge_requests/:iid/approvals"
	epNotes        = "GET /projects/:id/merge_requests/:iid/notes"
	epCurrentUser  = "GET /user"
)

// minimumCalls is the least a change can cost GitLab (issue 12): commit
// on a new branch (one call: start_branch creates the branch), open the
// MR, approve once per reviewer robot, merge, create the status note.
// Edits of the note count as the note.
func minimumCalls(reviewers int) map[string]float64 {
	return map[string]float64{epCommitCreate: 1, epMRCreate: 1, epApprove: float64(reviewers),
		epMerge: 1, epNoteCreate: 1}
}

// happyPathBudget is the GitLab call budget of one happy-path change by
// endpoint (docs/design.md §9 "GitLab calls per change"): the minimum plus
// the reads the flow needs. Deploy detection is budgeted per target-branch
// pipeline webhook (at most one compare), not per change.
func happyPathBudget(reviewers int) map[string]float64 {
	b := minimumCalls(reviewers)
	for ep, n := range map[string]float64{
		// The submit check's reads (its 422 or 503); the create step
		// shares the project's when less than a minute old
		// (projectReadTTL), as here: 2 per change otherwise.
		epProject:      1, // id, default branch, squash option
		epBranch:       1, // the target branch exists
		epTree:         0, // none: one file's create or update is guessed (guessedFile); several are listed once
		epBranchCreate: 0, // none: the commit creates the branch (start_branch)
		epMR:           2, // approve (head sha; it confirms the pipeline webhook, pipelineHookTrusted), merge (mergeable, rebase)
		epApprovals:    0, // none: a first round approves without reading (approvalsReadFirst)
		epNotes:        0, // none: the first note is created at once (store.NoteClaim.TakenOver)
		epNoteUpdate:   2, // the note's edits when merged and when validated (they count as the note)
	} {
		b[ep] = n
	}
	return b
}

// runHappyChange drives one change as GitLab and the approver would in
// real time, the clock moving 5 s between phases (so status note refreshes
// run as they would), webhooks delivered as GitLab sends them except the
// deploy pipeline's, which are returned.
func runHappyChange(t *testing.T, h *flowtest.Harness, subject string) (string, []gitlabfake.SentWebhook) {
	t.Helper()
	const phase = 5 * time.Second
	op := h.Submit(t, flowtest.Change(subject))
	h.RunFor(t, phase) // approval request
	h.Decide(t, op.ID, rules.DecisionApproved)
	h.RunFor(t, phase) // branch, commit, MR, the note
	deploy, rest := deployHooks(t, h.TakeWebhooks(t))
	h.Deliver(t, rest...) // the MR pipeline
	h.RunFor(t, phase)    // approve, merge
	h.RequireStep(t, op.ID, rules.HandleMerged)
	more, rest := deployHooks(t, h.TakeWebhooks(t))
	h.Deliver(t, rest...)
	h.RunFor(t, phase)
	return op.ID, append(deploy, more...)
}

// TestGitLabCallsPerHappyPathChange (issue 12 point 3, docs/design.md §9):
// happy-path changes, one after another into the same project and several
// merged before their deploy pipelines report, cost GitLab exactly the
// minimum writes and no more reads than the budget allows, by endpoint;
// every target-branch pipeline webhook costs at most one call (deploy
// detection does not grow with the merged changes). GET /user is the
// process's (once per robot token), not the change's, and is left out.
func TestGitLabCallsPerHappyPathChange(t *testing.T) {
	t.Parallel()
	const changes = 4
	tests := []struct {
		name      string
		reviewers int
		batch     bool // merge every change before delivering any deploy webhook
	}{
		{name: "1 reviewer, one after another", reviewers: 1},
		{name: "2 reviewers, one after another", reviewers: 2},
		{name: "2 reviewers, all merged before the deploy pipelines report", reviewers: 2, batch: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// Webhooks end every wait: no poll falls due during a change
			// (polling is the waiting budget's, docs/design.md §9).
			poll := flowtest.Poll
			poll.ShortInterval = 10 * time.Minute
			h := flowtest.New(t, &flowtest.Opts{Reviewers: tt.reviewers, Poll: poll})
			before := h.GitLab.CallsByEndpoint()
			var ids []string
			var held []gitlabfake.SentWebhook
			for i := range changes {
				id, deploy := runHappyChange(t, h, fmt.Sprintf("svc%d", i))
				ids = append(ids, id)
				if tt.batch {
					held = append(held, deploy...)
					continue
				}
				h.Deliver(t, deploy...)
				h.RunFor(t, 5*time.Second)
				h.RequireStep(t, id, rules.CalledBack)
			}
			slices.Reverse(held) // newest first
			for _, w := range held {
				n := len(h.GitLab.Calls())
				h.Deliver(t, w)
				h.WorkUntilIdle(t)
				if got := len(h.GitLab.Calls()) - n; got > 1 {
					t.Errorf("a target-branch pipeline webhook cost %d GitLab calls, want at most 1", got)
				}
			}
			h.RunFor(t, time.Minute) // the last note refreshes, the deploy polls
			for _, id := range ids {
				h.RequireStep(t, id, rules.CalledBack)
			}
			perChange := map[string]float64{}
			for ep, n := range diffCalls(before, h.GitLab.CallsByEndpoint()) {
				if ep != epCurrentUser {
					perChange[ep] = float64(n) / changes
				}
			}
			budget, minimum := happyPathBudget(tt.reviewers), minimumCalls(tt.reviewers)
			if tt.batch {
				budget[epCompare] = 1 // at most one per deploy webhook, one per change here
			}
			t.Logf("GitLab calls per change: %s; %.2f in all, %.2fx the minimum %.0f",
				formatCalls(perChange), sum(perChange), sum(perChange)/sum(minimum), sum(minimum))
			for _, ep := range slices.Sorted(maps.Keys(perChange)) {
				if perChange[ep] > budget[ep] {
					t.Errorf("%s: %.2f calls per change, budget %.0f", ep, perChange[ep], budget[ep])
				}
			}
			for ep, n := range minimum {
				if perChange[ep] != n {
					t.Errorf("%s: %.2f calls per change, want exactly %.0f (a write of the minimum)", ep, perChange[ep], n)
				}
			}
		})
	}
}

func sum(m map[string]float64) float64 {
	s := 0.0
	for _, v := range m {
		s += v
	}
	return s
}

func formatCalls(m map[string]float64) string {
	var parts []string
	for _, ep := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %.2f", ep, m[ep]))
	}
	return strings.Join(parts, "; ")
}
