package flows_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"changebot/flows/flowtest"
	"changebot/flows/rules"
	"changebot/platform/gitlab"
)

// setTitle edits the title of the change's MR as person in GitLab (PUT
// .../merge_requests/:iid): a "Draft:" prefix marks it a draft, removing
// it marks it ready.
func setTitle(t *testing.T, h *flowtest.Harness, id, person, title string) {
	t.Helper()
	op := h.Op(t, id)
	u := fmt.Sprintf("%s/api/v4/projects/%d/merge_requests/%d?title=%s", h.GitLab.URL(), op.ProjectID, op.MRIID, url.QueryEscape(title))
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPut, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("PRIVATE-TOKEN", person+"-token")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("%s editing the title of !%d: %d", person, op.MRIID, res.StatusCode)
	}
}

// wantDraftChange asserts that the captured webhooks hold a Merge Request
// Hook "update" with changes.draft previous -> current.
func wantDraftChange(t *testing.T, h *flowtest.Harness, previous, current bool) {
	t.Helper()
	for _, w := range h.Webhooks(t) {
		ev, err := gitlab.DecodeHook(w.Event, w.Body)
		if err != nil || ev.MergeRequest == nil || ev.MergeRequest.Action != "update" {
			continue
		}
		var body struct {
			Changes struct {
				Draft *struct{ Previous, Current bool } `json:"draft"`
			} `json:"changes"`
		}
		if err := json.Unmarshal(w.Body, &body); err != nil {
			t.Fatal(err)
		}
		if d := body.Changes.Draft; d != nil && d.Previous == previous && d.Current == current {
			if !ev.MergeRequest.DraftChanged || ev.MergeRequest.Draft != current {
				t.Fatalf("decoded hook: draft %v changed %v, want draft %v changed", ev.MergeRequest.Draft, ev.MergeRequest.DraftChanged, current)
			}
			return
		}
	}
	t.Fatalf("no Merge Request Hook update with changes.draft %v -> %v in\n%s", previous, current, flowtest.Describe(h.Webhooks(t)))
}

// toDraft drives a change to the merge while alice made its MR a draft:
// the one merge call finds the draft.
func toDraft(t *testing.T, h *flowtest.Harness) string {
	t.Helper()
	op := h.ToMROpened(t, flowtest.Change("svc"))
	title := h.MR(t, op.ID).Title
	setTitle(t, h, op.ID, "alice", "Draft: "+title)
	wantDraftChange(t, h, false, true)
	h.DeliverWebhooks(t) // the pipeline hooks and alice's edit
	h.WorkUntilIdle(t)
	h.RequireStep(t, op.ID, rules.HandleDraft)
	h.RunFor(t, 2*time.Hour) // a draft has no deadline
	h.RequireStep(t, op.ID, rules.HandleDraft)
	wantCalls(t, h, http.MethodPut, pathMerge, "", false, 1)
	return op.ID
}

// TestDraftRules: a draft MR parks the change in HANDLE_DRAFT after the one
// merge call that discovered it, without a deadline and spending no round;
// when a person marks it ready (the Merge Request Hook with changes.draft,
// or the next poll when that hook is lost) it merges by itself, no /retry
// (issue 10 point 3).
func TestDraftRules(t *testing.T) {
	t.Parallel()
	ready := func(t *testing.T, h *flowtest.Harness, id string) {
		t.Helper()
		title := h.MR(t, id).Title
		setTitle(t, h, id, "alice", title[len("Draft: "):])
		wantDraftChange(t, h, true, false)
	}
	merged := func(t *testing.T, h *flowtest.Harness, id string) {
		wantSteps(t, h, id, rules.HandleApproved, rules.HandleDraft, rules.HandleApproved, rules.HandleMerged)
		wantCalls(t, h, http.MethodPut, pathMerge, "", false, 2)
		wantCalls(t, h, http.MethodPut, pathMerge, "", true, 1)
		if op := h.Op(t, id); op.Rounds != 0 || op.MergeCommitSHA == "" {
			t.Fatalf("rounds %d, merge commit %q: want no round spent and the merge recorded", op.Rounds, op.MergeCommitSHA)
		}
	}
	runRules(t, []rule{
		{name: "a draft waits in HANDLE_DRAFT saying so, merge tried once", want: rules.HandleDraft,
			run: toDraft,
			check: func(t *testing.T, h *flowtest.Harness, id string) {
				wantDetail(t, h, id, "mark it ready in GitLab")
				if op := h.Op(t, id); op.Rounds != 0 {
					t.Fatalf("rounds %d while a draft, want 0", op.Rounds)
				}
			}},
		{name: "marked ready: the Merge Request Hook with changes.draft merges at once", want: rules.HandleMerged,
			run: func(t *testing.T, h *flowtest.Harness) string {
				id := toDraft(t, h)
				ready(t, h, id)
				h.DeliverWebhooks(t)
				h.WorkUntilIdle(t) // no clock advance: the hook alone moves it
				return id
			},
			check: merged},
		{name: "marked ready, hook lost: the next poll merges", want: rules.HandleMerged,
			run: func(t *testing.T, h *flowtest.Harness) string {
				id := toDraft(t, h)
				ready(t, h, id)
				h.TakeWebhooks(t)
				h.Advance(flowtest.Poll.LongInterval)
				h.WorkUntilIdle(t)
				return id
			},
			check: merged},
	})
}
