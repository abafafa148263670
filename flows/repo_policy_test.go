package flows_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"changebot/flows"
	"changebot/flows/flowtest"
	"changebot/flows/rules"
	"changebot/platform/gitlab/gitlabfake"
	"changebot/store"
)

// policyBlobOf is the blob recorded as governing op's change when it
// opened its merge request (the "policy" of its CREATE_MR_OPENED event),
// and the invalid blob when the branch's file was invalid.
func policyBlobOf(t *testing.T, h *flowtest.Harness, id string) (blob, invalid string) {
	t.Helper()
	for _, ev := range h.Events(t, id) {
		if ev.ToStep != int(rules.CreateMROpened) {
			continue
		}
		var p struct {
			Policy *struct {
				Blob        string `json:"blob"`
				InvalidBlob string `json:"invalid_blob"`
			} `json:"policy"`
		}
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			t.Fatal(err)
		}
		if p.Policy != nil {
			return p.Policy.Blob, p.Policy.InvalidBlob
		}
	}
	return "", ""
}

// statusNoteOf is the body of the status comment on op's merge request.
func statusNoteOf(t *testing.T, h *flowtest.Harness, op store.Operation) string {
	t.Helper()
	mr, ok := h.GitLab.MergeRequest(op.ProjectID, op.MRIID)
	if !ok {
		t.Fatalf("no merge request !%d", op.MRIID)
	}
	for _, n := range mr.Notes {
		if strings.Contains(n.Body, "changebot:status") {
			return n.Body
		}
	}
	t.Fatalf("no status comment on !%d", op.MRIID)
	return ""
}

// TestRepoPolicyGoverns (issue 25 point 2): the target branch's
// .changebot.yml governs the changes that start from it, but only in the
// keys the server allows (policy.allow_override): with queue.mode "off"
// allowed, changes to a fast-forward project merge without waiting in a
// queue; with only another key allowed, the server's auto queues them. Once the branch's file
// becomes invalid, a change started after it keeps the last valid policy
// (it still does not queue), and its status comment says the branch's
// file is invalid, at which line and key, and which blob governs.
func TestRepoPolicyGoverns(t *testing.T) {
	t.Parallel()
	const valid = "version: 1\nqueue:\n  mode: \"off\"\n"
	const invalid = "version: 1\nqueue:\n  mode: always\n"
	for _, tc := range []struct {
		name    string
		allow   []string
		queued  bool
		comment string
	}{
		{name: "allowed", allow: []string{"queue.mode"}, queued: false},
		{name: "another key allowed", allow: []string{"merge.max_rounds"}, queued: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := flowtest.New(t, &flowtest.Opts{Project: gitlabfake.ProjectSpec{MergeMethod: "ff"},
				Configure: func(cfg *flows.EngineConfig) {
					cfg.AllowOverrideFunc = func(project string) []string {
						if project != flowtest.ProjectPath {
							t.Errorf("allow list asked for %q", project)
						}
						return tc.allow
					}
					cfg.QueueFunc = func(string) flows.QueueConfig {
						return flows.QueueConfig{Mode: rules.QueueAuto, PipelineRetries: 1, DeferCI: rules.DeferCIOff}
					}
				}})
			if h.GitLab.Push(h.Project.ID, "main", flowtest.Requester, "Add the policy", map[string]string{".changebot.yml": valid}) == "" {
				t.Fatal("pushing the policy failed")
			}
			queuedIn := func(ids []string) int {
				n := 0
				for _, id := range ids {
					n += countSteps(t, h, id, rules.HandleQueued)
				}
				return n
			}
			first := submitApproved(t, h, 3)
			driveAll(t, h, first, 2*time.Hour)
			validBlob, _ := policyBlobOf(t, h, first[0])
			if validBlob == "" {
				t.Fatal("the first change recorded no governing policy")
			}
			if got := queuedIn(first); (got > 0) != tc.queued {
				t.Errorf("first changes: %d queue waits, want queued=%v", got, tc.queued)
			}

			h.GitLab.Push(h.Project.ID, "main", flowtest.Requester, "Break the policy", map[string]string{".changebot.yml": invalid})
			h.Advance(2 * time.Minute) // past the minute a branch's read is shared
			var later []string
			for i := range 3 {
				later = append(later, h.Submit(t, flowtest.Change(fmt.Sprintf("late-%d", i))).ID)
			}
			h.WorkUntilIdle(t)
			for _, id := range later {
				if res := h.Decide(t, id, rules.DecisionApproved); res != rules.ResultAccepted {
					t.Fatalf("approving %s: %s", id, res)
				}
			}
			driveAll(t, h, later, 2*time.Hour)
			blob, bad := policyBlobOf(t, h, later[0])
			if blob != validBlob || bad == "" || bad == validBlob {
				t.Fatalf("a change after the invalid push recorded governing %q, invalid %q; want the last valid %q and the new blob", blob, bad, validBlob)
			}
			if got := queuedIn(later); (got > 0) != tc.queued {
				t.Errorf("changes after the invalid push: %d queue waits, want queued=%v (the last valid policy)", got, tc.queued)
			}
			note := statusNoteOf(t, h, h.Op(t, later[0]))
			for _, want := range []string{"is invalid", "line 3 `queue.mode`", "the last valid one (blob `" + validBlob[:8] + "`) governs this change"} {
				if !strings.Contains(note, want) {
					t.Errorf("status comment lacks %q:\n%s", want, note)
				}
			}
			if note := statusNoteOf(t, h, h.Op(t, first[0])); !strings.Contains(note, "**Policy:** `.changebot.yml` of the target branch (blob `"+validBlob[:8]+"`)") {
				t.Errorf("the first change's status comment does not name its policy:\n%s", note)
			}
		})
	}
}

// TestRepoPolicyNotReadWhereNothingApplies: in a project whose server lets
// its .changebot.yml set nothing (no policy.allow_override, no adoption)
// the file is never read, so a change costs no call for it, and the status
// comment names no policy.
func TestRepoPolicyNotReadWhereNothingApplies(t *testing.T) {
	t.Parallel()
	h := flowtest.New(t, nil)
	h.GitLab.Push(h.Project.ID, "main", flowtest.Requester, "Add the policy", map[string]string{".changebot.yml": "version: 1\nqueue:\n  mode: \"off\"\n"})
	op := h.ToMROpened(t, flowtest.Change("svc"))
	if n := h.GitLab.CallCount("GET", "/api/v4/projects/*/repository/files/*/raw"); n != 0 {
		t.Errorf("%d reads of a repository file, want none", n)
	}
	if blob, _ := policyBlobOf(t, h, op.ID); blob != "" {
		t.Errorf("the change recorded policy %q, want none", blob)
	}
}
