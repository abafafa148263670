package bot

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"changebot/demo"
)

// TestApproveInCommentPointsToTheApprovalSystem (issue 13 point 7): where
// approvals come from the approval system, "@changebot approve" in a comment
// is answered with a reply that points there, linking the ticket page the
// system gave (ticket_url).
func TestApproveInCommentPointsToTheApprovalSystem(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, true, 100*time.Millisecond)
	startBotWithPoll(t, env, shortDeadlines())
	opID, iid := runUntil(t, env, "CREATE_MR_OPENED")
	req := env.Approvals.Requests()
	if len(req) == 0 {
		t.Fatal("the approval system got no request")
	}
	ticket := req[0].TicketID
	ticketURL := env.Approvals.URL() + "/tickets/" + ticket
	if resp, err := http.Get(ticketURL); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the stand-in's ticket page %s: %v %v", ticketURL, resp, err)
	} else {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}

	env.GitLab.AddNoteAsUser(env.Project.ID, iid, demo.Approver, "@changebot approve")
	replies := waitReplies(t, env, iid, 1)
	want := "`/approve` was not run: approvals of this change come from the approval system, not from GitLab. Decide in its ticket [" +
		ticket + "](" + ticketURL + ")."
	if !strings.HasPrefix(replies[0].Body, want) {
		t.Fatalf("reply to @changebot approve:\n%s\nwant it to start with\n%s", replies[0].Body, want)
	}
	if v, _ := demo.GetChange(context.Background(), env, opID); v.Status == "REJECTED" || v.Status == "CLOSED" {
		t.Fatalf("the refused approve moved the change to %s", v.Status)
	}
}
