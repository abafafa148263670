package flows_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"changebot/flows/flowtest"
	"changebot/flows/rules"
	"changebot/platform"
	"changebot/templates"
)

// TestStatusViewReadsLikeProse (issue 13 point 6): the status comment's view
// of a change links the ticket page the approval system gave, names the
// approver once decided and the deploy pipeline once merged, and puts every
// timeline source in words, never a stored "webhook:9" or "job:<kind>".
func TestStatusViewReadsLikeProse(t *testing.T) {
	t.Parallel()
	h := flowtest.New(t, nil)
	op := h.Submit(t, flowtest.Change("svc"))
	h.WorkUntilIdle(t)
	sent := h.RequireStep(t, op.ID, rules.ApprovalSent)
	view := func() templates.StatusView {
		o := h.Op(t, op.ID)
		return h.Engine.StatusView(o, h.Events(t, op.ID))
	}
	waiting := view()
	if want := flowtest.TicketURL + "/" + sent.TicketID; waiting.ApprovalURL != want {
		t.Errorf("waiting: ticket page %q, want %q (the approval system's ticket_url)", waiting.ApprovalURL, want)
	}
	if u, err := h.Engine.TicketURL(context.Background(), sent); err != nil || u != waiting.ApprovalURL {
		t.Errorf("TicketURL = %q, %v; want %q (what /approve points to)", u, err, waiting.ApprovalURL)
	}
	if p := h.Engine.ApprovalProvider(sent.Project); p != rules.ProviderExternal {
		t.Errorf("ApprovalProvider = %q, want external", p)
	}
	if waiting.Decision != "" || waiting.DecidedBy != nil || waiting.DeployURL != "" {
		t.Errorf("waiting: decision %q by %v, deploy %q; want none yet", waiting.Decision, waiting.DecidedBy, waiting.DeployURL)
	}

	if res := h.Decide(t, op.ID, rules.DecisionApproved); res != rules.ResultAccepted {
		t.Fatalf("approving: %s", res)
	}
	h.WorkUntilIdle(t)
	h.DeliverWebhooks(t)
	h.WorkUntilIdle(t)
	merged := h.RequireStep(t, op.ID, rules.HandleMerged)
	mv := view()
	if mv.Decision != rules.DecisionApproved || !slices.Equal(mv.DecidedBy, []string{"carol"}) {
		t.Errorf("merged: decision %q by %v, want approved by carol", mv.Decision, mv.DecidedBy)
	}
	project, _, _ := strings.Cut(merged.MRWebURL, "/-/merge_requests/")
	if want := project + "/-/commit/" + merged.MergeCommitSHA + "/pipelines"; merged.MergeCommitSHA == "" || mv.DeployURL != want {
		t.Errorf("merged: deploy link %q, want the merge commit's pipelines %q", mv.DeployURL, want)
	}

	h.DeliverWebhooks(t)
	h.WorkUntilIdle(t)
	h.RequireStep(t, op.ID, rules.CalledBack)
	vv := view()
	if !strings.HasPrefix(vv.DeployURL, project+"/-/pipelines/") {
		t.Errorf("validated: deploy link %q, want the confirming pipeline under %s/-/pipelines/", vv.DeployURL, project)
	}
	var sources []string
	for _, e := range vv.Timeline {
		sources = append(sources, e.Source)
		if strings.Contains(e.Source, ":") || strings.Contains(e.Actor, "approval:") {
			t.Errorf("timeline entry %s: source %q, actor %q; want words", e.StepName, e.Source, e.Actor)
		}
	}
	for _, want := range []string{"API request", "approval request", "approval system callback", "merge request creation", "pipeline webhook"} {
		if !slices.Contains(sources, want) {
			t.Errorf("timeline sources %q lack %q", sources, want)
		}
	}

	if err := h.Engine.RefreshNow(context.Background(), h.Op(t, op.ID)); err != nil {
		t.Fatal(err)
	}
	var body string
	for _, n := range h.MR(t, op.ID).Notes {
		if _, ok := templates.ParseMarker(n.Body); ok {
			body = n.Body
		}
	}
	for _, want := range []string{"**Applied: merged and confirmed by the [deploy pipeline](" + project + "/-/pipelines/",
		"<sub>VALIDATED · step CALLED_BACK (10301) · final</sub>", "**Approved by** carol in [" + sent.TicketID + "](" + flowtest.TicketURL} {
		if !strings.Contains(body, want) {
			t.Errorf("status comment lacks %q:\n%s", want, body)
		}
	}
}

// TestStatusViewNamesGitLabApprovers (issue 13 point 6): with approvals in
// GitLab the view says so, links no external ticket, and names the
// approvers once the change is approved.
func TestStatusViewNamesGitLabApprovers(t *testing.T) {
	t.Parallel()
	h, sendingOp := gitlabApprovalHarness(t)
	op, _ := toApprovalSent(t, h, sendingOp)
	waiting := h.Engine.StatusView(h.Op(t, op.ID), h.Events(t, op.ID))
	if !waiting.ApprovalInGitLab || waiting.ApprovalURL != "" || waiting.Decision != "" {
		t.Errorf("waiting in GitLab: in GitLab %v, ticket page %q, decision %q; want in GitLab, none, none",
			waiting.ApprovalInGitLab, waiting.ApprovalURL, waiting.Decision)
	}
	if err := h.Engine.DecideInGitLab(context.Background(), h.Op(t, op.ID), platform.User{Username: "carol"}, rules.GitLabApprove, "command:5"); err != nil {
		t.Fatalf("carol's approval: %v", err)
	}
	h.RequireStep(t, op.ID, rules.HandleStarted)
	v := h.Engine.StatusView(h.Op(t, op.ID), h.Events(t, op.ID))
	if v.Decision != rules.DecisionApproved || !slices.Equal(v.DecidedBy, []string{"carol"}) {
		t.Errorf("approved in GitLab: decision %q by %v, want approved by carol", v.Decision, v.DecidedBy)
	}
	last := v.Timeline[len(v.Timeline)-1]
	if last.Source != "comment by @carol" {
		t.Errorf("the approval's timeline source is %q, want %q", last.Source, "comment by @carol")
	}
}

// TestStatusViewCountsEveryEvent: the status comment's timeline shows
// every step and says what happened; a flawless run's merge claims are
// routine and neither shown nor announced ("1 retried call or merge claim
// not shown" read as a fault, issue 23 point 5), and only retried calls
// are counted (RetriedCalls). A merged change has at least the merge's
// claim.
func TestStatusViewCountsEveryEvent(t *testing.T) {
	t.Parallel()
	h := flowtest.New(t, nil)
	op := h.ToMerged(t, flowtest.Change("svc"))
	evs := h.Events(t, op.ID)
	v := h.Engine.StatusView(h.Op(t, op.ID), evs)
	claims, retried := 0, 0
	for _, e := range evs {
		switch e.Type {
		case "claim":
			claims++
		case "attempt":
			retried++
		}
	}
	if claims == 0 {
		t.Fatal("a merged change has no claim event; the test needs one")
	}
	if v.RetriedCalls != retried || len(v.Timeline)+claims+retried != len(evs) {
		t.Errorf("timeline %d, retried calls %d, of %d events with %d claims and %d attempts; want the claims left out uncounted",
			len(v.Timeline), v.RetriedCalls, len(evs), claims, retried)
	}
	for _, row := range v.Timeline {
		if row.What == "" || row.What == row.StepName {
			t.Errorf("timeline row at %s says no more than its step: %+v", row.StepName, row)
		}
	}
}
