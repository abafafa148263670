package bot

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"changebot/api"
	"changebot/demo"
	"changebot/flows/rules"
	"changebot/platform/approval/approvalfake"
	"changebot/store"
)

// TestDecisionBeforeSentIsAccepted makes the approval system answer the
// callback before it answers the request, so the decision reaches the bot
// while the change is still APPROVAL_SENDING (the SENT write has not
// happened): it is accepted and the change goes on to VALIDATED.
func TestDecisionBeforeSentIsAccepted(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, false, 100*time.Millisecond)
	ap := approvalfake.New(approvalfake.Options{Secret: demo.CallbackSecret, AutoDecision: "approved", DecideBeforeAnswer: true})
	t.Cleanup(ap.Close)
	env.Config.ApprovalURL = ap.URL()
	app, _ := startBot(t, env)
	ctx := context.Background()
	opID, err := demo.SubmitChange(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := demo.FollowChange(ctx, env, opID, 60*time.Second, func(api.ChangeView) {}); err != nil {
		t.Fatal(err)
	}
	if r := ap.Results(); len(r) != 1 || r[0] != rules.ResultAccepted {
		t.Fatalf("callback results %v, want [ACCEPTED]", r)
	}
	evs := eventsOf(t, app, opID)
	if len(evs) < 2 || rules.StepCode(evs[0].ToStep) != rules.ApprovalSending || rules.StepCode(evs[1].ToStep) != rules.CreateStarted {
		t.Fatalf("the decision did not arrive while APPROVAL_SENDING: first events %v", stepsOf(evs))
	}
}

func stepsOf(evs []storeEvent) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, rules.StepCode(ev.ToStep).String())
	}
	return out
}

// TestFlowOrderFlagFlipsWithApprovalsInFlight flips flow.approval_first
// both ways while approvals are pending: every change finishes in the order
// it started, and the callback of an MR-first change (its ext carries the MR
// iid) continues the MR-first way after the flag flipped back.
func TestFlowOrderFlagFlipsWithApprovalsInFlight(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, false, 100*time.Millisecond)
	startBot(t, env)
	ctx := context.Background()
	setFlag := func(v bool) {
		req, _ := http.NewRequest(http.MethodPut, env.BaseURL+"/api/v1/settings/flow.approval_first",
			bytes.NewReader([]byte(fmt.Sprintf(`{"value": %v}`, v))))
		req.Header.Set("Authorization", "Bearer "+demo.OperatorToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("setting flow.approval_first=%v: %v %v", v, err, resp.Status)
		}
		resp.Body.Close()
	}
	submit := func(subject string) string {
		t.Helper()
		body := fmt.Sprintf(`{"subject_id":%q,"target_key":"prod","project":%q,"title":"t %s","requested_by":%q,
			"files":[{"path":"svc/%s.yaml","content":"x: 1\n"}]}`, subject, demo.Project, subject, demo.Requester, subject)
		req, _ := http.NewRequest(http.MethodPost, env.BaseURL+"/api/v1/changes", bytes.NewReader([]byte(body)))
		req.Header.Set("Authorization", "Bearer "+demo.APIToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusAccepted {
			t.Fatalf("submitting %s: %v %v", subject, err, resp.Status)
		}
		defer resp.Body.Close()
		var out struct {
			OperationID string `json:"operation_id"`
		}
		_ = jsonDecode(resp, &out)
		return out.OperationID
	}
	decide := func(opID string) {
		t.Helper()
		for _, r := range env.Approvals.Requests() {
			if r.OperationID == opID {
				if res, err := env.Approvals.Decide(ctx, r, "approved", "req-"+opID); err != nil || res != rules.ResultAccepted {
					t.Fatalf("deciding %s: %s %v", opID, res, err)
				}
				return
			}
		}
		t.Fatalf("no approval request for %s", opID)
	}

	// A: approval-first, waiting for its decision when the flag flips off.
	setFlag(true)
	a := submit("a")
	waitStep(t, env, a, "APPROVAL_SENT", 30*time.Second)
	setFlag(false)
	// B: MR-first, waiting for its decision when the flag flips back on.
	b := submit("b")
	waitStep(t, env, b, "APPROVAL_SENT", 60*time.Second)
	setFlag(true)
	// C: approval-first again.
	c := submit("c")
	waitStep(t, env, c, "APPROVAL_SENT", 30*time.Second)

	decide(a)
	decide(b)
	decide(c)
	for id, wantFirst := range map[string]bool{a: true, b: false, c: true} {
		v, err := demo.FollowChange(ctx, env, id, 60*time.Second, func(api.ChangeView) {})
		if err != nil {
			t.Fatal(err)
		}
		if v.ApprovalFirst != wantFirst {
			t.Errorf("%s: approval_first=%v, want %v", id, v.ApprovalFirst, wantFirst)
		}
	}
	for _, r := range env.Approvals.Requests() {
		_, hasMR := r.Ext["mr_iid"]
		if (r.OperationID == b) != hasMR {
			t.Errorf("approval request of %s: ext %v (only the MR-first change carries mr_iid)", r.OperationID, r.Ext)
		}
	}
}

type storeEvent = store.Event

func jsonDecode(resp *http.Response, v any) error { return json.NewDecoder(resp.Body).Decode(v) }
