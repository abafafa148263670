package flows_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"changebot/flows"
	"changebot/flows/flowtest"
	"changebot/flows/rules"
	"changebot/platform"
	"changebot/store"
)

// TestMergeHookWaitsForTheMergeToSettle: a Merge Request Hook is checked
// against the MR GitLab shows (TestMergeHookIsCheckedWithThePlatform). While
// GitLab is still merging (the MR "locked"), or its read lags just behind a
// "merge" hook (still "opened"), the delivery is read again shortly instead
// of being counted contradicted and dropped; once GitLab shows the merge,
// the hook moves the change. An MR that stays locked, or a close hook on an
// opened MR, is contradicted as before (the first once the delivery's waits
// are used up).
func TestMergeHookWaitsForTheMergeToSettle(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, file string
		locked     bool // GitLab shows the MR locked when the hook comes
		merge      bool // a person's merge takes effect before the next read
		want       rules.StepCode
		// contradicted is the count of changebot_webhooks_contradicted_total
		// by action at the end.
		contradicted map[string]float64
	}{
		{name: "locked, then merged", file: "webhook-merge_request-merge.json", locked: true, merge: true,
			want: rules.HandleMerged, contradicted: map[string]float64{}},
		{name: "opened (a lagging read), then merged", file: "webhook-merge_request-merge.json", merge: true,
			want: rules.HandleMerged, contradicted: map[string]float64{}},
		{name: "locked throughout", file: "webhook-merge_request-merge.json", locked: true,
			want: rules.ApprovalSent, contradicted: map[string]float64{"merge": 1}},
		{name: "opened throughout", file: "webhook-merge_request-merge.json",
			want: rules.ApprovalSent, contradicted: map[string]float64{"merge": 1}},
		{name: "close hook on an opened MR: at once", file: "webhook-merge_request-close.json",
			want: rules.ApprovalSent, contradicted: map[string]float64{"close": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := flowtest.New(t, nil)
			p := flowtest.Change("svc")
			p.ApprovalFirst = false
			op := h.ToMROpened(t, p)
			h.DeliverWebhooks(t)
			h.WorkUntilIdle(t)
			h.RequireStep(t, op.ID, rules.ApprovalSent)
			if tc.locked {
				h.GitLab.SetMRLocked(h.Project.ID, op.MRIID, true)
				if mr := h.MR(t, op.ID); mr.State != platform.MRStateLocked {
					t.Fatalf("MR state %s, want locked", mr.State)
				}
			}

			h.Deliver(t, forgedMRHook(t, tc.file, h.Project.ID, op.MRIID))
			h.WorkUntilIdle(t)
			h.RequireStep(t, op.ID, rules.ApprovalSent)
			if tc.file == "webhook-merge_request-merge.json" {
				if c := contradictedCount(t, h); len(c) != 0 {
					t.Fatalf("the merge hook was counted contradicted at its first read (%v), want it read again", c)
				}
				if n := len(h.Jobs(t, rules.KindProcessDelivery)); n != 1 {
					t.Fatalf("%d delivery jobs wait, want the merge hook's, snoozed", n)
				}
			}

			var mergeSHA string
			if tc.merge {
				h.GitLab.SetMRLocked(h.Project.ID, op.MRIID, false) // the merge GitLab was running goes through
				merged, err := h.ClientAs(t, flowtest.Requester).Merge(context.Background(), h.Project.ID, op.MRIID,
					platform.MergeParams{SHA: h.MR(t, op.ID).SHA})
				if err != nil {
					t.Fatal(err)
				}
				mergeSHA = merged.MergeCommitSHA
				h.TakeWebhooks(t) // lost: only the first hook tells the bot
			}
			h.RunFor(t, 10*time.Second)
			got := h.RequireStep(t, op.ID, tc.want)
			if c := contradictedCount(t, h); !equalCounts(c, tc.contradicted) {
				t.Errorf("contradicted webhooks counted %v, want %v", c, tc.contradicted)
			}
			if tc.merge {
				if got.MergeCommitSHA != mergeSHA || mergeSHA == "" {
					t.Errorf("merge commit %q, want GitLab's %q", got.MergeCommitSHA, mergeSHA)
				}
				var from string
				for _, ev := range h.Events(t, op.ID) {
					if rules.StepCode(ev.ToStep) == rules.HandleMerged {
						from = ev.Source
					}
				}
				if !strings.HasPrefix(from, flows.SourceWebhook+":") {
					t.Errorf("HANDLE_MERGED entered from %q, want the merge hook's delivery", from)
				}
				wantBinding(t, h, op.ID, store.StatusMerged)
			} else if got.MergeCommitSHA != "" {
				t.Errorf("merge commit %q recorded from a webhook GitLab contradicts", got.MergeCommitSHA)
			}
			if n := len(h.Jobs(t, rules.KindProcessDelivery)); n != 0 {
				t.Errorf("%d delivery jobs still wait, want none (the waits are bounded)", n)
			}
		})
	}
}

func equalCounts(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
