package flows_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"changebot/flows/flowtest"
	"changebot/flows/rules"
	"changebot/platform"
	"changebot/templates"
)

// render renders the status comment of v.
func render(t *testing.T, v templates.StatusView) (string, error) {
	t.Helper()
	r, err := templates.NewRenderer(nil)
	if err != nil {
		t.Fatal(err)
	}
	return r.Status(v)
}

// rowsOf is what each timeline row of a status view says.
func rowsOf(v templates.StatusView) []string {
	var out []string
	for _, r := range v.Timeline {
		out = append(out, r.What)
	}
	return out
}

// TestStatusRowsSayWhatHappened (issue 23 point 5): on a change carried
// from submit to VALIDATED each timeline row says what happened, in
// words, and a flawless run announces nothing left out (its merge claim
// is routine).
func TestStatusRowsSayWhatHappened(t *testing.T) {
	t.Parallel()
	h := flowtest.New(t, nil)
	op := h.ToMerged(t, flowtest.Change("svc"))
	h.DeliverWebhooks(t)
	h.WorkUntilIdle(t)
	done := h.RequireStep(t, op.ID, rules.CalledBack)
	v := h.Engine.StatusView(done, h.Events(t, op.ID))
	rows := rowsOf(v)
	want := []string{
		"submitted by " + flowtest.Requester + " (1 file)",
		"approval requested: ticket " + done.TicketID,
		"approved by carol",
		fmt.Sprintf("merge request !%d opened", done.MRIID),
		fmt.Sprintf("pipeline %d passed", done.PipelineID),
		"merging started",
		"merged",
	}
	for _, w := range want {
		if !slices.Contains(rows, w) {
			t.Errorf("timeline rows %q lack %q", rows, w)
		}
	}
	if last := rows[len(rows)-1]; !strings.HasPrefix(last, "applied: deploy pipeline ") || !strings.HasSuffix(last, " passed") {
		t.Errorf("last row %q, want the deploy pipeline that applied it", last)
	}
	body, err := render(t, v)
	if err != nil {
		t.Fatal(err)
	}
	if v.RetriedCalls != 0 || strings.Contains(body, "not shown") || strings.Contains(body, "claim") {
		t.Errorf("a flawless run announces %d retried calls:\n%s", v.RetriedCalls, body)
	}
}

// TestStatusRowsTellRefusalsFromApprovals (issue 23 point 5): four
// refused commands and an approval on a change waiting for approvers in
// GitLab were five identical rows "APPROVAL_SENT | APPROVAL_SENT | <user>";
// now each says what happened, and while it waits the comment names who
// may approve and how many approvals are needed (the requester, who may
// not approve their own change, is not named).
func TestStatusRowsTellRefusalsFromApprovals(t *testing.T) {
	t.Parallel()
	h, sendingOp := gitlabApprovalHarness(t)
	op, _ := toApprovalSent(t, h, sendingOp)
	ctx := context.Background()
	waiting := h.Engine.StatusView(h.Op(t, op.ID), h.Events(t, op.ID))
	if a := waiting.Approvals; a == nil || a.Required != 1 || !slices.Equal(a.Approvers, []string{"carol"}) || len(a.Given) != 0 {
		t.Fatalf("waiting for approval in GitLab: approvals %+v, want 1 needed from carol", a)
	}
	body, err := render(t, waiting)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(body, "**Approvals:** needs 1 approval from carol: approve merge request [!") {
		t.Errorf("the comment does not say who approves and how many:\n%s", body)
	}

	// The reasons as the command layer records them (commands.Executor).
	refusals := []struct{ who, cmd, reason, want string }{
		{"dave", "cancel", "/cancel needs: the change's requester and operators", "/cancel refused: role — the change's requester and operators"},
		{"rita", "retry", "/retry applies to a failed change; this one is APPROVAL_SENT (APPROVAL_SENT)", "/retry refused: state — it applies to a failed change; this one is APPROVAL_SENT (APPROVAL_SENT)"},
		{"dave", "resume", "/resume leads to a merge into main, which needs access level 40 (Maintainer) or more", "/resume refused: access — it leads to a merge into main, which needs access level 40 (Maintainer) or more"},
		{flowtest.Requester, "approve", flowtest.Requester + " requested this change and cannot decide on it", "/approve refused: " + flowtest.Requester + " requested this change and cannot decide on it"},
	}
	for i, r := range refusals {
		p := rules.ActionParams{Actor: r.who, Source: fmt.Sprintf("command:%d", 100+i), Command: r.cmd}
		if err := h.Engine.Refuse(ctx, h.Op(t, op.ID), p, r.reason); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Engine.DecideInGitLab(ctx, h.Op(t, op.ID), platform.User{Username: "carol"}, rules.GitLabApprove, "command:200"); err != nil {
		t.Fatalf("carol's approval: %v", err)
	}
	v := h.Engine.StatusView(h.Op(t, op.ID), h.Events(t, op.ID))
	rows := rowsOf(v)
	for _, r := range refusals {
		if !slices.Contains(rows, r.want) {
			t.Errorf("timeline rows %q lack %q", rows, r.want)
		}
	}
	if !slices.Contains(rows, "approved by carol") {
		t.Errorf("timeline rows %q lack carol's approval", rows)
	}
	if last := rows[len(rows)-1]; last != "approved by carol: 1 approval, enough to merge" {
		t.Errorf("last row %q, want the move on with carol's approval", last)
	}
	if v.Approvals != nil {
		t.Errorf("approved: the comment still asks for approvals %+v", v.Approvals)
	}
}
