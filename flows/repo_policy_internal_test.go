package flows

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"changebot/flows/rules"
	"changebot/repoconfig"
	"changebot/store"
	"changebot/templates"
)

// TestGitBlobID pins the governing file's id to git's own blob id, so the
// status comment's blob can be checked with `git hash-object`.
func TestGitBlobID(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ data, want string }{
		{"", "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"},        // git's empty blob
		{"hello\n", "ce013625030ba8dba906f756967f9e9ca394464a"}, // echo hello | git hash-object --stdin
	} {
		if got := gitBlobID([]byte(c.data)); got != c.want {
			t.Errorf("gitBlobID(%q) = %s, want %s", c.data, got, c.want)
		}
	}
	if _, err := exec.LookPath("git"); err == nil {
		data := "version: 1\nqueue:\n  mode: on\n"
		cmd := exec.Command("git", "hash-object", "--stdin")
		cmd.Stdin = strings.NewReader(data)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git hash-object: %v", err)
		}
		if got, want := gitBlobID([]byte(data)), strings.TrimSpace(string(out)); got != want {
			t.Errorf("gitBlobID = %s, git hash-object says %s", got, want)
		}
	}
}

// TestRepoPolicyOverrides (issue 25 point 2): the governing file's queue,
// merge and approval values replace the server's settings only for the
// keys the server lists in policy.allow_override for the project; a key
// the file leaves out keeps the server's value; another branch's policy
// never applies.
func TestRepoPolicyOverrides(t *testing.T) {
	t.Parallel()
	pol, err := repoconfig.Parse([]byte(`version: 1
approval:
  provider: gitlab
  approvers: [carol]
  required: 2
queue:
  mode: "off"
  pipeline_retries: 0
merge:
  max_rounds: 9
`))
	if err != nil {
		t.Fatal(err)
	}
	server := QueueConfig{Mode: rules.QueueAuto, PipelineRetries: 1, DeferCI: rules.DeferCIAuto}
	serverApproval := ApprovalPolicy{Provider: rules.ProviderExternal, Required: 1}
	op := store.Operation{Project: "platform/config", ProjectID: 7, TargetBranch: "main"}
	tests := []struct {
		name      string
		allow     []string
		op        store.Operation
		queue     QueueConfig
		rounds    int
		approval  ApprovalPolicy
		approvers []string
	}{
		{name: "nothing allowed: the server's settings", op: op, queue: server, rounds: 3, approval: serverApproval},
		{name: "queue.mode allowed", allow: []string{"queue.mode"}, op: op,
			queue: QueueConfig{Mode: "off", PipelineRetries: 1, DeferCI: rules.DeferCIAuto}, rounds: 3, approval: serverApproval},
		{name: "retries 0 is none", allow: []string{"queue.pipeline_retries", "queue.defer_ci"}, op: op,
			queue: QueueConfig{Mode: rules.QueueAuto, PipelineRetries: -1, DeferCI: rules.DeferCIAuto}, rounds: 3, approval: serverApproval},
		{name: "merge and approval allowed", allow: []string{"merge.max_rounds", "approval.provider", "approval.required", "approval.approvers"}, op: op,
			queue: server, rounds: 9, approval: ApprovalPolicy{Provider: rules.ProviderGitLab, Required: 2}, approvers: []string{"carol"}},
		{name: "another branch: its own policy (none)", allow: []string{"queue.mode", "merge.max_rounds"},
			op: store.Operation{Project: "platform/config", ProjectID: 7, TargetBranch: "release"}, queue: server, rounds: 3, approval: serverApproval},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := &Engine{cfg: EngineConfig{AllowOverrideFunc: func(project string) []string {
				if project != "platform/config" {
					t.Errorf("allow list asked for project %q", project)
				}
				return tt.allow
			}}}
			e.policies.put(policyKey{7, "main"}, cachedPolicy{g: Governing{Policy: pol, Blob: "b1"}})
			if got := e.applyQueuePolicy(tt.op, server); got != tt.queue {
				t.Errorf("queue = %+v, want %+v", got, tt.queue)
			}
			if got := e.applyPollPolicy(tt.op, PollConfig{MaxRounds: 3}).MaxRounds; got != tt.rounds {
				t.Errorf("max rounds = %d, want %d", got, tt.rounds)
			}
			got := e.applyApprovalPolicy(tt.op, serverApproval)
			if got.Provider != tt.approval.Provider || got.Required != tt.approval.Required || strings.Join(got.Approvers, ",") != strings.Join(tt.approvers, ",") {
				t.Errorf("approval = %+v, want %+v with approvers %v", got, tt.approval, tt.approvers)
			}
		})
	}
}

// TestPolicyView: the status comment's policy line comes from the newest
// event that recorded a policy; an invalid branch file names its first
// problem and the governing last valid file.
func TestPolicyView(t *testing.T) {
	t.Parallel()
	ev := func(payload map[string]any) store.Event {
		raw, err := json.Marshal(payload)
		if err != nil {
			t.Fatal(err)
		}
		return store.Event{Payload: raw}
	}
	invalid := &repoconfig.InvalidError{Problems: []repoconfig.Problem{
		{Key: "queue.mode", Line: 3, Message: "must be one of auto, on, off (not always)"}, {Key: "version", Line: 1, Message: "must be 1"}}}
	tests := []struct {
		name   string
		events []store.Event
		want   *templates.PolicyView
	}{
		{"no event records a policy", []store.Event{ev(map[string]any{"mr_iid": 3})}, nil},
		{"valid", []store.Event{ev(map[string]any{"policy": Governing{Blob: "0123456789abcdef"}.payload()})},
			&templates.PolicyView{Blob: "01234567"}},
		{"invalid, the last valid governs", []store.Event{
			ev(map[string]any{"policy": Governing{Blob: "0123456789abcdef"}.payload()}),
			ev(map[string]any{"policy": Governing{Blob: "0123456789abcdef", Invalid: invalid, InvalidBlob: "fedcba9876543210"}.payload()}),
			ev(map[string]any{"head_sha": "x"}),
		}, &templates.PolicyView{Blob: "01234567", InvalidBlob: "fedcba98", Problem: "line 3 `queue.mode`: must be one of auto, on, off (not always)", More: 1}},
		{"invalid and none valid", []store.Event{ev(map[string]any{"policy": Governing{Invalid: invalid, InvalidBlob: "fedcba9876543210"}.payload()})},
			&templates.PolicyView{InvalidBlob: "fedcba98", Problem: "line 3 `queue.mode`: must be one of auto, on, off (not always)", More: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := policyView(tt.events)
			switch {
			case got == nil && tt.want == nil:
			case got == nil || tt.want == nil || *got != *tt.want:
				t.Errorf("policyView = %+v, want %+v", got, tt.want)
			}
		})
	}
}
